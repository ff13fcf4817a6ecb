"""The research folder on disk: where each file lives, reading it, writing it safely.

Reading goes through a bounded cache keyed by each file's (inode, size, times), so
unchanged files are parsed once and a hand edit is seen on the next read, without
watching. The cache can also note everything a computation read (`Reads`), so that its
result can be reused for as long as none of it changed.

Writing goes through `Transaction`: the whole change set of a message is first saved
to `.deep-research/pending.json` (the commit point), then applied file by file with
atomic replaces (and, for an undo, deletions and truncations), then the pending file is
removed. A process killed at any moment
leaves either no pending file (nothing applied; stray temporary files are swept) or a
complete one, which `recover()` applies again on the next start. Every step is
idempotent, so the tree ends up either before or after the message, never half-way.

A power loss can also drop what the kernel had not yet written, in any order, so every
step is made durable before the next one relies on it (`durable=True`, the default):
a file's data is fsynced before it is renamed into place, and a folder is fsynced after
a name in it is created, replaced or removed (a new folder's parent too), before the
pending file is removed; that removal is fsynced as well, so that a pending file cannot
come back and be applied again over later edits. Recovery makes durable what an
interrupted commit had already done before it removes the pending file.
(tests/crash replays every disk a power loss may leave; docs/decisions.md, issue 20.)
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import secrets
import stat as stat_module
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, TypeVar

from .watch import current as current_watch


DEFINITION = "Problem Definition.md"
CRITERIA = "Criteria of Definition of Done.md"
BREAKDOWN = "Breakdown Structure.md"
REPORT = "Report 3 Pager.md"
ATTACHMENTS = "Attachments"
SUBPROBLEMS = "Subproblems"
BOOKKEEPING = ".deep-research"
STATE = "state.json"
JOURNAL = "journal.jsonl"
PROMPT = "prompt.md"
INSTRUCTION = "instruction.md"
CONTEXT = "context"
PENDING_ATTACHMENTS = "pending-attachments"
SESSIONS = "sessions"
RESEARCHERS = "researchers"  # a delegated researcher's own bookkeeping (its prompt), one folder each
CONFIG_FILE = "deep-research.toml"
MESSAGE_FILE = "message.dr"  # the message document `new` makes
MESSAGE_SUFFIX = ".dr"  # the research's own settings (deep_research.config; engine.rules)
PENDING = "pending.json"
_LOCK = "lock"
TMP_MARK = ".tmp-dr-"

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")
log = logging.getLogger("deep_research.engine")


class StoreError(OSError):
    """The research folder cannot take a message's changes; nothing was applied."""


class UnsafePath(StoreError):
    """A write would land outside the research folder."""


def is_message_document(path: Path) -> bool:
    """Only `.dr` documents hold messages: nothing else is ever executed or emptied."""
    return path.suffix.lower() == MESSAGE_SUFFIX


def bookkeeping(root: Path) -> Path:
    return root / BOOKKEEPING


def session_file(root: Path, session: int) -> Path:
    return bookkeeping(root) / SESSIONS / f"{session:04d}.jsonl"


def researcher_folder(root: Path, problem: tuple[str, ...]) -> Path:
    """The bookkeeping of the researcher delegated the problem at `problem` (folder names below
    the root): named by a digest, since the path may be deeper than a file name may be long."""
    return bookkeeping(root) / RESEARCHERS / content_digest("/".join(problem))[:16]


def journal_records(lines: Iterable[bytes]) -> Iterator[dict]:
    """The journal's records among `lines`; a blank, torn or hand-broken line is passed over
    (the journal is a log for people and tools, never needed to read the tree back)."""
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


# -- reading --------------------------------------------------------------------------------

Signature = tuple[int, int, int, int]  # (inode, size, mtime, ctime) in nanoseconds
# A file changed less than this long ago may change again within the same timestamp tick
# (file times come from a coarse clock) and keep its signature: such reads are not trusted.
RACY_NS = 50_000_000


def _signature(st: os.stat_result) -> Signature:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _racy(st: os.stat_result) -> bool:
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS


class Reads:
    """What a computation read from disk: the signature of every file and folder it looked
    at (None for what was absent). `unchanged()` tells, with one `stat` each, whether doing
    it again would read exactly the same; a folder's signature changes when an entry is
    added, removed or renamed in it, so listings are covered too."""

    __slots__ = ("seen", "racy", "_vouched")

    def __init__(self) -> None:
        self.seen: dict[str, Signature | None] = {}
        self.racy = False  # something was read within RACY_NS of its change: never trust these
        # With the process's inotify watch on (engine/watch.py): the watch's generation and
        # layout when the stats last found all of it unchanged, the roots it lies in, and
        # whether every folder on its paths was there to watch.
        self._vouched: tuple[int, int, tuple[str, ...], bool] | None = None

    def note(self, path: str, st: os.stat_result | None) -> None:
        if path not in self.seen:  # the first look is the one the computation used
            self.seen[path] = None if st is None else _signature(st)
            if st is not None and _racy(st):
                self.racy = True

    def merge(self, other: Reads) -> None:
        for path, signature in other.seen.items():
            self.seen.setdefault(path, signature)
        self.racy = self.racy or other.racy

    def unchanged(self) -> bool:
        if self.racy:
            return False
        watch = current_watch()
        covered = None
        if watch is not None:  # nothing reported since the stats last vouched for it: unchanged
            vouched = self._vouched
            if vouched is not None and watch.vouches(vouched):
                return True
            generation, layout = watch.poll(), watch.layout
            # watched before the stats below, so that what changes after them is reported
            covered = vouched[2:] if vouched is not None and vouched[1] == layout and vouched[3] else watch.cover(self.seen)
        stat = os.stat
        for path, signature in self.seen.items():
            try:
                st = stat(path)
            except OSError:
                if signature is not None:
                    return False
                continue
            if signature is None or (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) != signature:
                return False
        if covered is not None:
            self._vouched = (generation, layout, *covered)
        return True

    def __len__(self) -> int:
        return len(self.seen)


