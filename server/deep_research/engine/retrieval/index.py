"""The full-text index of a research's sources: SQLite's FTS5 in `.deep-research/index.sqlite3`.

Derived data, never the source of truth: every part of every attachment and context item
(engine/retrieval/parts.py), ranked by `///find` (engine/retrieval/ranking.py). It is kept in step with the files:

- each source's row remembers its file's (inode, size, mtime) and the digest of the text it
  indexed; a `find` stats the files in its scope (one `stat` each: checked cheaply, never
  rebuilt per `find`), and a source whose file changed is read again and indexed again only
  if its text did (a research copied elsewhere, with new inodes, keeps its index); a file
  changed within a moment (`store.is_racy`) of its reading is not trusted and is looked at next time;
- what a message attaches is indexed right after its transaction, under the research's lock
  (`Research._commit`); a crash in between leaves the index behind the files, which the next
  `find` sees and repairs: so the index can never be wrong in a way a `find` would notice;
- rows of files that are gone (an undo, a hand deletion) are dropped when a `find` runs;
- an index file that is not a database, or broken, is made again; one that is a link, or not
  a regular file (a folder, a FIFO), is never opened: a link is removed (not what it points
  to) and the index made again, anything else is left alone and the search works on an index
  made in memory for that message (the reply says why).

Every write is made under the research's lock (a message's execution), so two processes never
build it at once; SQLite's own locking (a busy timeout) covers anything else that opens it. It is
opened as every derived database is (database.py: never through a link, never outside the research).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..store import BOOKKEEPING, NO_FSYNC_FOR_TESTS, Guard, decode, is_racy
from .database import OpenedOutside, check_place, open_inside, remove, schema_of
from .layout_store import code_version
from .layout_store import text_digest as digest  # one digest of a text, for its row and its layout's record
from .parts import Layout, Reading

log = logging.getLogger("deep_research.engine")

INDEX_FILE = "index.sqlite3"
SCHEMA = "1"  # a file of another schema is made again
PART_BITS = 20  # a row's id: the source's id, then the part's number in the low bits
MAX_PARTS = (1 << PART_BITS) - 1
TOKENIZER = "porter unicode61 remove_diacritics 2"
BUSY_SECONDS = 30.0


@dataclass(frozen=True)
class Source:
    """One source as the index takes it: an attachment or a context item."""

    key: str  # its file's path relative to the research folder (unique)
    text: str  # its text, as `read` shows it
    layout: Layout
    file: Path | None  # its file; None while it is not on disk yet (attached earlier in the message)
    parse: object = None  # file text -> the source's text (formats.parse_attachment's body), to read it again


@dataclass(frozen=True)
class Hit:
    key: str
    number: int  # the part
    score: float  # bm25: lower is better
    marked: str  # the part's text with each matching word between MARK_OPEN and MARK_CLOSE


MARK_OPEN, MARK_CLOSE = "\x01", "\x02"  # never in a source's text: control characters are replaced


def index_path(root: Path) -> Path:
    return root / BOOKKEEPING / INDEX_FILE


class Index:
    """The index of one research, opened on first use. `notes` are sentences for the reply
    (the index had to be made again, or is kept in memory for this message)."""

    def __init__(self, root: Path, guard: Guard | None = None, *, durable: bool = True) -> None:
        self.root = Path(os.path.realpath(root))
        self.guard = guard or Guard(self.root)
        self.durable = durable
        self.path = index_path(self.root)
        self.notes: list[str] = []
        self._db: sqlite3.Connection | None = None

    # -- opening ------------------------------------------------------------------------------

    def connection(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        why = self._unusable()
        if why is not None:
            self.notes.append(f"The search index cannot be kept on disk ({why}), so this message searched an "
                              "index made in memory; remove that entry from the research's bookkeeping folder "
                              "to keep the index between messages.")
            return _in_memory()
        try:
            db = self._connect()
            if schema_of(db) != SCHEMA:
                _create(db)
            return db
        except OpenedOutside:
            return self._outside()
        except sqlite3.DatabaseError as error:
            return self._remade(f"it could not be read: {error}")

    def _connect(self) -> sqlite3.Connection:
        db = open_inside(self.path, self.guard, busy_seconds=BUSY_SECONDS, autocommit=False)
        durable = self.durable and os.environ.get(NO_FSYNC_FOR_TESTS) != "1"  # as store.fsync: tests turn it off
        db.execute(f"PRAGMA synchronous = {'FULL' if durable else 'OFF'}")
        return db

    def _outside(self) -> sqlite3.Connection:
        self.notes.append("The search index was opened outside the research (a link was put in its place "
                          "meanwhile), so this message searched an index made in memory.")
        return _in_memory()

    def _remade(self, why: str) -> sqlite3.Connection:
        """A new, empty index in place of one that is broken (derived data: nothing is lost)."""
        log.warning("the search index of %s is made again: %s", self.root, why)
        self.notes.append(f"The search index was made again ({why}).")
        remove(self.path)
        try:
            db = self._connect()
            _create(db)
            return db
        except OpenedOutside:
            return self._outside()
        except (sqlite3.Error, OSError) as error:
            self.notes.append(f"It could not be written ({error}), so this message searched an index made in memory.")
            return _in_memory()

    def _unusable(self) -> str | None:
        """Why the index's place cannot hold it (None: it can): see `database.check_place`."""
        why, removed = check_place(self.path, self.guard)
        self.notes += [f"{name} was a link; it was removed and the index made again." for name in removed]
        return why

    def take_notes(self) -> list[str]:
        """The sentences for the reply gathered since the last call (the index made again, or kept
        in memory for this message), handed over once."""
        notes, self.notes = self.notes, []
        return notes

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    # -- keeping it in step -------------------------------------------------------------------------

    def sync(self, sources: Sequence[Source], *, prune: bool = True) -> dict[str, int]:
        """Bring `sources` into the index where they are not (see the module's docstring); the
        id of each by key. With `prune`, rows of files that are gone are dropped too."""
        try:
            return self._sync(sources, prune)
        except sqlite3.DatabaseError as error:
            if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
                raise
            self.close()
            self._db = self._remade(f"it could not be read: {error}")
            return self._sync(sources, prune)

    def _sync(self, sources: Sequence[Source], prune: bool) -> dict[str, int]:
        db = self.connection()
        rows = {path: (ident, sig, dig, shape) for ident, path, sig, dig, shape in
                db.execute("SELECT id, path, signature, digest, shape FROM sources")}
        ids: dict[str, int] = {}
        with db:
            for source in sources:
                shape = _shape(source)
                row = rows.get(source.key)
                signature = _signature(source.file) if source.file is not None else None
                if row is not None and row[3] == shape and signature is not None and row[1] == signature:
                    ids[source.key] = row[0]
                    continue
                text, signature = self._current(source, signature)
                dig = digest(text)
                if row is not None and row[3] == shape and row[2] == dig:
                    db.execute("UPDATE sources SET signature = ? WHERE id = ?", (signature, row[0]))
                    ids[source.key] = row[0]
                    continue
                ids[source.key] = self._put(db, source, text, signature, dig, shape, row[0] if row else None)
            if prune:
                for path, (ident, *_rest) in rows.items():
                    if path not in ids and not _exists(self.root / path):
                        _delete(db, ident)
                        db.execute("DELETE FROM sources WHERE id = ?", (ident,))
        return ids

    def _current(self, source: Source, signature: str | None) -> tuple[str, str | None]:
        """The source's text as its file holds it now, and the signature it had while read
        (None if it changed meanwhile, or too recently to be trusted)."""
        if source.file is None or source.parse is None:
            return source.text, None
        data = self.guard.read(source.file)
        if data is None:
            return source.text, None
        text = source.parse(decode(data))  # type: ignore[operator]
        after = _signature(source.file)
        return text, signature if signature is not None and after == signature else None

    def _put(self, db: sqlite3.Connection, source: Source, text: str, signature: str | None, dig: str,
             shape: str, ident: int | None) -> int:
        from .parts import layout as divide

        size, reading = _shape_of(shape)
        found = source.layout if text == source.text else divide(text, size, reading)
        if ident is not None:
            _delete(db, ident)
            db.execute("UPDATE sources SET signature = ?, digest = ?, shape = ?, parts = ? WHERE id = ?",
                       (signature, dig, shape, found.count, ident))
        else:
            ident = db.execute("INSERT INTO sources(path, signature, digest, shape, parts) VALUES (?, ?, ?, ?, ?)",
                               (source.key, signature, dig, shape, found.count)).lastrowid
        rows = (((ident << PART_BITS) | part.number, found.heading_text(part), text[part.start:part.end])
                for part in found.parts[:MAX_PARTS])
        db.executemany("INSERT INTO parts(rowid, heading, body) VALUES (?, ?, ?)", rows)
        return int(ident)

    # -- searching ----------------------------------------------------------------------------------

    def lexical(self, words: Sequence[str], ids: dict[str, int], limit: int,
                weights: tuple[float, float] = (4.0, 1.0)) -> list[Hit]:
        """The best `limit` parts of the sources `ids` (key -> id, from `sync`) for any of
        `words`, by BM25 (headings weighted `weights[0]`, text `weights[1]`), best first. Each
        word is a quoted FTS5 string: no query syntax can come from the words."""
        if not words or not ids:
            return []
        keys = {ident: key for key, ident in ids.items()}
        query = " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
        wanted = ",".join(str(int(i)) for i in keys)
        heading, body = float(weights[0]), float(weights[1])
        db = self.connection()
        best = db.execute(
            f"SELECT rowid, bm25(parts, {heading!r}, {body!r}) AS score FROM parts "
            f"WHERE parts MATCH ? AND (rowid >> {PART_BITS}) IN ({wanted}) ORDER BY score LIMIT ?",
            (query, int(limit))).fetchall()
        if not best:
            return []
        # Marked in a second query, for the best only: SQLite computes every column of every match
        # before it sorts (three times slower on a query of common words).
        marked = dict(db.execute(
            f"SELECT rowid, highlight(parts, 1, char(1), char(2)) FROM parts WHERE parts MATCH ? "
            f"AND rowid IN ({','.join(str(int(rowid)) for rowid, _ in best)})", (query,)).fetchall())
        return [Hit(keys[rowid >> PART_BITS], rowid & MAX_PARTS, score, marked.get(rowid, ""))
                for rowid, score in best]


    def frequencies(self, words: Sequence[str], ids: dict[str, int]) -> tuple[int, dict[str, int]]:
        """How many parts the sources `ids` have, and in how many of them each of `words`
        occurs (as FTS5 matches it: stemmed): what a word's weight in a query comes from."""
        if not ids:
            return 0, {}
        db = self.connection()
        wanted = ",".join(str(int(i)) for i in ids.values())
        total = db.execute(f"SELECT coalesce(sum(parts), 0) FROM sources WHERE id IN ({wanted})").fetchone()[0]
        found = {}
        for word in words:
            found[word] = db.execute(
                f"SELECT count(*) FROM parts WHERE parts MATCH ? AND (rowid >> {PART_BITS}) IN ({wanted})",
                ('"' + word.replace('"', '""') + '"',)).fetchone()[0]
        return int(total), found


