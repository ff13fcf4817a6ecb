"""Undo: take back the last executed message, all or nothing.

Remembering (inside every message's own transaction, see `Research._commit`): next to the
message's changes the transaction writes `.deep-research/undo/NNNNNN.json` (NNNNNN is the
message number) holding, for each file the message writes, its exact bytes before (or
that it did not exist) and a digest of what the message writes; for each log it appends
to, its size before; the folders it creates; the state before and after; the message's
text and the document it was consumed from. Only the newest `KEEP` records are kept.

Undoing (`revert`): under the research's lock, the newest record is checked against the
disk, so that nothing made after the message is lost: every file of the problem tree it
wrote must still hold exactly what it wrote, and the folders it created nothing else (a
hand edit is refused, naming the file). Then one `store.Transaction` restores the files
byte for byte, removes what the message created, cuts the session transcripts back (the
prompt shows the session as it was), restores the state (focus, session, phase; the
message counter stays, so message numbers in the journal stay unique), restores the
prompt, puts the message back into its document if that is empty, deletes the record and
appends a `"record": "undo"` entry to the journal, which stays append-only: the undone
message's records stay, and the undo entry carries the transcript text it took back.

`deep-research continue` (new instructions, context or attachments, a reopened research)
is a boundary: it forgets the records, since the prompt and tree before it can no longer
be restored without losing what the user gave.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .core.state import MAIN, State, now
from .store import (
    BOOKKEEPING, JOURNAL, STATE, TMP_MARK, Guard, Transaction, bookkeeping, fsync_folder, is_message_document,
    locked, make_folders, read_bytes, read_text, recover,
)

KEEP = 20  # messages that can be undone, newest first
_LINK_FROM = 16 * 1024  # bytes: a larger file's content before a message is kept by a hard link
FOLDER = "undo"
FORMAT = 1
_RECORD_DIGITS = 6


class UndoRefused(Exception):
    """Undo cannot run without losing something; nothing was changed. The text says why."""


class NothingToUndo(UndoRefused):
    """No executed message is left to undo (or the history was cleared)."""


@dataclass
class Undone:
    """What an undo did."""

    message: int  # the number of the message taken back
    text: str  # its text
    files: list[str] = field(default_factory=list)  # problem-tree files restored or removed (relative)
    document: Path | None = None  # where the text was put back, if it was
    state: State | None = None  # the state now (as before the message)
    left: int = 0  # messages that can still be undone
    researcher: str = MAIN  # whose message it was


def records_folder(root: Path) -> Path:
    return bookkeeping(root) / FOLDER


def record_path(root: Path, message: int) -> Path:
    return records_folder(root) / f"{message:0{_RECORD_DIGITS}d}.json"


def history(root: Path) -> list[int]:
    """Numbers of the messages that can be undone, oldest first."""
    numbers = []
    try:
        names = os.listdir(records_folder(root))
    except OSError:
        return []
    for name in names:
        stem, dot, ext = name.partition(".")
        if dot and ext == "json" and stem.isdigit():
            numbers.append(int(stem))
    return sorted(numbers)


# -- remembering, inside the message's transaction ----------------------------------------


def remember(tx: Transaction, *, text: str, before: State, after: State, document: Path | None) -> None:
    """Add to `tx` the record that lets `revert` take this message back. Call it last,
    once everything the message writes is in `tx`."""
    root = Path(os.path.realpath(tx.root))
    book = bookkeeping(root)
    _sweep_spare_links(root)
    skip = {_rel(root, book / STATE), _rel(root, book / JOURNAL)}
    own = _rel(root, records_folder(root))
    files: dict[str, dict] = {}
    created: set[str] = set()
    linked = False
    for rel, new in [*tx.writes.items(), *tx.raw.items()]:
        if rel in skip or rel.startswith(own + os.sep):
            continue
        old = read_bytes(root / rel)
        new_bytes = new.encode("utf-8") if isinstance(new, str) else new
        if old is not None and (old == new_bytes or isinstance(new, str) and _same_text(old, new)):
            continue  # the transaction leaves this file alone (see store/transaction.py, `_apply`)
        kept = _keep_large(root, rel, old, after.messages, len(files), tx.durable) if old is not None else None
        linked = linked or kept is not None
        files[rel] = {**(kept or _encode(old)), "after": _digest(new_bytes)}
        if old is None:
            created.update(_new_folders(root, rel))
    for rel in tx.deletes:  # e.g. the prompt of a researcher that ended
        if rel in skip or rel.startswith(own + os.sep) or rel in files:
            continue
        old = read_bytes(root / rel)
        if old is not None:
            files[rel] = {**_encode(old), "after": None}
    if linked and tx.durable:
        fsync_folder(records_folder(root))  # the links' names, before the record relies on them
    logs = {}
    for rel, _ in tx.appends:
        if rel in skip or rel in logs:
            continue
        path = root / rel
        logs[rel] = {"size": path.stat().st_size if path.is_file() else 0, "existed": path.is_file()}
    record = {
        "format": FORMAT,
        "message": after.messages,
        "researcher": before.researcher,
        "at": now(),
        "text": text,
        "document": _rel(root, document) if document is not None else None,
        "before": json.loads(before.to_json()),
        "after": json.loads(after.to_json()),
        "files": files,
        "folders": sorted(created),
        "logs": logs,
    }
    tx.write(record_path(root, after.messages), json.dumps(record, ensure_ascii=False, indent=1) + "\n")
    kept = [n for n in history(root) if n != after.messages]
    _forget(tx, set(kept[: max(0, len(kept) - (KEEP - 1))]))


def forget_all(tx: Transaction) -> None:
    """Clear the undo history in `tx` (a change made outside messages is a boundary)."""
    _forget(tx, None)


def _forget(tx: Transaction, numbers: set[int] | None) -> None:
    """Delete the records of `numbers` (None: all) with the files they keep."""
    folder = records_folder(tx.root)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        stem = name.split(".", 1)[0]
        if stem.isdigit() and (numbers is None or int(stem) in numbers):
            tx.delete(folder / name)


def _sweep_spare_links(root: Path) -> None:
    """Remove the links `_keep_large` made for a message that never committed (a crash
    before its commit point): those of no record. Nothing else holds them."""
    folder = records_folder(root)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    records = {name.partition(".")[0] for name in names if name.endswith(".json")}
    for name in names:
        if name.endswith(".before") and name.partition(".")[0] not in records:
            try:
                os.unlink(folder / name)
            except OSError:
                continue


def _keep_large(root: Path, rel: str, old: bytes, message: int, index: int, durable: bool) -> dict | None:
    """Keep a large file's bytes before the message by a hard link to it, rather than a copy
    in the record: the message replaces the file (a new inode), so the link keeps the old
    content for free. The prompt is the usual case (it holds the whole session). Made before
    the commit point: if the message never commits, the link is a stray the next record of
    the same number replaces. None where links are not possible: the bytes go in the record."""
    if len(old) < _LINK_FROM:
        return None
    kept = records_folder(root) / f"{message:0{_RECORD_DIGITS}d}.{index}.before"
    try:
        make_folders(kept.parent, durable=durable)
        if kept.exists() or kept.is_symlink():
            kept.unlink()
        os.link(root / rel, kept)
    except (OSError, NotImplementedError):
        return None
    if read_bytes(kept) != old:  # changed between the read and the link: do not trust it
        return None
    return {"before_file": _rel(root, kept)}


# -- undoing ----------------------------------------------------------------------------------


RECORDED = object()  # revert(document=RECORDED): the document the message was consumed from


def revert(research, *, document: object = RECORDED) -> Undone:  # research: research.Research
    """Take back the newest message that can be undone, or raise UndoRefused.

    `document` is the `.dr` document to put the message back into if it is empty (or
    missing): by default the one it was consumed from; None puts it nowhere (an editor
    puts it into its buffer itself); or a callable given the researcher who wrote the
    message and that researcher's own message document, answering one of those (an editor
    that has some documents open and others not: several researchers write at once).
    """
    root: Path = research.root
    with locked(root):
        recover(root, research.cache)
        numbers = history(root)
        if not numbers:
            raise NothingToUndo(
                "Nothing to undo: no executed message is remembered (the history keeps the last "
                f"{KEEP} messages, and starts again after `deep-research continue`).")
        number = numbers[-1]
        guard = research.guard  # the record is a file like any other: what it names is read only inside
        path = record_path(root, number)
        record = _load(path, guard)
        if record is None:
            raise UndoRefused(f"The undo record of message {number} cannot be read ({path}); nothing was changed.")
        book = bookkeeping(root)
        current = State.from_json(guard.read_text(book / STATE) or "")
        expected = _state(record.get("after"))
        if expected is None or _position(current) != _position(expected):
            raise UndoRefused(
                f"Message {number} is no longer the last thing that happened to this research (its state "
                "changed since), so it cannot be undone; nothing was changed.")
        before = _state(record.get("before"))
        if before is None:
            raise UndoRefused(f"The undo record of message {number} is damaged ({path}); nothing was changed.")
        files: dict[str, dict] = record.get("files") or {}
        folders: list[str] = [f for f in record.get("folders") or [] if isinstance(f, str)]
        _check_untouched(root, number, files, folders, guard)

        tx = Transaction(root, durable=research.durable)
        restored_tree = []
        for rel, entry in files.items():
            target = root / rel
            old = _decode(entry, root, guard)
            if old is None:
                tx.delete(target)
            else:
                tx.write_bytes(target, old)
            if not _in_bookkeeping(rel):
                restored_tree.append(rel)
        for rel in folders:
            tx.remove_folder(root / rel)
        state = before.evolve(messages=current.messages)
        tx.write(book / STATE, state.to_json())
        removed = {}
        for rel, log in (record.get("logs") or {}).items():
            target = root / rel
            size = log.get("size", 0) if isinstance(log, dict) and isinstance(log.get("size"), int) else 0
            removed[rel] = _tail(target, size, guard).decode("utf-8", errors="replace")
            if isinstance(log, dict) and log.get("existed") is False:
                tx.delete(target)
            else:
                tx.truncate(target, size)
        text = record.get("text") if isinstance(record.get("text"), str) else ""
        writer = record.get("researcher") if isinstance(record.get("researcher"), str) else MAIN
        if callable(document):
            document = document(writer, _own_document(research, writer, before))
        put_back = _put_back_target(root, record, document)
        if put_back is not None and text.strip():
            tx.write(put_back, text if text.endswith("\n") else text + "\n")
        else:
            put_back = None
        _forget(tx, {number})
        tx.append(book / JOURNAL, json.dumps({
            "record": "undo",
            "message": number,
            "researcher": writer,
            "session": (state.view(writer) or state).session,
            "problem": list((state.view(writer) or state).focus),
            "undone_session": (expected.view(writer) or state.view(writer) or expected).session,
            "undone_problem": list((expected.view(writer) or state.view(writer) or expected).focus),
            "files": sorted(restored_tree),
            "document": _rel(root, put_back) if put_back is not None else record.get("document"),
            "put_back": put_back is not None,
            "text": text,
            "removed": removed,
            "started": now(),
            "ended": now(),
        }, ensure_ascii=False) + "\n")
        tx.commit(research.cache)
    # The prompts before the message came back. Each is what a fresh render gives, unless the
    # user edited by hand, since, a file the message did not write: then render it again.
    for researcher in research.researchers():
        prompt = research.prompt_file(researcher.name)
        if (research.guard.read_text(prompt) or "") != research.prompt(researcher=researcher.name):
            research.write_prompt(researcher.name)
    return Undone(number, text, sorted(restored_tree), put_back, research.state(), len(numbers) - 1, writer)


def _check_untouched(root: Path, number: int, files: dict[str, dict], folders: list[str], guard: Guard) -> None:
    """Refuse if a file of the problem tree changed since message `number` wrote it."""
    changed = []
    for rel, entry in files.items():
        if _in_bookkeeping(rel) or not isinstance(entry, dict):
            continue
        data = guard.read(root / rel)
        if entry.get("after") is None and "after" in entry:  # the message deleted it
            if data is not None:
                changed.append((rel, "made again"))
        elif data is None or _digest(data) != entry.get("after"):
            changed.append((rel, "deleted" if data is None else "changed"))
    to_delete = {rel for rel, entry in files.items() if isinstance(entry, dict) and _created(entry)}
    created = set(folders)
    for rel in folders:
        try:
            names = os.listdir(root / rel)
        except OSError:
            continue
        for name in names:
            inner = os.path.join(rel, name)
            if inner not in to_delete and inner not in created and not name.startswith(TMP_MARK):
                changed.append((inner, "added"))
    if changed:
        rel, how = changed[0]
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise UndoRefused(
            f"{root / rel} was {how} by hand after message {number}{more}; undo would lose that edit, so "
            "nothing was changed. Put it back as the message left it, or keep the edit and do not undo.")


def _own_document(research, writer: str, before: State) -> Path | None:
    """The message document of `writer` as it was before the message (None if the record names
    a researcher that state does not know: a damaged record)."""
    try:
        return research.document(writer, before)
    except LookupError:  # research.NoSuchResearcher
        return None


def _put_back_target(root: Path, record: dict, document: object) -> Path | None:
    if document is RECORDED:
        rel = record.get("document")
        if not isinstance(rel, str) or not rel:
            return None
        document = root / rel
    if not isinstance(document, Path) or not is_message_document(document):
        return None
    real = Path(os.path.realpath(document))
    if os.path.commonpath([os.path.realpath(root), str(real)]) != os.path.realpath(root):
        return None
    if real.exists() and not real.is_file():
        return None
    if real.is_file() and (read_text(real) or "").strip():
        return None  # the user is writing something else there: keep it
    return real


# -- helpers ------------------------------------------------------------------------------------


def _position(state: State) -> tuple:
    """What must be as the message left it for its undo to be the right one: every
    researcher's place (a message of any researcher changes it)."""
    return state.position()


