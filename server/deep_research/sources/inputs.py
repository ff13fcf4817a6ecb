"""What the user gives a research when starting or continuing it: the instruction, context
(files, or text typed in) and attachments (files, or http(s) URLs).

Everything is gathered before anything is written (`prepare`): files are read through the
same reader as `attach_file` (a regular file, at most 10 MB, checked again on the open
file, PDF and HTML extracted), pages are fetched through the same guard, limits and
extraction as `attach_url` (the research's `[fetch]` settings apply). A source that cannot
be had stops everything with one sentence naming it (`InputError`); only then does
`Research.create` write it all, in one transaction. No network inside it, nothing half-made.

A folder given as an attachment brings every text, markdown, code, HTML and PDF file below
it (`folder_files`), each named by its path below the folder; other files, files over the
limits and links out of the folder are skipped, and `Prepared.folders` says what became of
each. Looking at a folder is bounded: at most `MAX_FOLDER_ENTRIES` entries are listed (no
`stat`, no read) before a folder too large is refused, and no more than `max_folder_files`
(a setting) are read. Every front end passes the folder as the user gave it; this is the
one place that walks it.

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

from ..engine.core.names import free_title, one_line, title_key
from ..engine.core.text import control_sentence
from ..engine.execution.evidence import MAX_TYPED_CHARS, Failed, Found, Need, NeedKind, kept_text, title_of
from ..engine.tree.model import Attachment
from . import SourceError

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.settings.table import Config
    from .fetch import Limits
    from .gather import Progress
    from .guard import AddressPolicy

MAX_SOURCES = 20  # files and pages together, as for one message (gather.MAX_NEEDS); a folder counts once
MAX_NAME_CHARS = 60  # a text chunk is named by its first line, shortened to this
MAX_FOLDER_ENTRIES = 10_000  # entries listed in one folder's tree before it is refused as too large
# The instruction is shown in every prompt: longer belongs in a context file (the same for every
# front end: the editors had this limit, the command line a larger one for a file, MCP none).
MAX_INSTRUCTION_CHARS = 100_000
# A file the user gives `new` or `continue` (not a message's `attach_file`, which keeps a page's
# limit): its text may take longer the longer it is. Six books given at once, on a loaded machine,
# lost 2-4 of them to a page's 20 s (a 1.9 MB HTML book took over 20 s to extract).
GIVEN_SECONDS_PER_MB = 15.0
GIVEN_MAX_SECONDS = 120.0
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# What a folder's files may be: text, markdown, code, HTML and PDF (others are skipped, by name).
TEXT_SUFFIXES = frozenset("""
.txt .text .md .markdown .mdown .rst .adoc .org .tex .bib .csv .tsv .json .jsonl .yaml .yml .toml .ini .cfg .xml
.log .dr .py .pyi .ipynb .r .jl .m .c .h .cc .cpp .cxx .hpp .hh .cu .cuh .rs .go .java .kt .kts .scala .swift
.js .mjs .cjs .ts .tsx .jsx .rb .php .pl .pm .lua .sh .bash .zsh .fish .ps1 .bat .sql .hs .ml .mli .fs .ex .exs
.erl .clj .el .vim .css .scss .sass .less .vue .svelte .proto .graphql .cmake .gradle .dockerfile .nix .zig .v
.sv .vhd .f .f90 .asm .s .d .dart .cs .vb .groovy .tf
""".split())
DOCUMENT_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".pdf"})
KNOWN_NAMES = frozenset({"README", "LICENSE", "COPYING", "NOTICE", "CHANGELOG", "AUTHORS", "Makefile",
                         "Dockerfile", "CMakeLists.txt", "Justfile"})
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__"})  # generated, and large (hidden ones too)
ACCEPTED_FILES = "text, markdown, code, HTML and PDF files"


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
class Folder:
    """What became of a folder given as an attachment."""

    given: str  # as the user wrote it
    attached: list[str] = field(default_factory=list)  # the attachments' names (paths below the folder)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path below the folder, why)

    def lines(self) -> list[str]:
        """Every file, for a terminal."""
        out = [f"{self.given}: {_count(len(self.attached), 'file')} attached"
               + (f", {len(self.skipped)} skipped" if self.skipped else "")]
        out += [f"  attached {name}" for name in self.attached]
        out += [f"  skipped {name}: {why}" for name, why in self.skipped]
        return out

    def summary(self, shown: int = 10) -> str:
        """One sentence, for an editor's notification: the skipped ones first named, the rest counted."""
        text = f"{self.given}: {_count(len(self.attached), 'file')} attached"
        if self.skipped:
            named = "; ".join(f"{name} ({why.rstrip('.')})" for name, why in self.skipped[:shown])
            more = f"; and {len(self.skipped) - shown} more" if len(self.skipped) > shown else ""
            text += f"; skipped {named}{more}"
        return text + "."


