"""The research folder on disk: where each file lives, reading it, writing it safely.

- `paths.py` — where each file lives: the fixed file and folder names, a researcher's
  bookkeeping, the journal's records, a text's digest.
- `guard.py` — `Guard`, the one way a research is read: nothing outside it, nothing that
  blocks (`open_folder` for walks); the engine's own files read the same way, unconfined.
- `cache.py` — `FileCache` (bounded LRU of parsed files, confined to its research) and what a
  computation read through it (`Reads`, `recording`, `watched_stat` for a file outside the tree).
- `transaction.py` — durable folders and atomic writes, `Transaction` with its pending file,
  `recover()`, the inter-process lock (`locked`).
- `watch.py` — the process's inotify watch, which vouches for a cache's reads (the language
  server starts it); it imports nothing of the engine.

Each part imports only those listed before it. The engine and its callers use the names
below, the store's API; the parts' own helpers stay in their parts.
"""

from .cache import FileCache, Reads, Signature, is_racy, recording, watched_stat
from .guard import MAX_READ_BYTES, Entry, Guard, OpenFolder, decode, read_bytes, read_text
from .paths import (
    ATTACHMENTS, BOOKKEEPING, BREAKDOWN, CONFIG_FILE, CONTEXT, CRITERIA, DEFINITION, INSTRUCTION, JOURNAL,
    MESSAGE_FILE, MESSAGE_SUFFIX, PENDING, PENDING_ATTACHMENTS, PROMPT, REPORT, RESEARCHERS, SESSIONS, STATE,
    SUBPROBLEMS, TMP_MARK, bookkeeping, content_digest, is_message_document, is_own_entry, journal_records, moment,
    researcher_folder, session_file,
)
from .transaction import (
    NO_FSYNC_FOR_TESTS, BlockedPath, StoreError, Transaction, UnsafePath, atomic_write, ensure_inside, fsync,
    fsync_folder, locked, make_folders, pending_path, recover,
)

__all__ = [
    "ATTACHMENTS", "BOOKKEEPING", "BREAKDOWN", "CONFIG_FILE", "CONTEXT", "CRITERIA", "DEFINITION", "INSTRUCTION",
    "JOURNAL", "MAX_READ_BYTES", "MESSAGE_FILE", "NO_FSYNC_FOR_TESTS", "MESSAGE_SUFFIX", "PENDING", "PENDING_ATTACHMENTS", "PROMPT",
    "REPORT", "RESEARCHERS", "SESSIONS", "STATE", "SUBPROBLEMS", "TMP_MARK",
    "BlockedPath", "Entry", "FileCache", "Guard", "OpenFolder", "Reads", "Signature", "StoreError", "Transaction",
    "UnsafePath", "atomic_write", "bookkeeping", "content_digest", "decode", "ensure_inside", "fsync", "fsync_folder",
    "is_message_document", "is_own_entry", "is_racy", "journal_records", "locked", "moment", "make_folders", "pending_path",
    "read_bytes", "read_text",
    "recording", "recover", "researcher_folder", "session_file", "watched_stat",
]
