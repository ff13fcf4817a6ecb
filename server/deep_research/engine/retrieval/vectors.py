"""Embeddings of a research's sources, as `///find` uses them: what is embedded, where the
vectors are kept, and which windows are nearest a query (their fusion with the lexical ranking
is ranking.py's). No network: the vectors come from `sources/embeddings.py`, which asks an
endpoint for them outside any message.

- **Windows.** A part (engine/retrieval/parts.py, up to 4,000 characters) is embedded as windows of at
  most `WINDOW_CHARS` characters, cut at a paragraph, line, sentence or space near the end:
  small models read 512 tokens at most, and a passage the size of a paragraph or two is what
  similarity ranks best. A part's similarity to a query is its best window's; that window is
  also where its passage is taken when the words do not match.
- **The store.** `.deep-research/embeddings.sqlite3` (`VectorStore`): derived data like the
  full-text index, but dear to make (a small model on two cores embeds ~3 windows a second),
  so kept apart from it, keyed by what was embedded: the digest of the model's key and the
  window's text. A part whose text changed has new windows, so new keys, and is embedded again;
  one that did not keeps its vectors through an undo, a rebuilt index or a copied research.
  Vectors are float32, normalised, so a dot product is the cosine.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import sqlite3
import sys
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from operator import mul
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from ..store import BOOKKEEPING, Guard
from .database import OpenedOutside, check_place, open_inside, remove, schema_of

if TYPE_CHECKING:  # pragma: no cover
    from .index import Source

log = logging.getLogger("deep_research.engine")

WINDOW_CHARS = 1_000
WINDOW_BOUNDS = (200, 4_000)  # what `[embeddings] window_chars` may be (engine/settings/table.py takes them from here)
VECTORS_FILE = "embeddings.sqlite3"
SCHEMA = "1"
BUSY_SECONDS = 10.0
KEPT_FLOATS = 16_000_000  # decoded vectors kept in memory between finds: 64 MB (~40,000 windows of a small model)
_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", " ")


@dataclass(frozen=True)
class Window:
    start: int  # offsets in the part's text
    end: int


def windows(text: str, size: int = WINDOW_CHARS) -> list[Window]:
    """`text` cut into windows of at most `size` characters, each ending at the last paragraph
    break, line break, sentence end or space of its final third (a hard cut where there is
    none); windows of whitespace only are left out."""
    out: list[Window] = []
    start, length = 0, len(text)
    while start < length:
        while start < length and text[start].isspace():
            start += 1
        if start >= length:
            break
        end = min(length, start + size)
        if end < length:
            floor = start + (2 * size) // 3
            for mark in _BREAKS:
                cut = text.rfind(mark, floor, end)
                if cut > start:
                    end = cut + len(mark)
                    break
        out.append(Window(start, end))
        start = end
    return out


def embedded_text(window_text: str, section: str = "") -> str:
    """What is sent to be embedded for a window: its section's heading first, when it has one
    (a window in the middle of a section otherwise loses what it is about)."""
    body = window_text.strip()
    return f"{section.strip()}\n{body}" if section.strip() else body


def model_key(model: str, passage_prefix: str = "", input_type: bool = False, window_chars: int = WINDOW_CHARS) -> str:
    """What a passage's vector depends on besides its text: the model, how its passages are
    prefixed, and how long a window is (`[embeddings] window_chars`; named only when it is not
    the default, so that the keys of vectors made with the default never change)."""
    key = f"{model}\0{passage_prefix}\0{int(input_type)}"
    return key if window_chars == WINDOW_CHARS else f"{key}\0{int(window_chars)}"


def window_chars_of(model_key: str) -> int:
    """The window size a model key (`model_key`) was made with, within WINDOW_BOUNDS whatever the
    key holds (a model's name or prefix from a hostile deep-research.toml may hold NULs and digits:
    a window of no size would never end)."""
    last = model_key.rsplit("\0", 1)[-1]
    if model_key.count("\0") < 3 or not last.isascii() or not last.isdigit():
        return WINDOW_CHARS
    return min(max(int(last[:6]), WINDOW_BOUNDS[0]), WINDOW_BOUNDS[1])


def vector_key(model_key: str, text: str) -> bytes:
    """The store's key of a text embedded by a model (`model_key` names the model and how its
    inputs were prefixed: the same text embedded otherwise is another vector)."""
    return hashlib.sha256(model_key.encode("utf-8", "surrogatepass") + b"\0" +
                          text.encode("utf-8", "surrogatepass")).digest()[:16]


# -- a source's windows -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slice:
    """One window of one part of a source, as it is embedded."""

    key: bytes  # the store's key (`vector_key` the model and the embedded text)
    source: str  # the source's key (engine/retrieval/index.py)
    number: int  # its part
    start: int  # the window's offsets in the part's text
    end: int


_SLICES: OrderedDict[tuple, tuple[Slice, ...]] = OrderedDict()
_SLICES_KEPT = 256  # sources whose windows are remembered (offsets and keys: small)
_SLICES_LOCK = threading.Lock()


def slices(source: "Source", model_key: str) -> tuple[Slice, ...]:
    """Every window of every part of `source` (engine/retrieval/index.py's Source), with its key for
    `model_key`; remembered per source text, so a find does not hash a large source again."""
    text, found = source.text, source.layout
    memo = (source.key, hash(text), len(text), found.size, found.pdf, model_key)
    with _SLICES_LOCK:
        kept = _SLICES.get(memo)
        if kept is not None:
            _SLICES.move_to_end(memo)
            return kept
    out = []
    size = window_chars_of(model_key)
    for part in found.parts:
        body = text[part.start:part.end]
        for window in windows(body, size):
            embedded = embedded_text(body[window.start:window.end], part.section)
            out.append(Slice(vector_key(model_key, embedded), source.key, part.number, window.start, window.end))
    made = tuple(out)
    with _SLICES_LOCK:
        _SLICES[memo] = made
        while len(_SLICES) > _SLICES_KEPT:
            _SLICES.popitem(last=False)
    return made


def slice_text(source: "Source", piece: Slice) -> str:
    """What was embedded for `piece` (a slice of `source`)."""
    part = source.layout.part(piece.number)
    body = source.text[part.start:part.end]
    return embedded_text(body[piece.start:piece.end], part.section)


def wanted(sources: Iterable["Source"], model_key: str) -> dict[bytes, str]:
    """What `sources` need embedded: each window's key and text (the backfill's work list)."""
    out: dict[bytes, str] = {}
    for source in sources:
        for piece in slices(source, model_key):
            if piece.key not in out:
                out[piece.key] = slice_text(source, piece)
    return out


@dataclass(frozen=True)
class Near:
    """A window and its similarity to the query."""

    similarity: float
    slice: Slice


def nearest(query: Sequence[float], sources: Sequence["Source"], model_key: str,
            store: "VectorStore", top: int | None = None) -> tuple[list[Near], int, int]:
    """The windows of `sources` by similarity to `query`, best first (the best `top` of them,
    or all); how many windows have a vector, and how many there are. With numpy, each source's
    vectors are one matrix kept between finds (`_matrix`); without it, window by window."""
    np = _numpy()
    if np is None:
        every = [piece for source in sources for piece in slices(source, model_key)]
        found = store.get(piece.key for piece in every)
        target = query if isinstance(query, array) else array("f", query)
        near = [Near(similarity(target, found[piece.key]), piece) for piece in every if piece.key in found]
        near.sort(key=lambda item: -item.similarity)
        return near[:top] if top is not None else near, sum(1 for piece in every if piece.key in found), len(every)
    target = np.asarray(query, dtype=np.float32)
    every = [_matrix(np, source, model_key, store, len(target)) for source in sources]
    total = sum(kept.total for kept in every)
    every = [kept for kept in every if kept.pieces]
    if not every:
        return [], 0, total
    # einsum's own loop, not BLAS: OpenBLAS's threads made a product of a matrix and a vector
    # five times slower on two cores that others use (docs/decisions.md, issue 46).
    scores = np.concatenate([np.einsum("ij,j->i", kept.matrix, target) for kept in every])  # type: ignore[attr-defined]
    pieces = [piece for kept in every for piece in kept.pieces]
    if top is None or top >= len(scores):
        best = np.argsort(-scores, kind="stable")
    else:
        best = np.argpartition(-scores, top)[:top]
        best = best[np.argsort(-scores[best], kind="stable")]
    return [Near(float(scores[i]), pieces[i]) for i in best.tolist()], len(pieces), total


@dataclass(frozen=True)
class _Kept:
    """A source's vectors as one matrix (numpy float32, a row a window that has one)."""

    pieces: tuple[Slice, ...]  # the windows of the rows, in order
    matrix: object
    missing: tuple[Slice, ...]  # the windows with no vector yet (looked for again at each find)
    total: int


