"""Knowing in one system call that nothing a computation read has changed (Linux's inotify).

`store.Reads.unchanged()` tells whether a computation would read the same again with one
`stat` per file it read: 42 for the analysis of a typical 500-line message, most of what a
language-server request costs when nothing changed. With the watch on (`start()`; the
language server starts it), a `Reads` found unchanged once stays unchanged for as long as the
kernel reports no change in the folders it read in: one `read` of the inotify descriptor (and
one `stat` per research root) instead of a `stat` per file. Any reported change anywhere sends
every `Reads` back to its stats once, so a missed optimisation costs what it did before, and
nothing here can make a result stale:

- a folder is watched before the stats that vouch for what was read in it, so a change after
  them is reported, and a change before them is seen by them;
- every folder from the research's root down to each file is watched (a folder renamed by
  hand changes what every path below it names), and the root's own place is checked by a
  `stat` each time (a folder above it renamed);
- only folders of a local file system (a network or FUSE one does not report what other
  machines change), reached through no link, on the root's device;
- a file or folder that is a link, a path outside every research, a full watch table or no
  inotify at all (macOS, Windows): that `Reads` is checked by its stats, as without the watch.

The kernel queues events when a change is made, before the call that made it returns, so a
change made before a request was sent is in the queue when the request is answered.
"""

from __future__ import annotations

import os
import select
import stat as stat_module
import threading
from typing import Iterable

# inotify(7)
_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_IGNORED = 0x400, 0x800, 0x8000
_IN_ONLYDIR, _IN_DONT_FOLLOW = 0x01000000, 0x02000000
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
         | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR | _IN_DONT_FOLLOW)
_EVENT_HEADER = 16  # int wd; uint32 mask, cookie, len

MAX_FOLDERS = 4096  # watched at most per process (the kernel's default limit is per user)
# File systems whose changes the kernel reports however they are made: local ones. A network
# or FUSE file system reports only what this machine changes, so it is checked by stats.
LOCAL_FILE_SYSTEMS = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "tmpfs", "ramfs", "overlay", "zfs", "jfs", "reiserfs",
    "bcachefs", "nilfs2", "vfat", "exfat", "ntfs3", "hfsplus",
})