@dataclass(frozen=True)
class Prepared:
    """Everything read and fetched, ready for `Research.create`."""

    instruction: str = ""
    context: list[Attachment] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth saying, not failures (a page cut, a fallback extractor)
    folders: list[Folder] = field(default_factory=list)  # what each folder given as an attachment brought


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
    _check_counts(inputs)
    notes: list[str] = []
    context = [_typed(text, number) for number, text in enumerate(inputs.context_text, 1)]
    given = [Path(a) for a in inputs.attachments if not is_url(str(a))]
    folders = {path for path in given if os.path.isdir(path)}  # a link to a folder given by name is followed
    files = [Path(p) for p in inputs.context] + [path for path in given if path not in folders]
    reals = [Path(os.path.realpath(path)) for path in files + sorted(folders)]
    for real in reals:
        refusal = may_read(real) if may_read is not None else None
        if refusal:
            raise InputError(refusal)
    listed = {path: await asyncio.to_thread(folder_files, path, root, config.max_folder_files)
              for path in sorted(folders)}  # every folder listed (and refused if too large) before any read
    from .fetch import Limits

    limits = limits or Limits()  # a file's text is extracted within a page's limit
    read = [await _read(real, path, limits) for real, path in zip(reals, files)]
    by_path = dict(zip(files, read))
    names = _file_names(files)  # a name given twice is kept apart when it is written, too (engine/research.py)
    for own in sorted({path.name for path, name in names.items() if name != path.name}):
        given_as = sorted({name for path, name in names.items() if path.name == own})
        notes.append(f"{len(given_as)} files are named {own}: each is named by as much of its path as tells "
                     f"them apart ({', '.join(given_as)}).")
    context += [_attachment(by_path[Path(p)], names[Path(p)], notes) for p in inputs.context]
    from_folders = await _read_folders(listed, progress, cancelled, limits)
    if from_folders is None:
        return None
    urls = [_checked_url(str(a)) for a in inputs.attachments if is_url(str(a))]
    pages = await _fetch(urls, root, config, progress, cancelled, limits, policy)
    if pages is None:
        return None
    attachments: list[Attachment] = []
    reports: list[Folder] = []
    for item in inputs.attachments:
        if is_url(str(item)):
            attachments.append(_attachment(pages[_checked_url(str(item))], None, notes))
        elif Path(item) in folders:
            found, report = from_folders[Path(item)]
            taken = {title_key(a.name) for a in attachments}
            for name, result in found:  # two folders may both hold a notes.md
                named = free_title(name, lambda candidate: title_key(candidate) in taken)
                attachments.append(_attachment(result, named, notes))
                taken.add(title_key(named))
                report.attached.append(named)
            reports.append(report)
        else:
            attachments.append(_attachment(by_path[Path(item)], names[Path(item)], notes))
    return Prepared(inputs.instruction, context, attachments, notes, reports)


