"""The parts' layouts kept on disk, so that a fresh process need not divide every source again.

Dividing is pure (engine/retrieval/parts.py) and cached in each process, but the command line, MCP's
tools and the autopilot's rounds often run a message in a fresh process, and the prompt shows
the outline of every attachment in view: at 50 MB of attachments dividing them took ~0.4 s of
every message. So each layout is also kept in `.deep-research/parts/`, derived data that is
never trusted over the markdown:

- **keyed by the text, not the file**: a record is named by the SHA-256 of the text it divides
  (as the index's rows record it), the `part_chars` it was divided with and its reading (the
  cutting recorded with the attachment and the text's form: `parts.Reading`), and holds the
  version of the code that made it (a digest of engine/retrieval/parts.py's and structure.py's source). A
  hand edit, an undo or a copy gives a text another digest, hence another record or none: an
  out-of-step record is never even looked at. The same text in two places shares one record.
- **read only through the read guard** (a link out, a FIFO, a folder in a record's place is not
  read), from the research's own folder (not one reached through a link), and **checked whole**
  against the text before it is used: its digest, length, size and version, and offsets in
  order inside the text (so its parts cover the text end to end, whatever the file says).
  Anything else (missing, unreadable, garbage, another version) is divided again and written.
- **written atomically, relative to the folder opened without following links**: a temporary
  file, then a rename over the record's name (a link there is replaced, never followed; a
  folder there is left alone and the layout kept in memory). Two processes writing one text's
  record write the same bytes, so no lock is needed; nothing is synced, since a record lost or
  torn by a crash is garbage, divided again.
- **bounded**: past `MAX_RECORDS` records, the oldest half is removed when records are written
  (counted by name; the folder is looked at once a call, not once a record).
- **a reader may keep nothing** (`keep=False`): `compile` reads records and writes none.

What one costs: the digest (~1.5 ms a MB) and reading the record; dividing is ~10 ms a MB.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import stat as stat_module
import time
from pathlib import Path
from typing import Any, Sequence

from ..store import BOOKKEEPING, Guard
from . import parts
from . import structure
from .parts import Layout, Reading, stored_layout

log = logging.getLogger("deep_research.engine")

FOLDER = "parts"  # in the research's bookkeeping folder
SCHEMA = 2
MAX_RECORDS = 4_000
_SUFFIX = ".json"
_TEMPORARY = ".tmp-layout-"  # not the transactions' mark: these are not theirs to sweep
_STALE_NS = 60 * 10**9  # a temporary this old was left by a process that stopped: removed
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def text_digest(text: str) -> str:
    """What identifies a source's text (the index's rows and the layouts' records)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@functools.cache
def code_version() -> str:
    """A digest of the source of engine/retrieval/parts.py and structure.py (what divides a text and
    reads its headings): a record made by other code is not used. "" if the source cannot be read
    (then nothing is kept on disk)."""
    try:
        return hashlib.sha256(b"".join(Path(module.__file__).read_bytes()
                                       for module in (parts, structure))).hexdigest()[:16]
    except (OSError, TypeError):
        return ""


def record_name(digest: str, part_chars: int, reading: Reading) -> str:
    return f"{digest}-{max(1, part_chars)}-{reading.key}{_SUFFIX}"


class LayoutStore:
    """The layouts of one research (see the module's docstring)."""

    def __init__(self, root: Path, guard: Guard | None = None) -> None:
        self.root = Path(os.path.realpath(root))
        self.guard = guard or Guard(self.root)
        self.folder = self.root / BOOKKEEPING / FOLDER

    def layouts(self, sources: Sequence[tuple[str, Reading]], part_chars: int, *, keep: bool = True) -> list[Layout]:
        """The layout of each (text, its reading) in `sources`: from this process's cache, else
        from its record, else divided (and, if `keep`, its record written: all of them at the end,
        with one look at the folder's size, not one a record; a reader that writes nothing, as
        `compile`, passes keep=False)."""
        out: list[Layout] = []
        readable: bool | None = None  # whether the folder is the research's own: looked at once, when needed
        made: dict[str, bytes] = {}  # records to write
        for text, reading in sources:
            found = parts.cached(text, part_chars, reading)
            if found is None:
                if readable is None:
                    readable = self._own_folder()
                found = self._layout(text, part_chars, reading, readable, made)
                parts.remember(text, part_chars, found, reading)
            out.append(found)
        if made and keep:
            self._write(made)
        return out

    def layout(self, text: str, part_chars: int, reading: Reading | None = None) -> Layout:
        return self.layouts([(text, reading or Reading())], part_chars)[0]

    def _layout(self, text: str, part_chars: int, reading: Reading, readable: bool, made: dict[str, bytes]) -> Layout:
        version = code_version()
        if not version:
            return parts.layout(text, part_chars, reading)
        digest = text_digest(text)
        name = record_name(digest, part_chars, reading)
        if readable:
            data = self.guard.read(self.folder / name)
            if data is not None:
                found = decoded(data, digest, len(text), max(1, part_chars), reading, version)
                if found is not None:
                    return found
        divided = parts.layout(text, part_chars, reading)
        made[name] = encoded(divided, digest, len(text), version)
        return divided

    def _own_folder(self) -> bool:
        """Whether the records' folder is the research's own (a folder, reached through no link)."""
        real = self.guard.locate(self.folder)
        return real is not None and os.path.normpath(real) == os.path.normpath(str(self.folder))

    # -- writing ------------------------------------------------------------------------------------

    def _write(self, records: dict[str, bytes]) -> None:
        """Put records in place; derived data, so a failure only means dividing again next time."""
        try:
            folder = self._open_folder()
        except OSError as error:
            log.debug("the parts' layouts of %s are not kept: %s", self.root, error)
            return
        if folder is None:
            return
        try:
            for name, data in records.items():
                _write_at(folder, name, data)
            _prune(folder)
        except OSError as error:
            log.debug("a layout of %s is not kept: %s", self.root, error)
        finally:
            os.close(folder)

    def _open_folder(self) -> int | None:
        """The records' folder, open, made if missing; opened relative to the bookkeeping folder
        without following links (a link in its place is removed, never followed: it is ours to
        keep); None if something else is there (a file may be a person's: it is left alone)."""
        book = os.open(str(self.root / BOOKKEEPING), _DIRECTORY_FLAGS)
        try:
            try:
                info = os.lstat(FOLDER, dir_fd=book)
            except FileNotFoundError:
                info = None
            if info is not None and stat_module.S_ISLNK(info.st_mode):
                os.unlink(FOLDER, dir_fd=book)
                info = None
            if info is None:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(FOLDER, 0o755, dir_fd=book)
            elif not stat_module.S_ISDIR(info.st_mode):
                return None
            return os.open(FOLDER, _DIRECTORY_FLAGS, dir_fd=book)
        finally:
            os.close(book)