class Watch:
    """One inotify descriptor for the process: the folders it watches, and a generation that
    grows whenever the kernel has reported anything about them."""

    def __init__(self, fd: int, add_watch, rm_watch) -> None:  # type: ignore[no-untyped-def]
        self._fd = fd
        # Asked whether anything is queued before reading: a read of an empty queue raises
        # (EAGAIN), and raising costs more than the question (select.poll: no exception).
        self._queued = select.poll()
        self._queued.register(fd, select.POLLIN)
        self._add_watch, self._rm_watch = add_watch, rm_watch
        self._lock = threading.Lock()
        self.generation = 0  # grows with every batch of events read
        self.layout = 0  # grows whenever a watch is dropped (a folder deleted or moved away)
        self._folders: dict[str, int] = {}  # watched folder -> watch descriptor
        self._paths: dict[int, str] = {}
        self._roots: dict[str, tuple[int, int] | None] = {}  # root -> (device, inode), None: not watchable

    # -- what the kernel says ---------------------------------------------------------------

    def poll(self) -> int:
        """Read what the kernel reported since the last call; the generation now (within a
        `moment`, as it was at the moment's first look)."""
        look = getattr(_local, "look", None)
        if look is not None and self in look:
            return look[self]
        with self._lock:
            generation = self._poll()
        if look is not None:
            look[self] = generation
        return generation

    def _poll(self) -> int:
        while self._queued.poll(0):  # something queued (or the descriptor closed under it: the read says)
            try:
                data = os.read(self._fd, 65536)
            except (BlockingIOError, InterruptedError):
                return self.generation
            except OSError:  # the descriptor is gone: nothing is vouched for again
                self.generation += 1
                return self.generation
            self.generation += 1
            offset = 0
            while offset + _EVENT_HEADER <= len(data):
                wd = int.from_bytes(data[offset:offset + 4], "little", signed=True)
                mask = int.from_bytes(data[offset + 4:offset + 8], "little")
                length = int.from_bytes(data[offset + 12:offset + 16], "little")
                offset += _EVENT_HEADER + length
                if mask & (_IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF):
                    self._drop(wd)
        return self.generation

    def _drop(self, wd: int) -> None:
        path = self._paths.pop(wd, None)
        if path is not None:
            self._folders.pop(path, None)
            self.layout += 1
            try:
                self._rm_watch(self._fd, wd)  # a moved folder's watch would follow it elsewhere
            except OSError:
                pass

    def vouches(self, vouched: tuple) -> bool:
        """Whether a `Reads` vouched for at (generation, layout, roots, …) still is: nothing
        reported since, every root in its place (once per `moment` for the same tuple)."""
        look = getattr(_local, "look", None)
        if look is not None:
            known = look.get(vouched)
            if known is not None:
                return known
        still = vouched[0] == self.poll() and vouched[1] == self.layout and self.roots_in_place(vouched[2])
        if look is not None:
            look[vouched] = still
        return still

    def roots_in_place(self, roots: Iterable[str]) -> bool:
        """Whether each root is still the folder it was when watched (a `stat` each, once
        within a `moment`)."""
        look = getattr(_local, "look", None)
        for root in roots:
            if look is not None and look.get(root) is True:
                continue
            place = self._roots.get(root)
            try:
                st = os.stat(root)
            except OSError:
                return False
            if place is None or (st.st_dev, st.st_ino) != place:
                return False
            if look is not None:
                look[root] = True
        return True

    # -- what is watched ----------------------------------------------------------------------

    def cover(self, paths: Iterable[str]) -> tuple[tuple[str, ...], bool] | None:
        """Watch every folder whose change could change what `paths` name (each path's folder
        and the folders above it up to its research's root, and the path itself if it is a
        folder). The roots they are in, and whether every such folder was there to watch (if
        not, a folder made later must be watched then: cover again after any change); None if
        some path cannot be vouched for so."""
        with self._lock:
            roots: set[str] = set()
            complete = True
            for path in paths:
                root = self._root_of(path)
                covered = None if root is None else self._cover(root, path)
                if covered is None:
                    return None
                roots.add(root)  # type: ignore[arg-type]
                complete = complete and covered
            return tuple(roots), complete

    def add_root(self, root: str) -> None:
        """A research's root (a real path): its paths may be watched if its file system is local."""
        with self._lock:
            if root in self._roots:
                return
            place = None
            try:
                st = os.stat(root)
                if _file_system(root) in LOCAL_FILE_SYSTEMS:
                    place = (st.st_dev, st.st_ino)
            except OSError:
                pass
            self._roots[root] = place

    def _root_of(self, path: str) -> str | None:
        found = None
        for root in self._roots:
            if (path == root or path.startswith(root + os.sep)) and (found is None or len(root) > len(found)):
                found = root
        return found if found is not None and self._roots[found] is not None else None

    def _cover(self, root: str, path: str) -> bool | None:
        """True: watched; False: watched down to a folder that is missing; None: cannot be."""
        device = self._roots[root][0]  # type: ignore[index]
        try:
            own = os.lstat(path)
        except OSError:
            own = None
        if own is not None and stat_module.S_ISLNK(own.st_mode):
            return None
        folders = [] if path == root else os.path.relpath(os.path.dirname(path), root).split(os.sep)
        current = root
        chain = [root] + [current := os.path.join(current, part) for part in folders if part != "."]
        if own is not None and stat_module.S_ISDIR(own.st_mode) and path != root:
            chain.append(path)
        for folder in chain:
            if folder in self._folders:
                continue
            try:
                st = os.lstat(folder)
            except OSError:
                return False  # missing: its creation is reported to the folder above, watched
            if not stat_module.S_ISDIR(st.st_mode) or st.st_dev != device:
                return None  # a link, a file where a folder was expected, another mount
            if len(self._folders) >= MAX_FOLDERS:
                return None
            try:
                wd = self._add_watch(self._fd, os.fsencode(folder), _MASK)
            except OSError:
                return None
            self._folders[folder] = wd
            self._paths[wd] = folder
        return True

    def close(self) -> None:
        with self._lock:
            self._queued.unregister(self._fd)  # its number may be another file's once closed
            os.close(self._fd)
            self._folders.clear()
            self._paths.clear()
            self.generation += 1


def _file_system(path: str) -> str | None:
    """The type of the file system `path` is on, from /proc/self/mountinfo (the longest mount
    point above it); None if it cannot be told."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    best, kind = "", None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, after = left.split(), right.split()
        if len(fields) < 5 or not after:
            continue
        mount = fields[4].encode().decode("unicode_escape")  # octal escapes of spaces and tabs
        if (path == mount or path.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
            best, kind = mount, after[0]
    return kind


_watch: Watch | None = None
_local = threading.local()  # the look of the `moment` in progress on each thread


class moment:
    """`with moment():` the block takes one look at what the kernel reported (one read of the
    descriptor, one `stat` of each research root) however many results it checks, as if it
    ran at the instant it began. For blocks that only read the research (the language server
    answers each of its read-only requests in one): a change the block made itself would not
    be seen by its later checks."""

    __slots__ = ("outer",)

    def __enter__(self) -> None:
        self.outer = getattr(_local, "look", None)
        if self.outer is None:
            _local.look = {}

    def __exit__(self, *exc: object) -> None:
        if self.outer is None:
            _local.look = None



def start() -> Watch | None:
    """Start the process's watch (idempotent); None where inotify is not available."""
    global _watch
    if _watch is not None:
        return _watch
    try:
        import ctypes

        # The C library the interpreter is linked with (ctypes.util.find_library runs ldconfig:
        # ~80 ms of the server's start).
        libc = ctypes.CDLL(None, use_errno=True)
        init, add, rm = libc.inotify_init1, libc.inotify_add_watch, libc.inotify_rm_watch
    except (OSError, AttributeError, ImportError):
        return None
    add.argtypes, add.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int
    rm.argtypes, rm.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        return None  # e.g. the user's limit of inotify instances reached

    def add_watch(fd: int, path: bytes, mask: int) -> int:
        wd = add(fd, path, mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return wd

    _watch = Watch(fd, add_watch, rm)
    return _watch


def stop() -> None:
    """Stop the process's watch: every `Reads` is checked by its stats again."""
    global _watch
    if _watch is not None:
        _watch.close()
        _watch = None


def current() -> Watch | None:
    return _watch
