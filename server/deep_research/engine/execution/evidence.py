"""Evidence from outside the research: what a message needs, and what it was given.

`attach_url`, `attach_file` and `search` bring material from outside, yet the engine
stays offline (no network, no reading of an outside file's content). Two phases:

1. Analysis, the dry run behind diagnostics, runs these commands without results: each
   checks its argument (a URL's form; a file's place, with a stat and nothing more) and
   records a `Need` on the draft.
2. The caller gathers the needs before the transaction (`deep_research.sources.gather`),
   then executes with `Evidence`. The same operations look their result up, check it like
   any other argument, and add the attachment, or fail with the reason the gatherer gave.

So engine tests stay offline (results are plain values) and a message is still one
all-or-nothing transaction: nothing is fetched inside it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence, Union
from urllib.parse import urlsplit

from ..core.names import expand_home, one_line
from ..core.text import Edit, Fix, visible
from ..store import MAX_READ_BYTES, watched_stat
from .protocol import Arg, Args, CommandError, Result, Warning_, quote

if TYPE_CHECKING:  # pragma: no cover
    from .draft import Draft

MAX_FILE_BYTES = 10 * 1024 * 1024  # attach_file: larger files are refused (a stat says so while typing)
# An attachment keeps its whole source, up to what the read guard reads of a file (its front
# matter has the rest of the room): past this many bytes of UTF-8 its text is cut, marked.
MAX_SOURCE_BYTES = MAX_READ_BYTES - 64 * 1024
MAX_TYPED_CHARS = 1_000_000  # an instruction, or a context text typed in (not a source)
MAX_QUERY_CHARS = 400
MAX_TITLE_CHARS = 150  # attachment names made from page titles
SCHEMES = ("http", "https")
# A host name (with a dot, or localhost) and maybe a port, then a path or nothing.
_HOST_FIRST = re.compile(r"^(?:localhost|[\w-]+(?:\.[\w-]+)+)(?::\d{1,5})?(?:[/?#]|$)", re.I)


class NeedKind(str, Enum):
    URL = "url"
    FILE = "file"
    SEARCH = "search"
    EMBED = "embed"  # a find's query, embedded for semantic search (when an endpoint is set)


@dataclass(frozen=True)
class Need:
    """One thing a message needs from outside. Equal needs share one result, so a URL
    written twice is fetched once; `line` ties it to its command (for progress)."""

    kind: NeedKind
    target: str  # the URL as written, the file's resolved real path, the query on one line
    line: int = field(default=0, compare=False)

    @property
    def label(self) -> str:
        return {NeedKind.URL: "fetch", NeedKind.FILE: "read", NeedKind.SEARCH: "search",
                NeedKind.EMBED: "embed the query"}[self.kind] + " " + self.target


@dataclass(frozen=True)
class Found:
    """What the outside world gave for a need, ready to become an attachment."""

    title: str  # names the attachment (a page's title, a file's name, "Search: …")
    text: str  # markdown or plain text
    source: str  # the URL, path or query as the message wrote it
    final_url: str = ""  # after redirects (URLs only)
    content_type: str = ""
    sha256: str = ""  # of the bytes received
    fetched: str = ""  # ISO time
    notes: tuple[str, ...] = ()  # shown as warnings (a fallback extractor was used …)


@dataclass(frozen=True)
class Failed:
    reason: str  # one or two sentences for the Errors Report


@dataclass(frozen=True)
class QueryVector:
    """A find's query embedded (engine/retrieval/vectors.py): the normalised vector and the key of the
    model that made it (the passages' vectors must be that model's)."""

    vector: Sequence[float]
    model_key: str
    stopped: str = ""  # why this process's background embedding of the research last stopped, if it failed


Gathered = Union[Found, Failed, QueryVector]


@dataclass(frozen=True)
class Evidence:
    """What the caller gathered for a message, and under which file roots."""

    results: Mapping[Need, Gathered] = field(default_factory=dict)
    roots: tuple[Path, ...] = ()  # folders attach_file may read besides the research folder


NOT_GATHERED = (
    "Nothing was fetched for this command: it needs the outside world, and this message was executed "
    "without gathering it. Send the command again."
)


# -- checking arguments (no network, no content read) ---------------------------------------------


def _unwrap(text: str) -> str:
    """Accept the usual wrappings of a URL or path: <…>, `…`, "…", '…'."""
    text = text.strip()
    for left, right in (("<", ">"), ("`", "`"), ('"', '"'), ("'", "'")):
        if len(text) >= 2 and text[0] == left and text[-1] == right:
            return text[1:-1].strip()
    return text


def check_url(arg: Arg) -> str:
    """The URL to fetch, or CommandError saying what is wrong with it (and a fix where one is obvious)."""
    url = _unwrap(arg.value)
    if not url or any(ch.isspace() for ch in url):
        raise CommandError(f"{quote(url)} is not a URL: a URL has no spaces. Write one URL, e.g. "
                           "`///attach_url https://example.org/article`.", arg.span)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise CommandError(f"{quote(url)} is not a valid URL ({error}).", arg.span) from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES and "://" not in url:
        if _HOST_FIRST.match(url):  # example.org/page, localhost:8080/x: only the scheme is missing
            fixes = (Fix(f"Change to https://{url}", (Edit(arg.span, f"https://{url}"),)),) if arg.span else ()
            raise CommandError(f"{quote(url)} has no scheme: write the whole address, e.g. `https://{url}`.",
                               arg.span, fixes)
        if not scheme:
            raise CommandError(f"{quote(url)} is not a URL: write an address such as `https://example.org/page`.",
                               arg.span)
    if scheme not in SCHEMES:
        raise CommandError(f"Only http and https addresses can be attached, not `{scheme}:`. Use "
                           "`///attach_file` for a file of the workspace.", arg.span)
    if not parts.hostname:
        raise CommandError(f"{quote(url)} has no host name: write it as `https://host/path`.", arg.span)
    if parts.username is not None or parts.password is not None:
        raise CommandError(f"{quote(url)} holds a user name or password: credentials are never sent, and the "
                           "address would be shown in every prompt. Remove them.", arg.span)
    if port == 0:
        raise CommandError(f"{quote(url)} has port 0, which no server listens on.", arg.span)
    return url


class Refused(Exception):
    """A file `attach_file` must not read: the message says why."""


def locate_file(text: str, root: Path, roots: Sequence[Path] = ()) -> Path:
    """The real path of the file `text` names, checked without reading it: relative paths
    start at the research folder; the resolved path (symlinks included) must be inside the
    research folder or one of `roots`; it must be a regular file of at most MAX_FILE_BYTES.
    Raises Refused. `sources.files` reads it, checking again on the open file."""
    raw = _unwrap(text)
    if not raw:
        raise Refused("No path given: write the file's path after the command.")
    if "\x00" in raw:
        raise Refused("A path cannot hold a NUL character.")
    path = expand_home(raw)
    if not path.is_absolute():
        path = root / path
    real = Path(os.path.realpath(path))
    allowed = [Path(os.path.realpath(r)) for r in (root, *roots)]
    if not any(real == folder or folder in real.parents for folder in allowed):
        where = "the research folder" + (" or the allowed roots (fetch.allowed_roots)" if roots else "")
        raise Refused(
            f"{quote(raw)} is outside {where}; files elsewhere are never read. Copy it into the research folder, "
            "or add its folder to `allowed_roots` in the [fetch] table of deep-research.toml."
        )
    try:
        info = watched_stat(real)  # noted: a diagnostic kept while typing must see the file change
    except FileNotFoundError:
        raise Refused(f"There is no file {quote(raw)} (paths are relative to the research folder).") from None
    except OSError as error:
        raise Refused(f"{quote(raw)} cannot be read: {error.strerror or error}.") from None
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        raise Refused(f"{quote(raw)} is a folder: attach the files in it one by one.")
    kind = _special_kind(mode)
    if kind:
        raise Refused(f"{quote(raw)} is {kind}, not a regular file: only regular files are attached.")
    if info.st_size > MAX_FILE_BYTES:
        raise Refused(f"{quote(raw)} is {size_text(info.st_size)}; files larger than {size_text(MAX_FILE_BYTES)} "
                      "are not attached.")
    return real


def size_text(size: int) -> str:
    """1,024 bytes, 12.5 KB, 10 MB: sizes in messages (binary units, as file managers show)."""
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{size:,} bytes"


def _special_kind(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def check_query(arg: Arg) -> str:
    query = one_line(arg.value)
    if len(query) > MAX_QUERY_CHARS:
        raise CommandError(f"The query is {len(query)} characters long; keep it under {MAX_QUERY_CHARS}.", arg.span)
    if not any(ch.isalnum() for ch in query):  # only punctuation: a search engine would get nothing to look for
        raise CommandError(f"The query {quote(query)} has no words: write what to search for, e.g. "
                           "`///search tiled matrix multiplication`.", arg.span)
    return query


# -- the operations (the command table points here) -----------------------------------------------


def attach_url(draft: Draft, args: Args) -> Result:
    arg = args["url"]
    url = check_url(arg)
    return _attach(draft, Need(NeedKind.URL, url, _line(arg)), arg, f"the page at {url}")


def attach_file(draft: Draft, args: Args) -> Result:
    arg = args["path"]
    try:
        real = locate_file(arg.value, draft.tree.root, draft.roots)
    except Refused as refused:
        raise CommandError(str(refused), arg.span) from None
    return _attach(draft, Need(NeedKind.FILE, str(real), _line(arg)), arg, f"the file {quote(_unwrap(arg.value))}")


def search(draft: Draft, args: Args) -> Result:
    arg = args["query"]
    query = check_query(arg)
    return _attach(draft, Need(NeedKind.SEARCH, query, _line(arg)), arg, f"the web search for {quote(query)}")


def _line(arg: Arg) -> int:
    return arg.span.start.line + 1 if arg.span else 0


def _attach(draft: Draft, need: Need, arg: Arg, what: str) -> Result:
    focus = draft.focus
    if draft.evidence is None:  # the dry run: say what will happen, and record the need
        draft.needs.append(need)
        verb = "run" if need.kind is NeedKind.SEARCH else "attach"
        return Result(f"Will {verb} {what} when the message runs (attached to {quote(focus.title)}).")
    result = draft.evidence.results.get(need)
    if result is None:
        raise CommandError(NOT_GATHERED, arg.span)
    if isinstance(result, Failed):
        raise CommandError(result.reason, arg.span)
    if not isinstance(result, Found) or not isinstance(result.text, str) or not isinstance(result.title, str):
        raise CommandError(f"The result for {what} is not usable; nothing was attached.", arg.span)
    text = result.text.strip()
    if not text:
        raise CommandError(f"{what[0].upper()}{what[1:]} has no readable text; nothing was attached.", arg.span)
    digest = result.sha256 or hashlib.sha256(text.encode("utf-8")).hexdigest()
    for existing in draft.attachments(focus.path):
        if existing.sha256 == digest and existing.source == result.source:
            return Result(
                f"{quote(existing.name)} already holds this content; nothing added.",
                [Warning_(f"{what[0].upper()}{what[1:]} is already attached to {quote(focus.title)} as "
                          f"{quote(existing.name)}, unchanged; nothing was added.", arg.span)],
            )
    warnings = [Warning_(note, arg.span) for note in result.notes]
    text, cut = kept_text(text)
    if cut:
        warnings.append(Warning_(cut, arg.span))
    name = draft.free_attachment_name(focus.path, title_of(result))  # attachments are never overwritten
    draft.add_attachment(
        focus.path, name, text, source=result.source, final_url=result.final_url,
        fetched=result.fetched, content_type=result.content_type, sha256=digest,
    )
    kind = f", {result.content_type}" if result.content_type else ""
    origin = "" if need.kind is NeedKind.SEARCH else f" from {result.source}"
    return Result(f"Attached {quote(name)} ({len(text):,} characters{kind}){origin} to {quote(focus.title)}.",
                  warnings)


def title_of(result: Found) -> str:
    """The attachment's name: the page's title (or its address), on one line, not too long."""
    title = one_line(visible(result.title)) or one_line(result.final_url or result.source) or "Untitled source"
    return title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 1].rstrip() + "…"


def kept_text(text: str) -> tuple[str, str | None]:
    """An attachment's text from outside (control characters replaced: `text.visible`), whole up
    to MAX_SOURCE_BYTES (what a research's file may hold and still be read), cut there with the
    cut marked; and what to say about the cut."""
    text = visible(text)
    data = text.encode("utf-8", "replace")
    if len(data) <= MAX_SOURCE_BYTES:
        return text, None
    kept = data[:MAX_SOURCE_BYTES].decode("utf-8", "ignore")
    return (kept + f"\n\n[… cut: {len(text) - len(kept):,} more characters were not kept …]",
            f"Only the first {len(kept):,} of {len(text):,} characters were kept: an attachment holds at most "
            f"{size_text(MAX_SOURCE_BYTES)}.")