def _write_at(folder: int, name: str, data: bytes) -> None:
    temporary = f"{_TEMPORARY}{os.getpid()}-{os.urandom(4).hex()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)  # a link there is replaced, not followed
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise


def _prune(folder: int) -> None:
    """Past MAX_RECORDS records, remove the older half (by when they were written); and the
    temporaries a stopped process left. Records are counted by name: only past the bound, or for
    a temporary, is an entry's time asked for (a stat a record made a compile of 1,000 sources
    spend 2 s here)."""
    records, stale = [], []
    now = time.time_ns()
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(_SUFFIX):
                records.append(entry)
            elif entry.name.startswith(_TEMPORARY) and now - entry.stat(follow_symlinks=False).st_mtime_ns > _STALE_NS:
                stale.append(entry.name)
        if len(records) > MAX_RECORDS:
            dated = sorted((entry.stat(follow_symlinks=False).st_mtime_ns, entry.name) for entry in records)
            stale += [name for _, name in dated[: len(dated) - MAX_RECORDS // 2]]
    for name in stale:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder)


# -- a record ---------------------------------------------------------------------------------------


def encoded(found: Layout, digest: str, length: int, version: str) -> bytes:
    """A layout as a record: its part starts and pages, and its headings as parallel lists (the
    sections the parts continue are made again from those)."""
    pages = [list(part.pages) if part.pages is not None else None for part in found.parts]
    record = {
        "schema": SCHEMA, "code": version, "digest": digest, "length": length, "size": found.size,
        "reading": found.reading.key, "paged": found.paged,
        "starts": list(found.starts),
        "pages": pages if any(p is not None for p in pages) else None,
        "levels": [h.level for h in found.headings],
        "heading_starts": list(found.heading_starts),
        "titles": [h.title for h in found.headings],
    }
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def decoded(data: bytes, digest: str, length: int, size: int, reading: Reading, version: str) -> Layout | None:
    """The layout a record holds if it is one of this text (`digest`, `length`), divided as asked
    (`size`, `reading`) by this code (`version`), and whole; None for anything else."""
    try:
        record = json.loads(data.decode("utf-8", "surrogatepass"))
        return _checked(record, digest, length, size, reading, version)
    except (ValueError, TypeError, KeyError, IndexError, RecursionError):
        return None


def _checked(record: Any, digest: str, length: int, size: int, reading: Reading, version: str) -> Layout | None:
    if not isinstance(record, dict) or record.get("schema") != SCHEMA or record.get("code") != version:
        return None
    if (record.get("digest"), record.get("length"), record.get("size")) != (digest, length, size):
        return None
    paged = record.get("paged")
    if record.get("reading") != reading.key or not isinstance(paged, bool):
        return None
    starts, pages = record["starts"], record["pages"]
    levels, heading_starts, titles = record["levels"], record["heading_starts"], record["titles"]
    if not (_offsets(starts, length) and starts and starts[0] == 0 and _offsets(heading_starts, length)
            and isinstance(levels, list) and isinstance(titles, list) and len(levels) == len(heading_starts) == len(titles)
            and all(type(n) is int and 1 <= n <= 6 for n in levels) and all(type(t) is str for t in titles)):
        return None
    if pages is not None:
        if not (isinstance(pages, list) and len(pages) == len(starts) and all(
                p is None or (type(p) is list and len(p) == 2 and type(p[0]) is int and type(p[1]) is int)
                for p in pages)):
            return None
        pages = [tuple(p) if p is not None else None for p in pages]
    return stored_layout(starts, pages, levels, titles, heading_starts, length, size, reading, paged)


def _offsets(values: Any, length: int) -> bool:
    """Offsets into a text of `length` characters, in order."""
    if not isinstance(values, list):
        return False
    last = 0
    for value in values:
        if type(value) is not int or value < last or value > length:
            return False
        last = value
    return True