# Each source's matrix, kept between finds in a long-lived process: reading and decoding every
# window's vector made most of a fused find's time (docs/decisions.md, issue 46). Keyed as
# _KEPT is (the store's file and generation) and by the source's text and the model key, so a
# matrix cannot go out of step: keys are digests of what was embedded, and a store only gains
# vectors (the windows still missing are looked for again). Within KEPT_FLOATS, least recently
# used first out.
_MATRICES: OrderedDict[tuple, _Kept] = OrderedDict()
_MATRICES_SIZE = [0]


def _matrix(np: object, source: "Source", model_key: str, store: "VectorStore", size: int) -> _Kept:
    every = slices(source, model_key)
    place = store.place()
    memo = (place, source.key, hash(source.text), len(source.text), source.layout.size, model_key, size)
    with _KEPT_LOCK:
        kept = _MATRICES.get(memo) if place[1] else None
        if kept is not None:
            _MATRICES.move_to_end(memo)
    if kept is not None and not kept.missing:
        return kept
    looked = kept.missing if kept is not None else every
    found = store.raw(piece.key for piece in looked)
    width = 4 * size
    new = [piece for piece in looked if len(found.get(piece.key, b"")) == width]
    if kept is not None and not new:
        return kept
    rows = np.frombuffer(b"".join(found[piece.key] for piece in new), dtype="<f4").reshape(len(new), size)  # type: ignore[attr-defined]
    if kept is not None:
        rows = np.vstack([kept.matrix, rows])  # type: ignore[attr-defined]
    have = {id(piece) for piece in new}
    made = _Kept((kept.pieces if kept is not None else ()) + tuple(new), np.ascontiguousarray(rows),  # type: ignore[attr-defined]
                 tuple(piece for piece in looked if id(piece) not in have), len(every))
    if place[1]:
        with _KEPT_LOCK:
            old = _MATRICES.pop(memo, None)
            _MATRICES_SIZE[0] += len(made.pieces) * size - (len(old.pieces) * size if old is not None else 0)
            _MATRICES[memo] = made
            while _MATRICES_SIZE[0] > KEPT_FLOATS and len(_MATRICES) > 1:
                _, dropped = _MATRICES.popitem(last=False)
                _MATRICES_SIZE[0] -= len(dropped.pieces) * dropped.matrix.shape[1]  # type: ignore[attr-defined]
    return made


