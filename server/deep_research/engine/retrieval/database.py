"""Opening a derived SQLite database in a research's bookkeeping folder (the full-text index,
the vectors' store): the one way both are opened.

SQLite follows links in the path it is given, so before it opens one the file and its journals
are checked with `lstat` (`check_place`: a regular file, no link; a link is removed, never what
it points to), and after, the file SQLite opened (`PRAGMA database_list`) must be inside the
research (`open_inside`); a link swapped in between those two looks is the one thing not caught
(docs/evidence.md says so). A database that is broken is derived data: it is removed (`remove`)
and made again by its owner.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat as stat_module
from pathlib import Path

from ..store import BOOKKEEPING, Guard

JOURNALS = ("-journal", "-wal", "-shm")


class OpenedOutside(Exception):
    """SQLite opened a file outside the research (a link was put in the database's place)."""


def check_place(path: Path, guard: Guard) -> tuple[str | None, list[str]]:
    """Why the place of a derived database cannot hold it (None: it can): the bookkeeping folder
    reached through a link or not inside, the file or a journal a folder, a FIFO or a device; and
    the names of links found in the place of the file or a journal, which are removed (the links
    themselves: what they point to is not touched)."""
    book = path.parent
    real = guard.locate(book)
    if real is None or os.path.normpath(real) != os.path.normpath(str(book)):
        return f"its folder {BOOKKEEPING} is missing, or reached through a link", []
    removed: list[str] = []
    for name in (str(path), *(str(path) + s for s in JOURNALS)):
        try:
            info = os.lstat(name)
        except FileNotFoundError:
            continue
        except OSError as error:
            return f"{os.path.basename(name)} cannot be looked at: {error.strerror or error}", removed
        if stat_module.S_ISLNK(info.st_mode):
            os.unlink(name)  # the link, never its target
            removed.append(os.path.basename(name))
            continue
        if not stat_module.S_ISREG(info.st_mode):
            return f"{os.path.basename(name)} is not a regular file", removed
    return None, removed


def open_inside(path: Path, guard: Guard, *, busy_seconds: float, autocommit: bool) -> sqlite3.Connection:
    """`path` opened by SQLite (shared between threads; `autocommit`: no implicit transactions),
    the file it opened confirmed inside the research, else `OpenedOutside`."""
    db = sqlite3.connect(str(path), timeout=busy_seconds, isolation_level=None if autocommit else "DEFERRED",
                         check_same_thread=False)
    for row in db.execute("PRAGMA database_list"):
        if row[1] == "main" and row[2] and not guard.contains(os.path.realpath(row[2])):
            db.close()
            raise OpenedOutside
    return db


def schema_of(db: sqlite3.Connection) -> str | None:
    """The schema a derived database says it has (its `meta` table), or None."""
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return None
        raise
    return row[0] if row else None


def remove(path: Path) -> None:
    """A broken database and its journals removed (derived data: its owner makes it again)."""
    for name in (str(path), *(str(path) + s for s in JOURNALS)):
        with contextlib.suppress(OSError):
            os.unlink(name)
