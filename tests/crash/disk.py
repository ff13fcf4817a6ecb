"""The persistence model: what a power loss may leave of a recorded sequence of file-system
operations (docs/decisions.md, "Crash safety under power loss", says why this model).

An `Image` is a folder's durable contents as the model sees it: folders, names (each
naming an inode) and inodes (bytes). Operations change it:

- names: `Mkdir`, `Rmdir`, `Create`, `Rename`, `Unlink`, `Link` — an entry of a folder;
- data: `Write` (bytes at an offset), `SetSize` (truncate or extend) — an inode;
- barriers: `FsyncFile` (an inode's data), `FsyncDir` (a folder's entries).

At a crash after the first k operations, an operation is *durable* if a later one of
those k is a barrier that covers it: `FsyncFile` of its inode for data, `FsyncDir` of
its folder for a name (both folders for a rename). Nothing else is ordered: the
operations that are not durable (`U`) may each have reached the disk or not, whatever
their order, and a write may have reached it in part, a whole number of blocks. The
states built for a crash point (after ALICE, OSDI 2014, and SQLite's crash tests):

- every prefix of U in issue order (from none of it to all of it: the last is what a
  `kill -9` leaves, the page cache),
- all of U but one operation (each one in turn: an operation reordered after the crash),
- the operations of U before a write, then that write cut at each block boundary inside
  it (at most `MAX_CUTS` of them), the rest of U lost.

An operation whose folder does not exist when it is replayed is lost with it (its inode
is unreachable), as on a real disk.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Union

BLOCK = 4096
MAX_CUTS = 3


def parent(path: str) -> str:
    return os.path.dirname(path)


# -- operations -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mkdir:
    path: str

    def folders(self) -> tuple[str, ...]:
        return (parent(self.path),)


@dataclass(frozen=True)
class Rmdir:
    path: str

    def folders(self) -> tuple[str, ...]:
        return (parent(self.path),)


@dataclass(frozen=True)
class Create:
    path: str
    ino: int

    def folders(self) -> tuple[str, ...]:
        return (parent(self.path),)


@dataclass(frozen=True)
class Rename:
    src: str
    dst: str

    def folders(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((parent(self.src), parent(self.dst))))


@dataclass(frozen=True)
class Unlink:
    path: str

    def folders(self) -> tuple[str, ...]:
        return (parent(self.path),)


@dataclass(frozen=True)
class Link:
    src: str
    dst: str

    def folders(self) -> tuple[str, ...]:
        return (parent(self.dst),)


@dataclass(frozen=True)
class Write:
    ino: int
    offset: int
    data: bytes

    def __repr__(self) -> str:
        return f"Write(ino={self.ino}, offset={self.offset}, {len(self.data)} bytes)"


@dataclass(frozen=True)
class SetSize:
    ino: int
    size: int


@dataclass(frozen=True)
class FsyncFile:
    ino: int


@dataclass(frozen=True)
class FsyncDir:
    path: str


NameOp = Union[Mkdir, Rmdir, Create, Rename, Unlink, Link]
DataOp = Union[Write, SetSize]
Op = Union[NameOp, DataOp, FsyncFile, FsyncDir]
NAME_OPS = (Mkdir, Rmdir, Create, Rename, Unlink, Link)
DATA_OPS = (Write, SetSize)


def describe(op: Op, image: Image | None = None) -> str:
    """One line for a person: the operation, with a file name for inode operations."""
    if isinstance(op, (Write, SetSize, FsyncFile)) and image is not None:
        names = [p for p, i in image.names.items() if i == op.ino]
        return f"{op!r} [{', '.join(names) or 'no name yet'}]"
    return repr(op)


# -- images ---------------------------------------------------------------------------------------


@dataclass
class Image:
    """A folder tree as the model holds it (paths relative to the sandbox, '' is the sandbox)."""

    folders: set[str] = field(default_factory=lambda: {""})
    names: dict[str, int] = field(default_factory=dict)  # file path -> inode
    inodes: dict[int, bytes] = field(default_factory=dict)

    def copy(self) -> Image:
        return Image(set(self.folders), dict(self.names), dict(self.inodes))

    def files(self) -> dict[str, bytes]:
        return {path: self.inodes[ino] for path, ino in self.names.items()}

    def digest(self) -> str:
        h = hashlib.sha256()
        for folder in sorted(self.folders):
            h.update(b"D" + folder.encode() + b"\0")
        for path, data in sorted(self.files().items()):
            h.update(b"F" + path.encode() + b"\0" + hashlib.sha256(data).digest())
        return h.hexdigest()

    def apply(self, op: Op, cut: int | None = None) -> None:
        """Replay `op` (a write cut to its first `cut` bytes); one that cannot be replayed
        (its folder is missing) is lost."""
        if isinstance(op, Mkdir):
            if parent(op.path) in self.folders and op.path not in self.names:
                self.folders.add(op.path)
        elif isinstance(op, Rmdir):
            if op.path in self.folders and not any(_inside(p, op.path) for p in [*self.folders, *self.names] if p != op.path):
                self.folders.discard(op.path)
        elif isinstance(op, Create):
            if parent(op.path) in self.folders:
                self.names[op.path] = op.ino
                self.inodes.setdefault(op.ino, b"")
        elif isinstance(op, Rename):
            if op.src in self.names and parent(op.dst) in self.folders:
                self.names[op.dst] = self.names.pop(op.src)
        elif isinstance(op, Unlink):
            self.names.pop(op.path, None)
        elif isinstance(op, Link):
            if op.src in self.names and parent(op.dst) in self.folders:
                self.names[op.dst] = self.names[op.src]
        elif isinstance(op, Write):
            data = op.data if cut is None else op.data[:cut]
            old = self.inodes.get(op.ino, b"")
            if len(old) < op.offset:
                old = old + b"\0" * (op.offset - len(old))
            self.inodes[op.ino] = old[: op.offset] + data + old[op.offset + len(data):]
        elif isinstance(op, SetSize):
            old = self.inodes.get(op.ino, b"")
            self.inodes[op.ino] = old[: op.size] + b"\0" * max(0, op.size - len(old))

    def materialize(self, target: Path) -> None:
        """Write the image into the empty folder `target` (names of one inode as hard links)."""
        for folder in sorted(self.folders, key=lambda f: f.count("/")):
            if folder:
                os.makedirs(target / folder, exist_ok=True)
        first: dict[int, str] = {}
        for path, ino in sorted(self.names.items()):
            if ino in first:
                os.link(target / first[ino], target / path)
            else:
                first[ino] = path
                (target / path).write_bytes(self.inodes[ino])


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder + "/")


def read_image(root: Path) -> Image:
    """The image of a real folder (symbolic links are not followed, nor recorded)."""
    image = Image()
    ino = 0
    for current, dirs, files in os.walk(root):
        rel = os.path.relpath(current, root)
        rel = "" if rel == "." else rel
        image.folders.add(rel)
        for name in files:
            path = os.path.join(current, name)
            if os.path.islink(path):
                continue
            ino += 1
            image.names[os.path.join(rel, name)] = ino
            with open(path, "rb") as handle:
                image.inodes[ino] = handle.read()
    return image


# -- crash states -----------------------------------------------------------------------------------


def covered(ops: list[Op], k: int) -> list[bool]:
    """For each of the first k operations, whether a barrier among them makes it durable."""
    synced_inodes: set[int] = set()
    synced_folders: set[str] = set()
    durable = [True] * k
    for i in range(k - 1, -1, -1):
        op = ops[i]
        if isinstance(op, FsyncFile):
            synced_inodes.add(op.ino)
        elif isinstance(op, FsyncDir):
            synced_folders.add(op.path)
        elif isinstance(op, DATA_OPS):
            durable[i] = op.ino in synced_inodes
        elif isinstance(op, NAME_OPS):
            durable[i] = all(f in synced_folders for f in op.folders())
    return durable


@dataclass(frozen=True)
class CrashState:
    """How a state was built: a crash after `point` operations, with these operations of the
    prefix lost and at most one write cut short."""

    point: int
    lost: tuple[int, ...] = ()
    cut: tuple[int, int] | None = None  # (operation index, bytes kept)
    kind: str = "prefix"

    def build(self, initial: Image, ops: list[Op]) -> Image:
        image = initial.copy()
        lost = set(self.lost)
        for i in range(self.point):
            if i in lost:
                continue
            if self.cut is not None and i == self.cut[0]:
                image.apply(ops[i], cut=self.cut[1])
            else:
                image.apply(ops[i])
        return image

    def explain(self, ops: list[Op], initial: Image) -> str:
        image = initial.copy()
        for op in ops[: self.point]:
            image.apply(op)
        last = describe(ops[self.point - 1], image) if self.point else "nothing yet"
        text = f"crash after operation {self.point} ({last}), {self.kind}"
        if self.lost:
            text += "; lost: " + "; ".join(f"#{i + 1} {describe(ops[i], image)}" for i in self.lost[:6])
            if len(self.lost) > 6:
                text += f" … ({len(self.lost)} in all)"
        if self.cut is not None:
            text += f"; cut: #{self.cut[0] + 1} {describe(ops[self.cut[0]], image)} to {self.cut[1]} bytes"
        return text


def crash_states(ops: list[Op], points: range | None = None) -> Iterator[CrashState]:
    """Every state the model allows at each crash point (see the module docstring)."""
    for k in points if points is not None else range(len(ops) + 1):
        durable = covered(ops, k)
        pending = [i for i in range(k) if not durable[i] and not isinstance(ops[i], (FsyncFile, FsyncDir))]
        for j in range(len(pending) + 1):
            yield CrashState(k, tuple(pending[j:]), kind=f"{j} of {len(pending)} unsynced operations in order")
        for n, i in enumerate(pending[:-1]):  # dropping the last one is a prefix, made above
            yield CrashState(k, (i,), kind="one unsynced operation lost, the others kept")
        for n, i in enumerate(pending):
            op = ops[i]
            if isinstance(op, Write):
                for keep in block_cuts(op):
                    yield CrashState(k, tuple(pending[n + 1:]), (i, keep), kind="a write cut at a block boundary")


def block_cuts(op: Write) -> list[int]:
    """Bytes of the write that end on a block boundary of the file, strictly inside it."""
    first = BLOCK - op.offset % BLOCK
    cuts = list(range(first, len(op.data), BLOCK))
    if len(cuts) > MAX_CUTS:
        cuts = [cuts[0], cuts[len(cuts) // 2], cuts[-1]]
    return cuts
