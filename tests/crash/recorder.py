"""Recording, in process, the file-system operations made under a folder (the sandbox).

The functions of the `os` module that change names or make them durable are wrapped for
as long as `Recorder.recording()` lasts: `mkdir`, `rmdir`, `rename`, `replace`, `unlink`,
`remove`, `link`, `fsync` (pathlib, `os.makedirs` and the engine all call these). Data is
not followed call by call: before each wrapped call the sandbox is compared with the
model and every difference becomes operations (a new name is a `Create`, new bytes a
`Write` at the first changed offset, a shorter file a `SetSize`). So a write reaches the
model when it reached the kernel (a buffered write that was never flushed is not there
yet), in its place before the next rename or fsync, which is what ordering needs.

Calls that change something outside the sandbox are noted in `outside` (a test asserts
there are none). Wrapping `os` is global: every thread of the process is recorded, which
is what the autopilot's worker threads need.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from pathlib import Path
from typing import Callable, Iterator

from .disk import (
    Create, FsyncDir, FsyncFile, Image, Link, Mkdir, Op, Rename, Rmdir, SetSize, Unlink, Write, read_image,
)

_WRAPPED = ("mkdir", "rmdir", "rename", "replace", "unlink", "remove", "link", "fsync")


class Recorder:
    def __init__(self, sandbox: Path, image: Image | None = None) -> None:
        """`image`: what the sandbox holds, if it was materialized from one (its inode numbers
        are kept, so that the recording continues an earlier one)."""
        self.sandbox = Path(os.path.realpath(sandbox))
        self.initial: Image = image.copy() if image is not None else read_image(self.sandbox)
        self.model: Image = self.initial.copy()
        self.ops: list[Op] = []
        self.outside: list[str] = []  # calls that changed something outside the sandbox
        self.marks: list[int] = []  # numbers of operations after which the state is consistent
        self._real_ino: dict[int, int] = {}  # the real inode number of each model inode
        self._next = max(self.initial.inodes, default=0) + 1
        self._lock = threading.RLock()
        self._real: dict[str, Callable] = {}
        for path, ino in self.initial.names.items():
            self._real_ino[ino] = os.lstat(self.sandbox / path).st_ino

    def mark(self) -> None:
        """Note that the sandbox is in a consistent state now (see scenarios.Scenario)."""
        with self._lock:
            self._scan()
            self.marks.append(len(self.ops))

    # -- the wrapping ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def recording(self) -> Iterator[Recorder]:
        self._real = {name: getattr(os, name) for name in _WRAPPED}
        wrappers = {
            "mkdir": self._one_path("mkdir", lambda rel: [Mkdir(rel)]),
            "rmdir": self._one_path("rmdir", lambda rel: [Rmdir(rel)]),
            "unlink": self._one_path("unlink", self._unlinked),
            "remove": self._one_path("remove", self._unlinked),
            "rename": self._two_paths("rename", self._renamed),
            "replace": self._two_paths("replace", self._renamed),
            "link": self._two_paths("link", self._linked),
            "fsync": self._fsync,
        }
        for name, wrapper in wrappers.items():
            setattr(os, name, wrapper)
        try:
            yield self
        finally:
            for name, real in self._real.items():
                setattr(os, name, real)
            with self._lock:
                self._scan()

    def _rel(self, path, dir_fd: int | None = None) -> str | None:
        """`path` relative to the sandbox (its folder resolved, not its last component), or None.
        With `dir_fd`, `path` is relative to that open folder (engine/retrieval/layout_store.py writes so)."""
        if isinstance(path, int):
            return None
        name = os.fsdecode(path)
        if dir_fd is not None and not os.path.isabs(name):
            name = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
        folder = os.path.realpath(os.path.dirname(os.path.abspath(name)))
        full = os.path.join(folder, os.path.basename(name))
        if full == str(self.sandbox):
            return ""
        if not full.startswith(str(self.sandbox) + os.sep):
            return None
        return os.path.relpath(full, self.sandbox)

    def _one_path(self, name: str, ops: Callable[[str], list[Op]]) -> Callable:
        real = self._real[name]

        def wrapper(path, *args, **kwargs):
            rel = self._rel(path, kwargs.get("dir_fd"))
            with self._lock:
                if rel is not None:
                    self._scan()
                result = real(path, *args, **kwargs)
                if rel is None:
                    self.outside.append(f"{name}({os.fsdecode(path)})")
                else:
                    for op in ops(rel):
                        self._emit(op)
                return result

        return wrapper

    def _two_paths(self, name: str, ops: Callable[[str, str], list[Op]]) -> Callable:
        real = self._real[name]

        def wrapper(src, dst, *args, **kwargs):
            rel_src, rel_dst = self._rel(src, kwargs.get("src_dir_fd")), self._rel(dst, kwargs.get("dst_dir_fd"))
            with self._lock:
                if rel_src is not None or rel_dst is not None:
                    self._scan()
                result = real(src, dst, *args, **kwargs)
                if rel_dst is None:
                    self.outside.append(f"{name}({os.fsdecode(src)}, {os.fsdecode(dst)})")
                elif rel_src is None:
                    self._scan()  # something came in from outside: it is simply new here
                else:
                    for op in ops(rel_src, rel_dst):
                        self._emit(op)
                return result

        return wrapper

    def _unlinked(self, rel: str) -> list[Op]:
        return [Unlink(rel)] if rel in self.model.names else []

    def _renamed(self, src: str, dst: str) -> list[Op]:
        if src in self.model.names:
            return [Rename(src, dst)]
        self._scan()  # a folder renamed (the engine never does): read what it became
        return []

    def _linked(self, src: str, dst: str) -> list[Op]:
        return [Link(src, dst)] if src in self.model.names else []

    def _fsync(self, fd: int) -> None:
        real = self._real["fsync"]
        with self._lock:
            st = os.fstat(fd)
            target = None
            if stat.S_ISDIR(st.st_mode):
                rel = self._rel(os.readlink(f"/proc/self/fd/{fd}"))
                if rel is not None:
                    self._scan()
                    target = FsyncDir(rel)
            else:
                self._scan()
                ino = self._named(st.st_ino)
                if ino is not None:
                    target = FsyncFile(ino)
            real(fd)
            if target is not None:
                self._emit(target)

    # -- the model -------------------------------------------------------------------------------------

    def _named(self, real_ino: int) -> int | None:
        """The newest model inode with a name that stands for this real inode (numbers are reused)."""
        named = set(self.model.names.values())
        found = [m for m, r in self._real_ino.items() if r == real_ino and m in named]
        return max(found) if found else None

    def _emit(self, op: Op) -> None:
        self.ops.append(op)
        self.model.apply(op)

    def _scan(self) -> None:
        """Turn every difference between the sandbox and the model into operations."""
        real_folders: set[str] = set()
        real_files: dict[str, tuple[int, bytes]] = {}
        for current, dirs, files in os.walk(self.sandbox):
            rel = os.path.relpath(current, self.sandbox)
            rel = "" if rel == "." else rel
            real_folders.add(rel)
            for name in files:
                path = os.path.join(current, name)
                try:
                    st = os.lstat(path)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    with open(path, "rb") as handle:
                        real_files[os.path.join(rel, name)] = (st.st_ino, handle.read())
                except OSError:
                    continue
        for folder in sorted(real_folders - self.model.folders, key=lambda f: f.count("/")):
            self._emit(Mkdir(folder))
        for path in [p for p in self.model.names if p not in real_files]:
            self._emit(Unlink(path))
        for path, (real_ino, data) in real_files.items():
            ino = self.model.names.get(path)
            if ino is not None and self._real_ino.get(ino) != real_ino:
                self._emit(Unlink(path))
                ino = None
            if ino is None:
                known = self._named(real_ino)
                if known is not None:
                    source = next(p for p, m in self.model.names.items() if m == known)
                    self._emit(Link(source, path))
                    ino = known
                else:
                    ino = self._next
                    self._next += 1
                    self._real_ino[ino] = real_ino
                    self._emit(Create(path, ino))
            old = self.model.inodes.get(ino, b"")
            if old != data:
                same = _common_prefix(old, data)
                if len(data) < len(old) or same < len(old):
                    self._emit(SetSize(ino, same))
                if len(data) > same:
                    self._emit(Write(ino, same, data[same:]))
        for folder in sorted(self.model.folders - real_folders, key=lambda f: -f.count("/")):
            self._emit(Rmdir(folder))


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # the first difference, by halves (files can be megabytes)
    while low < high:
        mid = (low + high) // 2
        if a[low:mid + 1] == b[low:mid + 1]:
            low = mid + 1
        else:
            high = mid
    return low