_recording = threading.local()  # the Reads in progress on each thread


@contextlib.contextmanager
def recording() -> Iterator[Reads]:
    """Note what the calling thread reads from disk (through a `FileCache` or `watched_stat`)
    until the block ends; an inner recording's reads count for the outer one too."""
    reads = Reads()
    outer = getattr(_recording, "reads", None)
    _recording.reads = reads
    try:
        yield reads
    finally:
        _recording.reads = outer
        if outer is not None:
            outer.merge(reads)


def _note(path: str, st: os.stat_result | None) -> None:
    reads = getattr(_recording, "reads", None)
    if reads is not None:
        reads.note(path, st)


def watched_stat(path: Path | str) -> os.stat_result:
    """`os.stat`, noted in the recording in progress: for checks of files outside the tree
    (attach_file's), so that a result depending on them is not reused after they change."""
    name = str(path)
    try:
        st = os.stat(name)
    except OSError:
        _note(name, None)
        raise
    _note(name, st)
    return st


# -- the read guard --------------------------------------------------------------------------
#
# A research may come from someone else (a cloned repository, an unpacked archive, a shared
# drive): any file or folder in it may be a link to a place outside it, a FIFO, a device or a
# file nobody may read. Every reader of a research goes through its `Guard`, which opens what
# it reads without blocking and checks the opened file itself (where the kernel says it is,
# and what it is), so that nothing outside the research is ever read and nothing blocks.

