"""The read guard: every reader of a research reads it through its `Guard`.

A research may come from someone else (a cloned repository, an unpacked archive, a shared
drive): any file or folder in it may be a link to a place outside it, a FIFO, a device or a
file nobody may read. Every reader of a research goes through its `Guard`, which opens what
it reads without blocking and checks the opened file itself (where the kernel says it is,
and what it is), so that nothing outside the research is ever read and nothing blocks. The
engine's own files are read the same way, unconfined (`read_text`, `read_bytes`).
"""

from __future__ import annotations

import os
import stat as stat_module
from pathlib import Path
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

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
        return read_regular(str(path), st, self, limit)

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


ANYWHERE, NOWHERE = _Anywhere(), _Nowhere()


def read_regular(name: str, st: os.stat_result | None, guard: Guard | None, limit: int | None = None) -> bytes | None:
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



def read_text(path: Path) -> str | None:
    """A regular file's content (undecodable bytes replaced rather than failing), read
    without blocking (see `Guard`); None if it is missing, not a regular file or unreadable.
    Not confined to a research: for files the engine itself writes; a research's files
    are read through its `Guard`."""
    data = read_regular(str(path), None, None)
    return None if data is None else decode(data)


def decode(data: bytes) -> str:
    """A file's bytes as text: UTF-8, undecodable bytes replaced, line breaks as `\\n`."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def read_bytes(path: Path) -> bytes | None:
    """A regular file's bytes, read without blocking; None if missing, special or unreadable."""
    return read_regular(str(path), None, None)
