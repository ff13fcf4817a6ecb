"""Writing a research safely: durable folders and atomic writes, `Transaction` with its
pending file, `recover()`, and the inter-process lock.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .cache import FileCache
from .guard import Guard, read_bytes, read_text
from .paths import LOCK, PENDING, TMP_MARK, bookkeeping, content_digest

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("deep_research.engine")


class StoreError(OSError):
    """The research folder cannot take a message's changes; nothing was applied."""


class UnsafePath(StoreError):
    """A write would land outside the research folder."""


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
    fd = os.open(book / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
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
