"""What the user gives a research when starting or continuing it: the instruction, context
(files, or text typed in) and attachments (files, or http(s) URLs).

Everything is gathered before anything is written (`prepare`): files are read through the
same reader as `attach_file` (a regular file, at most 10 MB, checked again on the open
file, PDF and HTML extracted), pages are fetched through the same guard, limits and
extraction as `attach_url` (the research's `[fetch]` settings apply). A source that cannot
be had stops everything with one sentence naming it (`InputError`); only then does
`Research.create` write it all, in one transaction. No network inside it, nothing half-made.

    prepared = await prepare(Inputs(instruction, context=[...], attachments=[...]), config=config)
    Research.create(folder, prepared.instruction, prepared.context, prepared.attachments)
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..engine.evidence import MAX_TYPED_CHARS, Failed, Found, Need, NeedKind, kept_text, title_of
from ..engine.model import Attachment
from ..engine.names import one_line
from ..engine.text import control_sentence
from . import SourceError

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config
    from .fetch import Limits
    from .gather import Progress
    from .guard import AddressPolicy

MAX_SOURCES = 20  # files and pages together, as for one message (gather.MAX_NEEDS)
MAX_NAME_CHARS = 60  # a text chunk is named by its first line, shortened to this
# The instruction is shown in every prompt: longer belongs in a context file (the same for every
# front end: the editors had this limit, the command line a larger one for a file, MCP none).
MAX_INSTRUCTION_CHARS = 100_000
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class InputError(SourceError):
    """A source the user gave cannot be had: nothing was written."""


@dataclass(frozen=True)
class Inputs:
    """What the user asked for, as given (paths and URLs not yet checked)."""

    instruction: str = ""
    context: Sequence[Path] = ()  # files shown in every prompt
    context_text: Sequence[str] = ()  # text chunks shown in every prompt
    attachments: Sequence[str | Path] = ()  # files, or http(s) URLs


@dataclass(frozen=True)
class Prepared:
    """Everything read and fetched, ready for `Research.create`."""

    instruction: str = ""
    context: list[Attachment] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth saying, not failures (a page cut, a fallback extractor)


def is_url(text: str) -> bool:
    """An attachment given as `scheme://…` is a URL (only http and https will be fetched)."""
    return bool(_URL.match(text.strip()))


async def prepare(
    inputs: Inputs,
    *,
    root: Path,
    config: Config,
    may_read: Callable[[Path], str | None] | None = None,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
    limits: Limits | None = None,
    policy: AddressPolicy | None = None,
) -> Prepared | None:
    """Read every file and fetch every page the user gave; InputError on the first that cannot
    be had, None if cancelled. `root` is the research's folder, `config` its settings (the
    `[fetch]` table's apply to pages). `may_read(real)` says why the file at that real path
    (symlinks resolved) must not be read (the language server: outside the workspace), or
    None; that same path is then read. Files are checked and read first: a typo fails before
    anything goes to the network."""
    sources = len(inputs.context) + len(inputs.attachments)
    if sources > MAX_SOURCES:
        raise InputError(f"{sources} files and pages were given; at most {MAX_SOURCES} can be read at once. Give the "
                         "others later (`deep-research continue`, or `///attach_file` and `///attach_url` in a message).")
    if len(inputs.context_text) > MAX_SOURCES:
        raise InputError(f"{len(inputs.context_text)} text chunks were given; at most {MAX_SOURCES} at once. Join "
                         "some of them, or put them in a file.")
    if isinstance(inputs.instruction, str) and len(inputs.instruction) > MAX_INSTRUCTION_CHARS:
        raise InputError(f"The instruction is {len(inputs.instruction):,} characters long; at most "
                         f"{MAX_INSTRUCTION_CHARS:,} are kept. Put the rest in a context file, or shorten it.")
    for what, text in (("The instruction", inputs.instruction),
                       *((f"Context text {n}", t) for n, t in enumerate(inputs.context_text, 1))):
        refusal = control_sentence(what, text) if isinstance(text, str) else None
        if refusal:
            raise InputError(refusal)
    notes: list[str] = []
    context = [_typed(text, number) for number, text in enumerate(inputs.context_text, 1)]
    files = [Path(p) for p in inputs.context] + [Path(a) for a in inputs.attachments if not is_url(str(a))]
    reals = [Path(os.path.realpath(path)) for path in files]
    for real in reals:
        refusal = may_read(real) if may_read is not None else None
        if refusal:
            raise InputError(refusal)
    read = [await asyncio.to_thread(_read, real, path) for real, path in zip(reals, files)]
    by_path = dict(zip(files, read))
    context += [_attachment(by_path[Path(p)], Path(p).name, notes) for p in inputs.context]
    urls = [_checked_url(str(a)) for a in inputs.attachments if is_url(str(a))]
    pages = await _fetch(urls, root, config, progress, cancelled, limits, policy)
    if pages is None:
        return None
    attachments = []
    for item in inputs.attachments:
        if is_url(str(item)):
            attachments.append(_attachment(pages[_checked_url(str(item))], None, notes))
        else:
            attachments.append(_attachment(by_path[Path(item)], Path(item).name, notes))
    return Prepared(inputs.instruction, context, attachments, notes)


def prepare_sync(inputs: Inputs, **options) -> Prepared | None:  # type: ignore[no-untyped-def]
    """`prepare` for callers without an event loop (the command line)."""
    return asyncio.run(prepare(inputs, **options))


def _typed(text: str, number: int) -> Attachment:
    """A text chunk typed in, named by its first line."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"Context text {number} is empty; give some text, or leave it out.")
    if len(text) > MAX_TYPED_CHARS:
        raise InputError(f"Context text {number} is {len(text):,} characters long; at most {MAX_TYPED_CHARS:,} are kept. "
                         "Put it in a file and attach it, or shorten it.")
    first = one_line(text.strip().splitlines()[0])
    name = first if len(first) <= MAX_NAME_CHARS else first[: MAX_NAME_CHARS - 1].rstrip() + "…"
    return Attachment(name, text.strip())