def _in_memory() -> sqlite3.Connection:
    """An index for one message, when the research's cannot be used."""
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    _create(db)
    return db


def _create(db: sqlite3.Connection) -> None:
    """The tables, from nothing (what another schema had is dropped)."""
    with db:
        for table in ("parts", "sources", "meta"):
            db.execute(f"DROP TABLE IF EXISTS {table}")
        db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
        db.execute("CREATE TABLE sources(id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, signature TEXT, "
                   "digest TEXT NOT NULL, shape TEXT NOT NULL, parts INTEGER NOT NULL)")
        db.execute(f"CREATE VIRTUAL TABLE parts USING fts5(heading, body, tokenize = '{TOKENIZER}')")
        db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA,))


def _delete(db: sqlite3.Connection, ident: int) -> None:
    low = ident << PART_BITS
    db.execute("DELETE FROM parts WHERE rowid BETWEEN ? AND ?", (low, low | MAX_PARTS))


def _shape(source: Source) -> str:
    """How a source's text was divided: its parts depend on the research's part_chars and on
    its reading (the cutting recorded with it, its form), and what a part's headings are on the
    version of the code that reads them (a row indexed by another is indexed again)."""
    return f"{source.layout.size}:{source.layout.reading.key}:{code_version()}"


def _shape_of(shape: str) -> tuple[int, Reading]:
    size, key = shape.split(":")[:2]
    return int(size), Reading.of_key(key) or Reading()


def _signature(file: Path) -> str | None:
    """The file's (inode, size, mtime) now; None if it is missing or changed too recently to trust."""
    try:
        info = os.stat(file)
    except OSError:
        return None
    if is_racy(info):
        return None
    return f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"


def _exists(path: Path) -> bool:
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def source_key(root: Path, file: Path) -> str:
    """A source's key: its file's path relative to the research folder (`root`, a real path;
    the tree's paths are made from it), with `/` between names."""
    return os.path.relpath(file, root).replace(os.sep, "/")