@lru_cache(maxsize=1)
def _numpy() -> object | None:
    """numpy, when installed (the `semantic` extra brings it; the VS Code bundle has none)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


# -- vectors ----------------------------------------------------------------------------------------


def normalised(values: Sequence[float]) -> array | None:
    """`values` as a float32 vector of length 1, or None when they are not a usable vector
    (empty, not finite, all zero)."""
    try:
        floats = [float(v) for v in values]
    except (TypeError, ValueError):
        return None
    if not floats or not all(math.isfinite(v) for v in floats):
        return None
    norm = math.sqrt(math.fsum(v * v for v in floats))
    if norm == 0 or not math.isfinite(norm):
        return None
    return array("f", (v / norm for v in floats))


def similarity(a: array, b: array) -> float:
    """The cosine of two normalised vectors (0 when their sizes differ: another model's)."""
    if len(a) != len(b):
        return 0.0
    return sum(map(mul, a, b))


def to_bytes(vector: array) -> bytes:
    out = array("f", vector)
    if out.itemsize != 4:  # pragma: no cover - float is 4 bytes on every platform Python runs on
        raise ValueError("float32 vectors need a 4-byte float")
    if sys.byteorder != "little":  # pragma: no cover
        out.byteswap()
    return out.tobytes()


def from_bytes(data: bytes) -> array | None:
    if not data or len(data) % 4:
        return None
    out = array("f")
    out.frombytes(data)
    if sys.byteorder != "little":  # pragma: no cover
        out.byteswap()
    return out


# -- the store ---------------------------------------------------------------------------------------


def store_path(root: Path) -> Path:
    return root / BOOKKEEPING / VECTORS_FILE


class StoreUnusable(Exception):
    """The store's place cannot hold it (a sentence for the reply)."""


# Decoded vectors kept between finds in a long-lived process (the language server, `run`, MCP,
# the REPL): reading and decoding every window's vector from SQLite is most of a fused find's
# time otherwise (docs/decisions.md, issue 32). Keyed by the store's file, its generation (a
# random id written when the store is made, so a store deleted, broken or replaced and made again
# is never answered from the old one's vectors) and the vector's key (the digest of the model and
# the embedded text, so a kept vector cannot go out of step with its key). Least recently used
# first out, within KEPT_FLOATS.
_KEPT: OrderedDict[tuple[str, str, bytes], array] = OrderedDict()
_KEPT_SIZE = [0]
_KEPT_LOCK = threading.Lock()


class VectorStore:
    """The vectors of one research (`.deep-research/embeddings.sqlite3`), opened on first use.
    Safe to share between threads (one connection, serialised) and processes (SQLite's locks,
    WAL). Opened like the full-text index: never through a link, a broken file made again."""

    def __init__(self, root: Path, guard: Guard | None = None, *, path: Path | None = None) -> None:
        self.root = Path(os.path.realpath(root))
        self.guard = guard or Guard(self.root)
        self.path = path or store_path(self.root)
        self._db: sqlite3.Connection | None = None
        self._generation = ""
        self._lock = threading.Lock()

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = self._open()
            self._generation = _generation(self._db)
        return self._db

    def _open(self) -> sqlite3.Connection:
        self._check_place()
        try:
            db = self._connect()
            if schema_of(db) != SCHEMA:
                _create(db)
            return db
        except sqlite3.DatabaseError as error:
            log.warning("the embeddings store of %s is made again: %s", self.root, error)
            remove(self.path)
            try:
                db = self._connect()
                _create(db)
                return db
            except (sqlite3.Error, OSError) as again:
                raise StoreUnusable(f"the embeddings store could not be made ({again})") from None

    def _connect(self) -> sqlite3.Connection:
        try:
            db = open_inside(self.path, self.guard, busy_seconds=BUSY_SECONDS, autocommit=True)
        except OpenedOutside:
            raise StoreUnusable("the embeddings store was opened outside the research (a link was put in "
                                "its place meanwhile)") from None
        with contextlib.suppress(sqlite3.OperationalError):  # WAL: readers never wait for the writer
            db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")  # derived data: a lost last batch is embedded again
        return db

    def _check_place(self) -> None:
        """As the index's (database.check_place): a link in the store's place is removed, not
        followed; a place that cannot hold it makes the store unusable (semantic search says why)."""
        why, _removed = check_place(self.path, self.guard)
        if why is not None:
            raise StoreUnusable(why)

    def get(self, keys: Iterable[bytes]) -> dict[bytes, array]:
        """The stored vectors of `keys` (those not stored are left out)."""
        found: dict[bytes, array] = {}
        with self._lock:
            db = self._connection()
            place = (str(self.path), self._generation)
            wanted = list(dict.fromkeys(keys))
            if self._generation:  # those kept from an earlier find first
                with _KEPT_LOCK:
                    for key in wanted:
                        kept = _KEPT.get((*place, key))
                        if kept is not None:
                            _KEPT.move_to_end((*place, key))
                            found[key] = kept
                wanted = [key for key in wanted if key not in found]
            read: dict[bytes, array] = {}
            for key, data in _select(db, wanted, "key, vector"):
                vector = from_bytes(data)
                if vector is not None:
                    read[bytes(key)] = vector
        if self._generation:
            _keep(place, read)
        found.update(read)
        return found

    def place(self) -> tuple[str, str]:
        """The store's file and generation ("" when it has none: nothing of it is kept between finds)."""
        with self._lock:
            self._connection()
            return str(self.path), self._generation

    def raw(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        """The stored vectors of `keys` as they are stored (float32, little-endian), undecoded
        and not kept (those not stored are left out)."""
        with self._lock:
            return {bytes(key): bytes(data) for key, data in _select(self._connection(), keys, "key, vector")}

    def present(self, keys: Iterable[bytes]) -> set[bytes]:
        """Which of `keys` have a vector (nothing decoded)."""
        with self._lock:
            return {bytes(row[0]) for row in _select(self._connection(), keys, "key")}

    def put(self, items: Mapping[bytes, array]) -> None:
        """Store vectors (one transaction: a batch is all there or not at all)."""
        if not items:
            return
        with self._lock:
            db = self._connection()
            with _transaction(db):
                db.executemany("INSERT OR REPLACE INTO vectors(key, vector) VALUES (?, ?)",
                               [(key, to_bytes(vector)) for key, vector in items.items()])

    def count(self) -> int:
        with self._lock:
            return int(self._connection().execute("SELECT count(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._db.close()
                self._db = None


def _select(db: sqlite3.Connection, keys: Iterable[bytes], columns: str) -> Iterable[tuple]:
    """`columns` of the stored vectors of `keys`, 500 keys a query."""
    wanted = list(dict.fromkeys(keys))
    for at in range(0, len(wanted), 500):
        chunk = wanted[at:at + 500]
        yield from db.execute(f"SELECT {columns} FROM vectors WHERE key IN ({','.join('?' * len(chunk))})", chunk)


def _keep(place: tuple[str, str], vectors: Mapping[bytes, array]) -> None:
    with _KEPT_LOCK:
        for key, vector in vectors.items():
            if (*place, key) not in _KEPT:
                _KEPT[(*place, key)] = vector
                _KEPT_SIZE[0] += len(vector)
        while _KEPT_SIZE[0] > KEPT_FLOATS and _KEPT:
            _KEPT_SIZE[0] -= len(_KEPT.popitem(last=False)[1])


def _generation(db: sqlite3.Connection) -> str:
    """The store's generation: a random id, written once (a store made without one gets one when
    first opened)."""
    row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    if row is None:
        db.execute("PRAGMA busy_timeout = 0")  # a find never waits for a backfill's write for this
        try:
            with _transaction(db):
                db.execute("INSERT OR IGNORE INTO meta VALUES ('generation', ?)", (os.urandom(16).hex(),))
        except sqlite3.OperationalError:  # read-only, or busy: read as before, keeping nothing this time
            return ""
        finally:
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_SECONDS * 1000)}")
        row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return str(row[0]) if row else ""


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection):
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _create(db: sqlite3.Connection) -> None:
    with _transaction(db):
        for table in ("vectors", "meta"):
            db.execute(f"DROP TABLE IF EXISTS {table}")
        db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
        db.execute("CREATE TABLE vectors(key BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID")
        db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA,))
        db.execute("INSERT INTO meta VALUES ('generation', ?)", (os.urandom(16).hex(),))