def _check_counts(inputs: Inputs) -> None:
    """What is given, checked before anything is read: how many sources and texts, how long the
    instruction, no control character in what is typed."""
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


# -- folders ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    """A folder's files to read (real path, name below the folder) and those skipped already."""

    folder: Path  # its real path
    given: str
    files: list[tuple[Path, str]]
    skipped: list[tuple[str, str]]


def folder_files(folder: Path, research: Path, limit: int) -> Listed:
    """The files below `folder` an attachment may be made of, named by their path below it;
    InputError when the folder is the research or holds it, or is too large (more than
    `limit` such files, or more than MAX_FOLDER_ENTRIES entries in all): said after listing at
    most that many entries, before any file is looked at more closely or read. Links are not
    followed out of the folder, nor into folders (a loop, or a folder seen twice)."""
    real = Path(os.path.realpath(folder))
    home = Path(os.path.realpath(research))
    if real == home or real in home.parents:
        what = "is the research itself" if real == home else f"holds the research ({research})"
        raise InputError(f"The folder {folder} {what}: attaching it would attach the research's own files. Give a "
                         "folder of sources beside the research, or one inside it that holds only sources.")
    files: list[tuple[Path, str]] = []
    skipped: list[tuple[str, str]] = []
    seen = 0
    todo = [(real, "")]
    while todo:
        where, below = todo.pop()
        entries = []
        try:
            with os.scandir(where) as listing:
                for entry in listing:
                    seen += 1
                    if seen > MAX_FOLDER_ENTRIES:
                        raise InputError(
                            f"The folder {folder} holds more than {MAX_FOLDER_ENTRIES:,} files and folders: too many to "
                            "look through. Give a smaller folder (the one that holds the sources), or the files "
                            "themselves.")
                    entries.append(entry)
        except OSError as error:
            skipped.append((below or ".", f"cannot be listed: {error.strerror or error}"))
            continue
        for entry in sorted(entries, key=lambda e: e.name, reverse=True):  # popped from the end: in name order
            name = f"{below}{entry.name}"
            why = _skip_reason(entry, real)
            if why == "folder":
                todo.append((Path(entry.path), name + "/"))
            elif why:
                skipped.append((name + ("/" if why.startswith("a folder") else ""), why))
            else:
                files.append((Path(entry.path), name))
                if len(files) > limit:
                    raise InputError(
                        f"The folder {folder} holds more than {limit:,} {ACCEPTED_FILES} (max_folder_files = {limit:,} in "
                        "deep-research.toml, or the setting deepResearch.maxFolderFiles): nothing was attached. Give a "
                        "smaller folder, or raise the limit.")
    files.sort(key=lambda item: item[1])
    return Listed(real, str(folder), files, sorted(skipped))


def _skip_reason(entry: os.DirEntry, folder: Path) -> str | None:
    """Why an entry is not read ("folder": it is walked), or None for a file to read. Decided
    from the listing alone (file types come with it), except a link's target."""
    if entry.name.startswith("."):
        return "a folder that is hidden: not looked into" if entry.is_dir(follow_symlinks=False) else "hidden"
    if entry.is_symlink():
        target = Path(os.path.realpath(entry.path))
        if target != folder and folder not in target.parents:
            return "a link out of the folder: not followed"
        if target.is_dir():
            return "a folder that is a link: not followed"
    elif entry.is_dir(follow_symlinks=False):
        return f"a folder of generated files: not looked into" if entry.name in SKIPPED_FOLDERS else "folder"
    elif not entry.is_file(follow_symlinks=False):
        return "not a regular file (a pipe, a device or a socket)"
    suffix = os.path.splitext(entry.name)[1].lower()
    if suffix in TEXT_SUFFIXES or suffix in DOCUMENT_SUFFIXES or entry.name in KNOWN_NAMES:
        return None
    return f"not one of the {ACCEPTED_FILES}" + (f" ({suffix})" if suffix else "")