def _read(real: Path, given: Path) -> Found:
    from .files import read_user_file

    try:
        return read_user_file(real, shown=str(given))
    except SourceError as error:
        raise InputError(error.message) from None


def _checked_url(text: str) -> str:
    from ..engine.evidence import check_url
    from ..engine.operations import Arg, CommandError

    try:
        return check_url(Arg(text.strip(), None))
    except CommandError as error:
        raise InputError(f"{text.strip()} cannot be attached: {error.message}") from None


async def _fetch(
    urls: list[str], root: Path, config: Config, progress: Progress | None, cancelled: Callable[[], bool] | None,
    limits: Limits | None, policy: AddressPolicy | None,
) -> dict[str, Found] | None:
    """Every page, through the same path as `///attach_url` (concurrent, bounded, cancellable)."""
    if not urls:
        return {}
    from .gather import gather

    needs = [Need(NeedKind.URL, url) for url in dict.fromkeys(urls)]
    evidence = await gather(needs, root=root, config=config, progress=progress, cancelled=cancelled,
                            limits=limits, policy=policy)
    if evidence is None or (cancelled is not None and cancelled()):
        return None
    pages: dict[str, Found] = {}
    for need in needs:
        result = evidence.results.get(need)
        if isinstance(result, Failed) or not isinstance(result, Found):
            reason = result.reason if isinstance(result, Failed) else "nothing came back"
            raise InputError(f"{need.target} cannot be attached: {reason}")
        if not result.text.strip():
            raise InputError(f"{need.target} cannot be attached: the page has no readable text.")
        pages[need.target] = result
    return pages


def _attachment(found: Found, name: str | None, notes: list[str]) -> Attachment:
    """A read file (`name`: the file's name, no source kept, as before) or a fetched page (named
    by its title, with its source, as `///attach_url` makes it)."""
    text, cut = kept_text(found.text.strip())
    label = name or found.source
    notes.extend(f"{label}: {note}" for note in (*found.notes, *([cut] if cut else [])))
    if name is not None:
        if not text:
            raise InputError(f"{found.source} has no readable text.")
        return Attachment(name, text)
    return Attachment(title_of(found), text, source=found.source, final_url=found.final_url, fetched=found.fetched,
                      content_type=found.content_type, sha256=found.sha256)
