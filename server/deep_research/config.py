"""A research's own settings: the optional `<root>/deep-research.toml` (SPEC §10).

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

    [fetch]
    offline = false                 # true: attach_url and search fail at once, no network at all
    allow_private_networks = false
    allowed_roots = ["~/papers"]    # folders attach_file may read besides the research

    [search]
    provider = "searxng"            # searxng | tavily | brave
    url = "http://127.0.0.1:8888"

Precedence, lowest first: built-in defaults, this file, the environment (the `openai`
package's `OPENAI_BASE_URL`), then the command line or the editor's `deepResearch.*`
settings (`Config.merged`). The API key is never a setting: it comes from the
environment only and is never written anywhere.

Reading never fails: a missing file is the defaults, and a broken one gives the defaults
for what cannot be read plus one problem message per mistake, for the caller to show.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .engine.names import expand_home
from .engine.rules import MIN_REPORT_MAX_WORDS
from .engine.store import CONFIG_FILE

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

GRAMMAR_CHOICES = ("auto", "on", "off")
APPROVAL_CHOICES = ("none", "read", "create", "update", "delete")
SEARCH_PROVIDERS = ("searxng", "tavily", "brave")


@dataclass(frozen=True)
class FetchConfig:
    offline: bool = False  # no page fetched, no search, not even a name looked up
    allow_private_networks: bool = False
    allowed_roots: tuple[Path, ...] = ()  # absolute; relative entries are taken from the research root


@dataclass(frozen=True)
class SearchConfig:
    provider: str | None = None  # one of SEARCH_PROVIDERS
    url: str | None = None  # the provider's endpoint (SearXNG: the instance's base URL)


@dataclass(frozen=True)
class Config:
    model: str | None = None
    base_url: str | None = None
    max_rounds: int | None = None
    max_tokens: int | None = None
    max_prompt_tokens: int | None = None
    max_reply_tokens: int | None = None
    approval_mode: str | None = None  # one of APPROVAL_CHOICES
    grammar: str = "auto"
    parallel: int | None = None  # the autopilot's researchers at once (None: 1)
    report_max_words: int | None = None  # None: the engine's default (engine/rules.py)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    search: SearchConfig = field(default_factory=SearchConfig)

    def rule_overrides(self) -> dict[str, Any]:
        """The research's rules this config sets (for `Research.rule_overrides`)."""
        return {} if self.report_max_words is None else {"report_max_words": self.report_max_words}

    def merged(self, **overrides: Any) -> Config:
        """This config with every override that is not None applied (the command line, the
        editor's settings). `fetch` and `search` take dicts of their own fields."""
        top = {k: v for k, v in overrides.items() if v is not None and k not in ("fetch", "search")}
        out = replace(self, **top)
        for name in ("fetch", "search"):
            sub = {k: v for k, v in (overrides.get(name) or {}).items() if v is not None}
            if sub:
                out = replace(out, **{name: replace(getattr(out, name), **sub)})
        return out


def load(root: Path, environ: dict[str, str] | None = None) -> tuple[Config, list[str]]:
    """The research's config: defaults < `deep-research.toml` < environment. Never raises;
    the second value lists what was wrong in the file, one sentence each."""
    env = os.environ if environ is None else environ
    problems: list[str] = []
    config = Config()
    path = root / CONFIG_FILE
    raw: dict[str, Any] = {}
    if path.is_file():
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            problems.append(f"{path} cannot be read ({error}); using the defaults")
    if raw:
        config = _from_table(raw, root, problems, str(path))
    if env.get("OPENAI_BASE_URL"):
        config = replace(config, base_url=env["OPENAI_BASE_URL"])
    return config, problems


def _from_table(raw: dict[str, Any], root: Path, problems: list[str], where: str) -> Config:
    def take(table: dict[str, Any], key: str, kind: type, choices: tuple[str, ...] = (), minimum: int | None = None):
        if key not in table:
            return None
        value = table[key]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if ok and choices:
            value = str(value).strip().lower()
            ok = value in choices
        if ok and minimum is not None:
            ok = value >= minimum
        if not ok:
            expected = f"one of {', '.join(choices)}" if choices else kind.__name__
            if minimum is not None:
                expected += f" ≥ {minimum}"
            problems.append(f"{where}: `{key}` must be {expected}, not {value!r}; ignored")
            return None
        return value

    known = {f.name for f in fields(Config)}
    for key in raw:
        if key not in known:
            problems.append(f"{where}: unknown key `{key}`; ignored")
    fetch_raw = raw.get("fetch") if isinstance(raw.get("fetch"), dict) else {}
    search_raw = raw.get("search") if isinstance(raw.get("search"), dict) else {}
    for name, table in (("fetch", fetch_raw), ("search", search_raw)):
        if name in raw and not isinstance(raw[name], dict):
            problems.append(f"{where}: `{name}` must be a table ([{name}]); ignored")
    roots: list[Path] = []
    listed = take(fetch_raw, "allowed_roots", list)
    for item in listed or []:
        if isinstance(item, str) and item.strip():
            folder = expand_home(item)
            roots.append(folder if folder.is_absolute() else root / folder)
        else:
            problems.append(f"{where}: `fetch.allowed_roots` holds {item!r}, not a folder; ignored")
    return Config(
        model=take(raw, "model", str),
        base_url=take(raw, "base_url", str),
        max_rounds=take(raw, "max_rounds", int, minimum=1),
        max_tokens=take(raw, "max_tokens", int, minimum=1),
        max_prompt_tokens=take(raw, "max_prompt_tokens", int, minimum=500),
        max_reply_tokens=take(raw, "max_reply_tokens", int, minimum=16),
        approval_mode=take(raw, "approval_mode", str, APPROVAL_CHOICES),
        grammar=take(raw, "grammar", str, GRAMMAR_CHOICES) or "auto",
        parallel=take(raw, "parallel", int, minimum=1),
        report_max_words=take(raw, "report_max_words", int, minimum=MIN_REPORT_MAX_WORDS),
        fetch=FetchConfig(
            offline=bool(take(fetch_raw, "offline", bool) or False),
            allow_private_networks=bool(take(fetch_raw, "allow_private_networks", bool) or False),
            allowed_roots=tuple(roots),
        ),
        search=SearchConfig(
            provider=take(search_raw, "provider", str, SEARCH_PROVIDERS),
            url=take(search_raw, "url", str),
        ),
    )
