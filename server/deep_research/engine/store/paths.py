"""Where each file of a research lives: the fixed layout's names, a researcher's bookkeeping,
the journal's records, and a text's digest (which names a delegated researcher's folder)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator

DEFINITION = "Problem Definition.md"
CRITERIA = "Criteria of Definition of Done.md"
BREAKDOWN = "Breakdown Structure.md"
REPORT = "Report 3 Pager.md"
ATTACHMENTS = "Attachments"
SUBPROBLEMS = "Subproblems"
BOOKKEEPING = ".deep-research"
STATE = "state.json"
JOURNAL = "journal.jsonl"
PROMPT = "prompt.md"
INSTRUCTION = "instruction.md"
CONTEXT = "context"
PENDING_ATTACHMENTS = "pending-attachments"
SESSIONS = "sessions"
RESEARCHERS = "researchers"  # a delegated researcher's own bookkeeping (its prompt), one folder each
CONFIG_FILE = "deep-research.toml"
MESSAGE_FILE = "message.dr"  # the message document `new` makes
MESSAGE_SUFFIX = ".dr"
PENDING = "pending.json"
LOCK = "lock"  # the inter-process lock (transaction.locked)
TMP_MARK = ".tmp-dr-"



OWN_ENTRIES = frozenset({DEFINITION, CRITERIA, BREAKDOWN, REPORT, ATTACHMENTS, SUBPROBLEMS, BOOKKEEPING, CONFIG_FILE})


def is_own_entry(name: str) -> bool:
    """Whether `name`, in a research's folder, is the research's own rather than a source it may
    attach: the root problem's files and folders, the bookkeeping, the settings, a message
    document (what completion and the autopilot's grammar never offer to `attach_file`)."""
    return name in OWN_ENTRIES or name.lower().endswith(MESSAGE_SUFFIX)


def is_message_document(path: Path) -> bool:
    """Only `.dr` documents hold messages: nothing else is ever executed or emptied."""
    return path.suffix.lower() == MESSAGE_SUFFIX


def bookkeeping(root: Path) -> Path:
    return root / BOOKKEEPING


def moment(root: Path) -> tuple:
    """What changes whenever a message runs or is undone: the state's and the journal's stats.
    A reader that takes no lock (the dossier, the compiled report) compares it before and after."""
    seen = []
    for name in (STATE, JOURNAL):
        try:
            st = os.stat(bookkeeping(root) / name)
        except OSError:
            seen.append(None)
        else:
            seen.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(seen)


def session_file(root: Path, session: int) -> Path:
    return bookkeeping(root) / SESSIONS / f"{session:04d}.jsonl"


def researcher_folder(root: Path, problem: tuple[str, ...]) -> Path:
    """The bookkeeping of the researcher delegated the problem at `problem` (folder names below
    the root): named by a digest, since the path may be deeper than a file name may be long."""
    return bookkeeping(root) / RESEARCHERS / content_digest("/".join(problem))[:16]


def journal_records(lines: Iterable[bytes]) -> Iterator[dict]:
    """The journal's records among `lines`; a blank, torn or hand-broken line is passed over
    (the journal is a log for people and tools, never needed to read the tree back)."""
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def content_digest(text: str) -> str:
    """Identifies a text, ignoring trailing whitespace and line-break style."""
    import hashlib  # imported here: loading OpenSSL costs ~30 ms of server start-up

    return hashlib.sha256(text.replace("\r\n", "\n").rstrip().encode("utf-8")).hexdigest()
