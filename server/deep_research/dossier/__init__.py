"""The research as a deliverable: one self-contained HTML file, the dossier.

    export(root, target)   # writes target atomically; returns what it wrote

It reads the tree through the engine (`Tree`, the journal, the accounting) with a file
cache of its own, so exporting from the language server does not fill the server's
cache with the whole tree, and writes the page as a stream into a temporary file next
to `target`, renamed over it at the end: a reader never sees half a dossier.

It takes no lock (a large research takes seconds to export, and a save must not wait for
it); a message executed or undone meanwhile changes the state or the journal, and then the
page is written again from the start, so that it shows one moment of the research.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..engine.core.state import Phase
from ..engine.research import Research
from ..engine.store import FileCache, fsync, fsync_folder, moment
from .page import Page

DEFAULT_NAME = "dossier.html"
ATTEMPTS = 3  # writings of the page before one that a message overlapped is kept
_PHASES = {
    Phase.NO_PROBLEM: "no problem defined yet",
    Phase.IN_FOCUS: "in progress",
    Phase.FINISHED: "finished",
    Phase.SHUT_DOWN: "shut down",
}


class NotADossier(FileExistsError):
    """The target exists and is not a dossier: it is someone's file, and is kept."""


@dataclass
class Exported:
    path: Path
    problems: int
    bytes: int
    attempts: int = 1
    settled: bool = True  # False: messages kept running while it was written (every attempt)


def is_dossier(path: Path) -> bool:
    """Whether `path` holds a dossier this program wrote (so replacing it loses nothing)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(2048)
    except OSError:
        return False
    return b'<meta name="generator" content="deep-research' in head


def export(root: Path, target: Path, *, replace_any: bool = False) -> Exported:
    """Write the dossier of the research at `root` to `target` (an HTML file). An existing
    file that is not a dossier is replaced only with `replace_any` (the user named it)."""
    research = Research.open(root, FileCache())
    target = Path(os.path.abspath(target))
    if target.exists() and not replace_any and not is_dossier(target):
        raise NotADossier(f"{target} exists and is not a dossier; it was left alone. Choose another file to write.")
    for attempt in range(1, ATTEMPTS + 1):
        before = moment(research.root)
        problems = _write(research, target)
        settled = moment(research.root) == before
        if settled:
            break
        research = Research.open(root, FileCache())  # read it again, as it is now
    return Exported(target, problems, target.stat().st_size, attempt, settled)


def _write(research: Research, target: Path) -> int:
    """Write the page to a temporary file next to `target`, then rename it over `target`,
    durably (data, then name): after a power loss the dossier is the old one or the new one.
    The temporary file is locked while it is written, so that the next export can tell one
    left by a crash (removed) from one being written (left alone)."""
    _sweep(target)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}{_TMP_SUFFIX}"
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as out:
            _hold(out.fileno())
            problems = Page(research.root, research.tree, out).write(_PHASES[research.state().phase])
            out.flush()
            fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_folder(target.parent)
    return problems


_TMP_SUFFIX = ".tmp"


def _sweep(target: Path) -> None:
    """Remove the temporary files of exports of `target` that were interrupted (a crash, a
    power loss): those nobody holds locked."""
    prefix = f".{target.name}."
    try:
        names = [n for n in os.listdir(target.parent) if n.startswith(prefix) and n.endswith(_TMP_SUFFIX)]
    except OSError:
        return
    for name in names:
        path = target.parent / name
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY)
            try:
                if _try_hold(fd):
                    os.unlink(path)
            finally:
                os.close(fd)


try:
    import fcntl

    def _hold(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _try_hold(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

except ImportError:  # pragma: no cover - Windows: stale temporaries stay (hidden files)
    def _hold(fd: int) -> None:
        return None

    def _try_hold(fd: int) -> bool:
        return False