async def _read_folders(
    listed: dict[Path, Listed], progress: Progress | None, cancelled: Callable[[], bool] | None, limits: Limits,
) -> dict[Path, tuple[list[tuple[str, Found]], Folder]] | None:
    """Every listed file read (a file that cannot be, skipped with why); None if cancelled."""
    total = sum(len(item.files) for item in listed.values())
    done = 0
    out = {}
    for given, item in listed.items():
        report = Folder(item.given, [], list(item.skipped))
        found: list[tuple[str, Found]] = []
        for path, name in item.files:
            if cancelled is not None and cancelled():
                return None
            try:
                found.append((name, await _read_below(path, item.folder, limits)))
            except SourceError as error:
                report.skipped.append((name, error.message))
            done += 1
            if progress is not None:
                progress(done, total, f"read {name}")
        report.skipped.sort()
        out[given] = (found, report)
    return out


async def _read_below(path: Path, folder: Path, limits: Limits) -> Found:
    from .files import read_user_file, text_of

    real = Path(os.path.realpath(path))  # again: the folder may have changed since it was listed
    if folder not in real.parents:
        raise SourceError("a link out of the folder: not followed")
    file = await asyncio.to_thread(read_user_file, real, shown="it")  # its sentences follow the file's name
    found = await text_of(file, timeout=given_timeout(limits.extract_timeout, len(file.data)))
    if not found.text.strip():
        raise SourceError("no readable text")
    return found


def _file_names(paths: Sequence[Path]) -> dict[Path, str]:
    """Each file's attachment name: its own name, or, where files given together share it, as much
    of its path as tells them apart (`book/print.html`, `rustc/print.html`)."""
    out: dict[Path, str] = {}
    for path in paths:
        parts = Path(os.path.abspath(path)).parts
        others = [Path(os.path.abspath(p)).parts for p in paths if p != path and Path(p).name == path.name]
        depth = 1
        while depth < len(parts) and any(other[-depth:] == parts[-depth:] for other in others):
            depth += 1
        out[path] = "/".join(parts[-depth:]) if depth > 1 else path.name
    return out


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


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


def given_timeout(page_seconds: float, size: int) -> float:
    """The seconds a given file's text may take: a page's, and GIVEN_SECONDS_PER_MB more for each
    megabyte, at most GIVEN_MAX_SECONDS (or a page's, if that is more)."""
    grown = page_seconds + GIVEN_SECONDS_PER_MB * size / (1024 * 1024)
    return max(page_seconds, min(grown, GIVEN_MAX_SECONDS))


async def _read(real: Path, given: Path, limits: Limits) -> Found:
    """A file the user gave, read and its text extracted within the pages' limit."""
    from .files import read_user_file, text_of

    try:
        file = await asyncio.to_thread(read_user_file, real, shown=str(given))
        return await text_of(file, timeout=given_timeout(limits.extract_timeout, len(file.data)))
    except SourceError as error:
        raise InputError(error.message) from None


def _checked_url(text: str) -> str:
    from ..engine.execution.evidence import check_url
    from ..engine.execution.protocol import Arg, CommandError

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
    """A read file (`name`: the file's name; its type and digest kept as `///attach_file` keeps
    them, so a PDF's parts follow its pages, but not the path it was read from) or a fetched page
    (named by its title, with its source, as `///attach_url` makes it)."""
    text, cut = kept_text(found.text.strip())
    label = name or found.source
    notes.extend(f"{label}: {note}" for note in (*found.notes, *([cut] if cut else [])))
    if name is not None:
        if not text:
            raise InputError(f"{found.source} has no readable text.")
        return Attachment(name, text, content_type=found.content_type, sha256=found.sha256)
    return Attachment(title_of(found), text, source=found.source, final_url=found.final_url, fetched=found.fetched,
                      content_type=found.content_type, sha256=found.sha256)