MAX_READ_BYTES = 16 * 1024 * 1024  # a file of the research larger than this is not read
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | _NONBLOCK | getattr(os, "O_NOCTTY", 0) | _CLOEXEC | getattr(os, "O_BINARY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
_PATH_FLAGS = getattr(os, "O_PATH", 0) | _CLOEXEC  # a handle that opens nothing (Linux)
_PROC_FD = os.path.isdir("/proc/self/fd")
_DIR, _FILE, _LINK, _OUTSIDE = 1, 2, 4, 8


def _fd_real_path(fd: int) -> str | None:
    """Where the kernel says the file open as `fd` is (every link resolved), if it can say."""
    if _PROC_FD:
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
    getpath = getattr(fcntl, "F_GETPATH", None) if fcntl is not None else None
    if getpath is not None:  # macOS
        try:
            return os.fsdecode(fcntl.fcntl(fd, getpath, bytes(1024)).split(b"\0", 1)[0])
        except OSError:
            return None
    return None


class Entry:
    """A folder entry as `Guard.list_dir` gives it, its kind looked up while listing."""

    __slots__ = ("name", "folder", "_kind")

    def __init__(self, name: str, folder: str, kind: int) -> None:
        self.name, self.folder, self._kind = name, folder, kind

    @property
    def path(self) -> str:
        return os.path.join(self.folder, self.name)

    def is_dir(self) -> bool:
        """A folder, or a link inside the research to one."""
        return bool(self._kind & _DIR)

    def is_file(self) -> bool:
        """A regular file, or a link inside the research to one."""
        return bool(self._kind & _FILE)

    def is_symlink(self) -> bool:
        return bool(self._kind & _LINK)

    def leads_outside(self) -> bool:
        """A link to a place outside the research (listed only when asked for)."""
        return bool(self._kind & _OUTSIDE)

    def is_plain(self) -> bool:
        """A regular file or a folder, not a link: nearly every entry, nothing to say of it."""
        return self._kind == _FILE or self._kind == _DIR

    def __repr__(self) -> str:
        return f"Entry({self.path!r})"


class Guard:
    """What of a research may be read: regular files and folders whose real location (links
    resolved) is inside its folder. A link that stays inside is followed; one that leads out,
    a FIFO, a device, a socket, an unreadable file or one over `MAX_READ_BYTES` is not read.

    Files are opened without blocking and checked on the open descriptor (the kernel's path
    for it, `fstat`), so a link or a FIFO swapped in after a check is caught too; no path is
    resolved by hand, so a read costs about what a plain read does."""

    def __init__(self, root: Path | str) -> None:
        self.root = os.path.realpath(root)
        self._prefix = self.root.rstrip(os.sep) + os.sep

    def contains(self, real: str) -> bool:
        """Whether the real path `real` is the research folder or inside it."""
        return real == self.root or real.startswith(self._prefix)

    def covers(self, path: str) -> bool:
        """Whether `path`, as written (no link resolved), names something under the research
        folder: the paths this guard is asked about."""
        return path == self.root or path.startswith(self._prefix)

    def locate(self, path: Path | str) -> str | None:
        """The real location of `path` if it exists and is inside the research, else None.
        Nothing is opened for reading (a FIFO or device is not touched)."""
        name = str(path)
        if not _PATH_FLAGS & ~_CLOEXEC or not _PROC_FD:
            real = os.path.realpath(name)
            return real if self.contains(real) and os.path.lexists(real) else None
        try:
            fd = os.open(name, _PATH_FLAGS)
        except OSError:
            return None
        try:
            real = _fd_real_path(fd)
        finally:
            os.close(fd)
        return real if real is not None and self.contains(real) else None

    def read(self, path: Path | str, st: os.stat_result | None = None, limit: int = MAX_READ_BYTES) -> bytes | None:
        """The bytes of the regular file at `path` if it is inside the research (see the
        class); None otherwise. `st` is its `os.stat` if the caller has it."""
        return _read_regular(str(path), st, self, limit)

    def read_text(self, path: Path | str) -> str | None:
        data = self.read(path)
        return None if data is None else decode(data)

    def open_binary(self, path: Path | str) -> BinaryIO | None:
        """The regular file at `path`, inside the research, open for reading (for logs read as
        a stream: the journal); None otherwise. The caller closes it."""
        fd = _open_regular(str(path), None, self)
        return None if fd is None else os.fdopen(fd, "rb")

    def list_dir(self, folder: Path | str, *, hidden: bool = False, outside: bool = False,
                 own: bool = False) -> list[Entry]:
        """The entries of `folder` (without dot-files unless `hidden`) if it is inside the
        research; [] otherwise, and with `own` also when it is reached through a link.
        A link whose target is outside is left out, unless `outside` (then it is listed,
        `leads_outside()`, neither file nor folder): a new name must avoid it, and `check`
        reports it."""
        with self.open_folder(folder, own=own) as opened:
            return opened.entries(hidden=hidden, outside=outside) if opened is not None else []

    def open_folder(self, folder: Path | str, *, own: bool = False) -> _Opening:
        """`with guard.open_folder(path) as opened`: the folder, open, if it is inside the
        research (with `own`: reached through no link), else None. Its entries are listed and
        its files read relative to it, so each file costs no check of where it is (`OpenFolder`)."""
        return _Opening(self, str(folder), own)

    def _kind(self, entry: os.DirEntry[str], real_folder: str) -> int:
        if not entry.is_symlink():  # the kind comes with the listing: no look-up
            return _DIR if entry.is_dir(follow_symlinks=False) else _FILE if entry.is_file(follow_symlinks=False) else 0
        if not self.contains(os.path.realpath(os.path.join(real_folder, entry.name))):
            return _LINK | _OUTSIDE
        return _LINK | (_DIR if entry.is_dir() else _FILE if entry.is_file() else 0)

    def why_not(self, path: Path | str) -> str | None:
        """Why the entry at `path` is not read, as a clause for `check` ("it is a link …");
        None when it is missing or is read."""
        name = str(path)
        try:
            link = os.lstat(name)
        except OSError:
            return None
        try:
            st = os.stat(name)
        except OSError:
            if stat_module.S_ISLNK(link.st_mode):
                return "it is a link that leads nowhere (to nothing, or round in a loop)"
            return None
        if self.locate(name) is None:
            return "it is a link to a place outside the research"
        if not (stat_module.S_ISREG(st.st_mode) or stat_module.S_ISDIR(st.st_mode)):
            return "it is not a regular file (a pipe, a device or a socket)"
        if stat_module.S_ISREG(st.st_mode):
            if st.st_size > MAX_READ_BYTES:
                return f"it is larger than {MAX_READ_BYTES // (1024 * 1024)} MB"
            try:
                os.close(os.open(name, _READ_FLAGS))
            except OSError as error:
                return f"it cannot be read ({error.strerror or error})"
        return None


class _Opening:
    """`Guard.open_folder`'s context (a class, not a generator: a walk opens thousands)."""

    __slots__ = ("guard", "name", "own", "fd", "parent", "child")

    def __init__(self, guard: Guard, name: str, own: bool, parent: OpenFolder | None = None,
                 child: str = "") -> None:
        self.guard, self.name, self.own, self.fd, self.parent, self.child = guard, name, own, -1, parent, child

    def __enter__(self) -> OpenFolder | None:
        if self.parent is not None:  # a subfolder, opened relative to its open parent, not through a link
            try:
                self.fd = os.open(self.child, _FOLDER_FLAGS | _NOFOLLOW, dir_fd=self.parent.fd)
            except (OSError, NotImplementedError):
                return None
            return OpenFolder(self.guard, self.fd, self.name, self.parent.real + os.sep + self.child)
        try:
            self.fd = os.open(self.name, _FOLDER_FLAGS)
        except OSError:
            return None
        real = _fd_real_path(self.fd) or os.path.realpath(self.name)
        if not self.guard.contains(real) or self.own and real != os.path.normpath(self.name):
            return None
        return OpenFolder(self.guard, self.fd, self.name, real)

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class OpenFolder:
    """A folder of the research, open (`Guard.open_folder`): its entries, and its files read
    relative to it without following a link in their name (`O_NOFOLLOW`), so that a file
    costs an open, an `fstat` and its reads. A link that stays inside is read by its path,
    through the guard."""

    def __init__(self, guard: Guard, fd: int, name: str, real: str) -> None:
        self.guard, self.fd, self.name, self.real = guard, fd, name, real

    def entries(self, *, hidden: bool = False, outside: bool = False) -> list[Entry]:
        found = []
        try:
            with os.scandir(self.fd if _PROC_FD else self.real) as scan:
                for entry in scan:
                    name = entry.name
                    if not hidden and name[0] == ".":
                        continue
                    try:
                        if not entry.is_symlink():  # the kind comes with the listing: no look-up
                            kind = _DIR if entry.is_dir() else _FILE if entry.is_file() else 0
                        else:
                            kind = self.guard._kind(entry, self.real)
                    except OSError:
                        kind = _LINK  # a link in a loop or to nothing: neither file nor folder
                    if kind & _OUTSIDE and not outside:
                        continue
                    found.append(Entry(name, self.name, kind))
        except OSError:
            return []
        return found

    def open_child(self, entry: Entry) -> _Opening:
        """`with opened.open_child(entry) as child`: the subfolder `entry` (a folder of
        `entries()`, not a link), open relative to this one: no path to resolve, no check of
        where it is (it is here); None if it is not that folder any more."""
        return _Opening(self.guard, self.name + os.sep + entry.name, False, self, entry.name)

    def read(self, entry: Entry, limit: int | None = MAX_READ_BYTES) -> bytes | None:
        """The bytes of the file `entry` (one of `entries()`), or None (see `Guard`)."""
        if entry.leads_outside() or not entry.is_file():
            return None
        if entry.is_symlink():
            return self.guard.read(entry.path, limit=limit)
        try:
            fd = os.open(entry.name, _READ_FLAGS | _NOFOLLOW, dir_fd=self.fd)
        except (OSError, NotImplementedError):
            return None
        return _read_open(fd, limit)


def _open_regular(name: str, st: os.stat_result | None, guard: Guard | None) -> int | None:
    """A descriptor of the regular file at `name` (inside `guard`'s research, if given),
    opened without blocking; None if there is none such.

    The file may be replaced between the `stat` and the `open`: another writer's atomic
    replace (a commit renames a new `state.json` over the old one) is routine, so a file whose
    inode changed is looked at again (a few times) rather than taken for missing. What is read
    is judged on the open descriptor either way: regular, and inside the research."""
    for _attempt in range(_SWAPS_TRIED):
        if st is None:
            try:
                st = os.stat(name)
            except OSError:
                return None
        if not stat_module.S_ISREG(st.st_mode):
            return None  # a FIFO, a device, a socket, a folder: never opened
        try:
            fd = os.open(name, _READ_FLAGS)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat_module.S_ISREG(info.st_mode):
                raise _Refused  # swapped for something else since the stat
            if guard is not None:
                real = _fd_real_path(fd) or os.path.realpath(name)
                if not guard.contains(real):
                    raise _Refused
        except (OSError, _Refused):
            os.close(fd)
            return None
        if (info.st_dev, info.st_ino) == (st.st_dev, st.st_ino):
            return fd
        os.close(fd)  # replaced since the stat (an atomic write): look again
        st = None
    return None


_SWAPS_TRIED = 4  # a file replaced this many times in a row while it is opened is not read


class _Refused(Exception):
    pass


class _Anywhere(Guard):
    """No confinement (a cache or listing not tied to a research): still no links followed
    blindly into special files, and nothing opened that could block."""

    def __init__(self) -> None:
        self.root, self._prefix = os.sep, os.sep

    def contains(self, real: str) -> bool:
        return True


class _Nowhere(Guard):
    """For a path outside every research a confined cache serves: nothing is read."""

    def __init__(self) -> None:
        self.root, self._prefix = "", "\0"

    def contains(self, real: str) -> bool:
        return False


_ANYWHERE, _NOWHERE = _Anywhere(), _Nowhere()


def _read_regular(name: str, st: os.stat_result | None, guard: Guard | None, limit: int | None = None) -> bytes | None:
    fd = _open_regular(name, st, guard)
    if fd is None:
        return None
    return _read_open(fd, limit)


def _read_open(fd: int, limit: int | None) -> bytes | None:
    """Everything the regular file open as `fd` holds (None if it is not one, or holds more than
    `limit`); closes `fd`."""
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode):
            return None
        size = info.st_size
        if limit is not None and size > limit:
            return None
        data = os.read(fd, size + 1)  # a regular file gives all it has, or up to the end
        if len(data) > size:  # it grew meanwhile: read on to its end
            chunks = [data]
            while chunk := os.read(fd, 1024 * 1024):
                chunks.append(chunk)
                size += len(chunk)
                if limit is not None and size > limit:
                    return None
            data = b"".join(chunks)
        return data
    except OSError:
        return None
    finally:
        os.close(fd)