def _state(raw: object) -> State | None:
    if not isinstance(raw, dict):
        return None
    return State.from_json(json.dumps(raw))


def _load(path: Path, guard: Guard) -> dict | None:
    text = guard.read_text(path)
    try:
        record = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _encode(data: bytes | None) -> dict:
    if data is None:
        return {"before": None}
    try:
        return {"before": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"before_base64": base64.b64encode(data).decode("ascii")}


def _decode(entry: dict, root: Path, guard: Guard) -> bytes | None:
    """The file's bytes before the message; None if it did not exist."""
    if isinstance(entry.get("before_file"), str):
        data = guard.read(root / entry["before_file"], limit=None)
        if data is None:
            raise UndoRefused(f"What undo needs of {root / entry['before_file']} is missing; nothing was changed.")
        return data
    if isinstance(entry.get("before_base64"), str):
        return base64.b64decode(entry["before_base64"])
    before = entry.get("before")
    return before.encode("utf-8") if isinstance(before, str) else None


def _created(entry: dict) -> bool:
    return not any(isinstance(entry.get(k), str) for k in ("before", "before_base64", "before_file"))


def _same_text(old: bytes, new: str) -> bool:
    return old.decode("utf-8", errors="replace").replace("\r\n", "\n") == new.replace("\r\n", "\n")


def _digest(data: bytes) -> str:
    import hashlib  # imported here: loading OpenSSL costs ~30 ms of server start-up

    return hashlib.sha256(data).hexdigest()


def _tail(path: Path, offset: int, guard: Guard) -> bytes:
    handle = guard.open_binary(path)
    if handle is None:
        return b""
    with handle:
        try:
            handle.seek(offset)
            return handle.read()
        except OSError:
            return b""


def _new_folders(root: Path, rel: str) -> list[str]:
    """The folders above `rel` that do not exist yet (the message creates them)."""
    out = []
    parent = Path(rel).parent
    while str(parent) not in ("", ".") and not (root / parent).is_dir():
        out.append(str(parent))
        parent = parent.parent
    return out


def _rel(root: Path, path: Path) -> str:
    return os.path.relpath(os.path.realpath(path), os.path.realpath(root))


def _in_bookkeeping(rel: str) -> bool:
    return rel.split(os.sep, 1)[0] == BOOKKEEPING

