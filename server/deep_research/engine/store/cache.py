"""The file cache, and what a computation read through it.

Reading goes through a bounded cache keyed by each file's (inode, size, times), so
unchanged files are parsed once and a hand edit is seen on the next read, without
watching. The cache can also note everything a computation read (`Reads`), so that its
result can be reused for as long as none of it changed (a `stat` each, or with the language
server's inotify watch, engine/store/watch.py, nothing while the kernel reports no change).
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_module
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from .guard import ANYWHERE, MAX_READ_BYTES, NOWHERE, Entry, Guard, decode, read_regular
from .watch import current as current_watch

T = TypeVar("T")

Signature = tuple[int, int, int, int]  # (inode, size, mtime, ctime) in nanoseconds
# A file changed less than this long ago may change again within the same timestamp tick
# (file times come from a coarse clock) and keep its signature: such reads are not trusted.
RACY_NS = 50_000_000


def _signature(st: os.stat_result) -> Signature:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def is_racy(st: os.stat_result) -> bool:
    """Changed so recently that a later change may keep its signature: not to be trusted yet."""
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
        # With the process's inotify watch on (engine/store/watch.py): the watch's generation and
        # layout when the stats last found all of it unchanged, the roots it lies in, and
        # whether every folder on its paths was there to watch.
        self._vouched: tuple[int, int, tuple[str, ...], bool] | None = None

    def note(self, path: str, st: os.stat_result | None) -> None:
        if path not in self.seen:  # the first look is the one the computation used
            self.seen[path] = None if st is None else _signature(st)
            if st is not None and is_racy(st):
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
        self._holding = 0  # `holding()` blocks open

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Keep files of any size read while the block runs (one message: its dry run, its
        execution and its prompt read the same sources, a book each, which are otherwise too big
        to keep); at its end (the last of those open) the cache goes back within its bounds."""
        with self._lock:
            self._holding += 1
        try:
            yield
        finally:
            with self._lock:
                self._holding -= 1
                if not self._holding:
                    for key in [k for k, entry in self._entries.items() if entry[2] > self.max_chars // 4]:
                        self._chars -= self._entries.pop(key)[2]
                    self._trim()

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
        return NOWHERE

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
        return (self._guard(name) or ANYWHERE).list_dir(name, hidden=hidden, outside=outside, own=own)

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
        data = read_regular(name, st, self._guard(name), MAX_READ_BYTES)
        if data is None:
            return None
        text = decode(data)
        value = parse(text)
        if keep and not is_racy(st) and (len(text) <= self.max_chars // 4 or self._holding):
            self._store(key, (signature, value, len(text)))
        return value

    def _store(self, key: str, entry: tuple[Signature, object, int]) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._chars -= old[2]
            self._entries[key] = entry
            self._chars += entry[2]
            self._trim()

    def _trim(self) -> None:
        """Drop the least recently used entries past the bounds (not past `max_chars` while holding)."""
        while len(self._entries) > self.max_entries or (self._chars > self.max_chars and not self._holding):
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