class FileCache:
    """Parsed file contents, valid while the file's (inode, size, mtime, ctime) is unchanged.

    Bounded: past `max_entries` entries or `max_chars` characters of source text, the least
    recently used entries are dropped, so walking a huge tree leaves the process small.
    Every look at the disk made through it (reads, stats, listings) is noted in the
    `recording()` in progress on the calling thread, if any. Thread-safe: the language
    server executes messages in a worker thread while it analyses in the main one.

    Confined (`confine`, which `Tree` does for its research): it reads, lists and finds only
    what the research's `Guard` allows, and nothing outside the researches it is confined to.
    """

    def __init__(self, max_entries: int = 1024, max_chars: int = 2_000_000) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._entries: OrderedDict[str, tuple[Signature, object, int]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self._guards: tuple[Guard, ...] = ()

    # -- bookkeeping -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def chars(self) -> int:
        """Characters of source text behind the entries held."""
        return self._chars

    def recording(self) -> contextlib.AbstractContextManager[Reads]:
        """Note what the calling thread reads from disk until the block ends."""
        return recording()

    def _note(self, path: str, st: os.stat_result | None) -> None:
        _note(path, st)

    def confine(self, guard: Guard) -> None:
        """Read only what `guard` allows of its research (and what other guards allow of theirs)."""
        with self._lock:
            if all(g.root != guard.root for g in self._guards):
                self._guards = (*self._guards, guard)
        watch = current_watch()
        if watch is not None:
            watch.add_root(guard.root)

    def _guard(self, name: str) -> Guard | None:
        """The guard of the research `name` is in; a guard that allows nothing for a path
        outside every research the cache is confined to; None if it is not confined."""
        guards = self._guards
        if not guards:
            return None
        for guard in guards:
            if guard.covers(name):
                return guard
        return _NOWHERE

    # -- the disk ----------------------------------------------------------------------------

    def stat(self, path: Path | str) -> os.stat_result | None:
        """`os.stat` of `path` (noted), if it is in the research (a link out is not)."""
        name = str(path)
        try:
            st = os.stat(name)
        except OSError:
            st = None
        self._note(name, st)
        guard = self._guard(name)
        if st is not None and guard is not None and guard.locate(name) is None:
            return None
        return st

    def is_file(self, path: Path | str) -> bool:
        st = self.stat(path)
        return st is not None and stat_module.S_ISREG(st.st_mode)

    def is_dir(self, path: Path | str) -> bool:
        st = self.stat(path)
        return st is not None and stat_module.S_ISDIR(st.st_mode)

    def is_own_folder(self, path: Path | str) -> bool:
        """Whether `path` is a folder reached through no link (the folders of the problem
        tree, which are never followed through links: see docs/decisions.md, issue 25)."""
        name = str(path)
        st = self.stat(name)
        if st is None or not stat_module.S_ISDIR(st.st_mode):
            return False
        guard = self._guard(name) or Guard(name)
        return guard.locate(name) == os.path.normpath(name)

    def list_dir(self, folder: Path | str, *, hidden: bool = False, outside: bool = False,
                 own: bool = False) -> list[Entry]:
        """The folder's entries (without dot-files unless `hidden`); [] if it cannot be read
        or is not in the research. See `Guard.list_dir` for links, `outside` and `own`."""
        name = str(folder)
        try:
            st = os.stat(name)
        except OSError:
            self._note(name, None)
            return []
        self._note(name, st)
        return (self._guard(name) or _ANYWHERE).list_dir(name, hidden=hidden, outside=outside, own=own)

    def read(self, path: Path, parse: Callable[[str], T], *, keep: bool = True) -> T | None:
        """`parse(text)` of the file, or None if it does not exist or cannot be read (see
        `Guard`). A file is always read with the same `parse`. With keep=False a parse that
        is not cached already is not cached either (for one-off reads of many files)."""
        name = str(path)
        try:
            st = os.stat(name)
        except OSError:
            self._note(name, None)
            return None
        self._note(name, st)
        signature = _signature(st)
        key = name
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] == signature:
                self._entries.move_to_end(key)
                return hit[1]  # type: ignore[return-value]
        data = _read_regular(name, st, self._guard(name), MAX_READ_BYTES)
        if data is None:
            return None
        text = decode(data)
        value = parse(text)
        if keep and not _racy(st) and len(text) <= self.max_chars // 4:
            self._store(key, (signature, value, len(text)))
        return value

    def _store(self, key: str, entry: tuple[Signature, object, int]) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._chars -= old[2]
            self._entries[key] = entry
            self._chars += entry[2]
            while len(self._entries) > self.max_entries or self._chars > self.max_chars:
                _, dropped = self._entries.popitem(last=False)
                self._chars -= dropped[2]

    def forget(self, path: Path) -> None:
        with self._lock:
            old = self._entries.pop(str(path), None)
            if old is not None:
                self._chars -= old[2]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0


def read_text(path: Path) -> str | None:
    """A regular file's content (undecodable bytes replaced rather than failing), read
    without blocking (see `Guard`); None if it is missing, not a regular file or unreadable.
    Not confined to a research: for files the engine itself writes; a research's files
    are read through its `Guard`."""
    data = _read_regular(str(path), None, None)
    return None if data is None else decode(data)


def decode(data: bytes) -> str:
    """A file's bytes as text: UTF-8, undecodable bytes replaced, line breaks as `\\n`."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def content_digest(text: str) -> str:
    """Identifies a text, ignoring trailing whitespace and line-break style."""
    import hashlib  # imported here: loading OpenSSL costs ~30 ms of server start-up

    return hashlib.sha256(text.replace("\r\n", "\n").rstrip().encode("utf-8")).hexdigest()




# -- writing --------------------------------------------------------------------------------


def ensure_inside(root: Path, target: Path) -> Path:
    """`target` made absolute, or UnsafePath if it (or a symlink on its way) leaves `root`."""
    real_root = os.path.realpath(root)
    real_target = os.path.realpath(target)
    if os.path.commonpath([real_root, real_target]) != real_root:
        raise UnsafePath(f"refusing to write outside the research folder: {target}")
    return Path(real_target)


def make_folders(folder: Path, *, durable: bool) -> None:
    """`folder` and the folders above it that are missing; with `durable`, each new
    folder's name is fsynced into its parent (a new folder is otherwise lost with all it
    holds by a power loss, even after its files were fsynced)."""
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for new in reversed(missing):
        try:
            os.mkdir(new)
        except FileExistsError:
            if not new.is_dir():
                raise
            continue  # made meanwhile by someone else, who makes it durable
        if durable:
            fsync_folder(new.parent)


def atomic_write(path: Path, text: str | bytes, *, durable: bool, scratch: Path | None = None) -> None:
    """Replace `path` with `text` in one step: readers see the old or the new file; with
    `durable`, the new file is on disk (data and name) when this returns. `scratch` is the
    folder of the temporary file when not `path`'s own (on the same file system): the
    bookkeeping folder, which `recover` always sweeps, for a draft written outside any
    transaction in a folder it does not (a delegated researcher's message document)."""
    make_folders(path.parent, durable=durable)
    data = text.encode("utf-8") if isinstance(text, str) else text
    for attempt in (1, 2):
        tmp = (scratch or path.parent) / f"{TMP_MARK}{secrets.token_hex(6)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if durable:
                    handle.flush()
                    fsync(handle.fileno())
            os.replace(tmp, path)
            break
        except FileNotFoundError:
            # Swept by another process's commit (see `recover`) between its creation and the
            # rename: write it again. Anything else missing fails the second time.
            if attempt == 2 or os.path.lexists(tmp) or not path.parent.is_dir():
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    if durable:
        fsync_folder(path.parent)


# What a test run sets for itself and every process it starts (tests/conftest.py), except the
# tests about durability (tests/crash): the product never sets it, since without fsync a power
# loss may undo or tear what a message wrote.
NO_FSYNC_FOR_TESTS = "DEEP_RESEARCH_TEST_NO_FSYNC"


def fsync(fd: int) -> None:
    """`os.fsync`: what makes a write durable, here in one place (see NO_FSYNC_FOR_TESTS)."""
    if os.environ.get(NO_FSYNC_FOR_TESTS) != "1":
        os.fsync(fd)


def fsync_folder(folder: Path) -> None:
    """Make the names in `folder` durable (created, replaced, removed); best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            fsync(fd)
        finally:
            os.close(fd)


@dataclass
class Transaction:
    """The file changes of one message: whole-file writes and appends to logs; for an
    undo also exact bytes, deletions, truncations and folders to remove."""

    root: Path
    writes: dict[str, str] = field(default_factory=dict)  # relative path -> new content
    appends: list[tuple[str, str]] = field(default_factory=list)  # (relative path, text)
    clears: dict[str, str] = field(default_factory=dict)  # relative path -> digest it must still have
    raw: dict[str, bytes] = field(default_factory=dict)  # relative path -> exact bytes
    deletes: list[str] = field(default_factory=list)  # files to remove (missing is fine)
    truncates: dict[str, int] = field(default_factory=dict)  # relative path -> size to cut back to
    folders: list[str] = field(default_factory=list)  # folders to remove once empty
    durable: bool = True

    def write(self, target: Path, text: str) -> None:
        self.writes[self._relative(target)] = text

    def write_bytes(self, target: Path, data: bytes) -> None:
        """Restore a file's exact bytes (whatever their encoding or line breaks)."""
        rel = self._relative(target)
        self.writes.pop(rel, None)
        self.raw[rel] = data

    def delete(self, target: Path) -> None:
        """Remove the file `target` (the link itself, if it is one)."""
        self.deletes.append(self._relative_entry(target))

    def truncate(self, target: Path, size: int) -> None:
        """Cut the file back to `size` bytes (an undo takes back what a message appended)."""
        self.truncates[self._relative_entry(target)] = size

    def remove_folder(self, target: Path) -> None:
        """Remove the folder once the deletions have emptied it (left in place if not empty)."""
        self.folders.append(self._relative_entry(target))

    def _relative_entry(self, target: Path) -> str:
        """Like `_relative`, but the last component is not followed if it is a link: the
        entry itself is acted on, inside the folder's real path."""
        parent = ensure_inside(self.root, target.parent)
        real_root = os.path.realpath(self.root)
        if str(parent) == real_root and target.name in ("", ".", ".."):
            raise UnsafePath(f"refusing to remove the research folder itself: {target}")
        return os.path.relpath(os.path.join(parent, target.name), real_root)

    def clear_if_unchanged(self, target: Path, expected: str) -> None:
        """Empty `target` when it is applied, but only if it still holds `expected` then
        (compared by `content_digest`): text written meanwhile by someone else is never lost."""
        self.clears[self._relative(target)] = content_digest(expected)

    def append(self, target: Path, text: str) -> None:
        if text:
            self.appends.append((self._relative(target), text))

    def _relative(self, target: Path) -> str:
        ensure_inside(self.root, target)
        return os.path.relpath(os.path.realpath(target), os.path.realpath(self.root))

    def commit(self, cache: FileCache | None = None) -> list[Path]:
        """Apply everything, all or nothing across crashes; returns the files changed."""
        for rel in list(self.writes) + list(self.raw) + [rel for rel, _ in self.appends] + list(self.clears):
            _check_target(self.root, rel)
        pending = {
            "writes": self.writes,
            "clears": self.clears,
            "appends": [
                {"path": rel, "text": text, "offset": _size(self.root / rel)} for rel, text in self.appends
            ],
        }
        # Only what an undo uses is written, so a message's pending file is as before.
        if self.raw:
            pending["raw"] = {rel: base64.b64encode(data).decode("ascii") for rel, data in self.raw.items()}
        if self.deletes:
            pending["deletes"] = self.deletes
        if self.truncates:
            pending["truncates"] = self.truncates
        if self.folders:
            pending["folders"] = self.folders
        book = bookkeeping(self.root)
        atomic_write(book / PENDING, json.dumps(pending, ensure_ascii=False), durable=self.durable)
        changed = _apply(self.root, pending, self.durable, cache)
        _finish(book, self.durable)
        return changed


class BlockedPath(StoreError):
    """Something on disk stands where the transaction must write (a folder for a file …)."""


def _check_target(root: Path, rel: str) -> None:
    """Refuse before the commit point what could not be applied after it."""
    target = root / rel
    if target.is_dir():
        raise BlockedPath(f"cannot write {target}: a folder is in the way")
    try:
        st = os.stat(target)
    except OSError:
        st = None
    if st is not None and not stat_module.S_ISREG(st.st_mode):  # opening a FIFO to append would block
        raise BlockedPath(f"cannot write {target}: it is not a regular file (a pipe, a device or a socket)")
    for parent in target.parents:
        if parent == root:
            break
        if parent.exists() and not parent.is_dir():
            raise BlockedPath(f"cannot write {target}: {parent} is a file, not a folder")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _finish(book: Path, durable: bool) -> None:
    """Remove the pending file once everything it holds is applied (and durable): its
    removal is made durable too, or a power loss could bring it back to be applied again
    over what was changed since (a hand edit)."""
    os.unlink(book / PENDING)
    if durable:
        fsync_folder(book)


def _apply(root: Path, pending: dict, durable: bool, cache: FileCache | None, *, recovering: bool = False) -> list[Path]:
    """Apply a pending record. `recovering`: an interrupted attempt may have done part of it
    without making it durable (a replace or a new folder whose parent was not fsynced yet, a
    deletion, a truncation), and what is found done is skipped: so every folder on the way
    to what the record names is fsynced at the end, and so are truncated files."""
    changed = []
    for rel, text in pending["writes"].items():
        target = ensure_inside(root, root / rel)
        if read_text(target) == text.replace("\r\n", "\n") and target.is_file():
            continue  # unchanged: leave the file (and its mtime) alone
        atomic_write(target, text, durable=durable)
        changed.append(target)
        if cache is not None:
            cache.forget(target)
    for rel, digest in pending.get("clears", {}).items():
        target = ensure_inside(root, root / rel)
        current = read_text(target) if target.is_file() else None
        if current is None or not current or content_digest(current) != digest:
            continue  # changed by someone else since it was read (or already empty): keep it
        atomic_write(target, "", durable=durable)
        changed.append(target)
        if cache is not None:
            cache.forget(target)
    for rel, encoded in pending.get("raw", {}).items():
        target = ensure_inside(root, root / rel)
        data = base64.b64decode(encoded)
        if read_bytes(target) == data and target.is_file():
            continue
        atomic_write(target, data, durable=durable)
        changed.append(target)
        if cache is not None:
            cache.forget(target)
    changed += _remove(root, pending, durable, cache, recovering=recovering)
    for item in pending["appends"]:
        target = ensure_inside(root, root / item["path"])
        make_folders(target.parent, durable=durable)
        new = not target.exists()
        with open(target, "ab") as handle:
            # A torn tail from a killed earlier attempt is cut before appending again.
            handle.truncate(item["offset"])
            handle.write(item["text"].encode("utf-8"))
            if durable:
                handle.flush()
                fsync(handle.fileno())
        if new and durable:
            fsync_folder(target.parent)  # the new file's name, not only its data
        changed.append(target)
    if recovering and durable:
        named = [*pending["writes"], *pending.get("clears", {}), *pending.get("raw", {}),
                 *(item["path"] for item in pending["appends"]), *pending.get("deletes", []), *pending.get("folders", [])]
        folders: set[Path] = set()
        for rel in named:
            folder = (root / rel).parent
            while folder not in folders and folder.is_dir():
                folders.add(folder)
                if folder == root or folder.parent == folder:
                    break
                folder = folder.parent
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            fsync_folder(folder)
    return changed


def _remove(root: Path, pending: dict, durable: bool, cache: FileCache | None, *, recovering: bool = False) -> list[Path]:
    """Deletions, truncations and emptied folders: each step may be done again after a crash.
    A folder is fsynced after names in it are removed, before it is removed itself."""
    changed = []
    emptied: set[Path] = set()
    for rel in pending.get("deletes", []):
        target = _entry_inside(root, rel)
        try:
            os.unlink(target)
        except FileNotFoundError:
            continue
        emptied.add(target.parent)
        changed.append(target)
        if cache is not None:
            cache.forget(target)
    if durable:
        for folder in emptied:
            fsync_folder(folder)
    for rel, size in pending.get("truncates", {}).items():
        target = _entry_inside(root, rel)
        if not target.is_file() or target.stat().st_size <= size:
            if recovering and durable and target.is_file():
                _fsync_file(target)  # cut by the interrupted attempt, perhaps not durably
            continue
        with open(target, "r+b") as handle:
            handle.truncate(size)
            if durable:
                handle.flush()
                fsync(handle.fileno())
        changed.append(target)
        if cache is not None:
            cache.forget(target)
    for rel in sorted(pending.get("folders", []), key=lambda r: r.count(os.sep), reverse=True):
        folder = _entry_inside(root, rel)
        if folder.is_symlink() or not folder.is_dir():
            continue
        _sweep_temporaries(folder, recursive=False)  # ours, from an interrupted write
        if durable:
            fsync_folder(folder)  # the removals inside it are durable before it goes
        try:
            folder.rmdir()
        except OSError as error:  # not empty: something was put there; leave it
            log.warning("kept the folder %s: %s", folder, error)
            continue
        if durable:
            fsync_folder(folder.parent)
        changed.append(folder)
    return changed


def _fsync_file(path: Path) -> None:
    fsync_folder(path)  # the same open-fsync-close: O_RDONLY opens a file as well as a folder


def _entry_inside(root: Path, rel: str) -> Path:
    """The entry `rel` under `root` (not following a link in its last component), refused
    if its folder leaves the research."""
    target = root / rel
    return ensure_inside(root, target.parent) / target.name


def read_bytes(path: Path) -> bytes | None:
    """A regular file's bytes, read without blocking; None if missing, special or unreadable."""
    return _read_regular(str(path), None, None)


def recover(root: Path, cache: FileCache | None = None) -> bool:
    """Finish a message whose commit was interrupted; sweep temporary files. True if it did."""
    book = bookkeeping(root)
    pending_file = book / PENDING
    finished = False
    text = Guard(root).read_text(pending_file)
    if text is not None:
        try:
            pending = json.loads(text)
        except ValueError:
            pending = None  # torn before the atomic rename finished: nothing was applied
        if pending is not None:
            # A kill may have come before the commit point was durable: make it so before
            # anything is applied on its strength.
            _fsync_file(pending_file)
            fsync_folder(book)
            try:
                _apply(root, pending, True, cache, recovering=True)
                finished = True
            except OSError as error:
                # Applying failed for a reason retrying cannot fix (a file made by hand where
                # a folder must go …): keep the record for a person, and carry on.
                kept = book / f"pending-failed-{secrets.token_hex(4)}.json"
                os.replace(pending_file, kept)
                fsync_folder(book)
                log.error("could not finish an interrupted message (%s); its record is kept in %s", error, kept)
        # Temporaries elsewhere in the tree exist only if a commit was interrupted; their
        # removal is durable before the pending file's (nothing else would sweep them).
        for folder in _sweep_temporaries(root, recursive=True):
            fsync_folder(folder)
        with contextlib.suppress(FileNotFoundError):
            _finish(book, True)
    else:
        # …or in the root, from a draft of the message document written without a commit (the
        # autopilot's) when the power went: a writer that loses its temporary writes it again.
        _sweep_temporaries(root, recursive=False)
    _sweep_temporaries(book, recursive=False)
    return finished


def pending_path(root: Path) -> Path:
    """The commit point of an interrupted transaction, if it exists (see `recover`)."""
    return bookkeeping(root) / PENDING


def _sweep_temporaries(folder: Path, *, recursive: bool) -> list[Path]:
    """Remove our temporary files; the folders where some were removed."""
    swept = []
    for current, _dirs, files in os.walk(folder):
        removed = False
        for name in files:
            if name.startswith(TMP_MARK):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(current, name))
                    removed = True
        if removed:
            swept.append(Path(current))
        if not recursive:
            break
    return swept


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Exclusive lock on the research, across processes (CLI and server)."""
    book = bookkeeping(root)
    make_folders(book, durable=True)  # once per research: the folder the commits rely on
    fd = os.open(book / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _lock_file(fd)
        yield
    finally:
        os.close(fd)  # closing releases the lock


if fcntl is not None:

    def _lock_file(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

else:  # pragma: no cover - Windows
    import msvcrt

    def _lock_file(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
