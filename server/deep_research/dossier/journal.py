"""The journal as a timeline for the dossier: messages with their commands and model
rounds, undos, reopenings. Read as a stream (a long journal is never held whole), and
tolerantly: unreadable lines and unknown records are skipped, missing fields are blank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ..engine.store import Guard, journal_records


@dataclass
class Message:
    number: int
    problem: tuple[str, ...] | None
    session: int | None
    commands: list[dict] = field(default_factory=list)
    rounds: list[dict] = field(default_factory=list)

    @property
    def started(self) -> str:
        return next((r["started"] for r in self.rounds + self.commands if isinstance(r.get("started"), str)), "")

    def count(self, status: str) -> int:
        return sum(1 for c in self.commands if c.get("status") == status)


@dataclass
class Event:
    """Anything else: an undo, a reopening, a round that ran no message, a record this
    version does not know (shown by its kind and time)."""

    kind: str
    record: dict


def records(path: Path, guard: Guard) -> Iterator[dict]:
    handle = guard.open_binary(path)
    if handle is None:
        return
    with handle:
        yield from journal_records(handle)


def undone_messages(path: Path, guard: Guard) -> set[int]:
    """Numbers of the messages an undo took back (a cheap first pass over the journal)."""
    numbers: set[int] = set()
    handle = guard.open_binary(path)
    if handle is None:
        return numbers
    with handle:
        for record in journal_records(line for line in handle if b'"undo"' in line):
            if record.get("record") == "undo" and isinstance(record.get("message"), int):
                numbers.add(record["message"])
    return numbers


def timeline(path: Path, guard: Guard) -> Iterator[Message | Event]:
    """The journal's records grouped: one `Message` per executed message (its command
    records and the model rounds that produced it), one `Event` for everything else."""
    current: Message | None = None
    for record in records(path, guard):
        kind = record.get("record")
        number = record.get("message")
        number = number if type(number) is int else None  # not a bool, not a float
        if kind is None and record.get("command") != "reopen" and isinstance(number, int):
            if current is None or current.number != number:
                if current is not None:
                    yield current
                current = Message(number, _path(record.get("problem")), _int(record.get("session")))
            current.commands.append(record)
            if current.problem is None:
                current.problem = _path(record.get("problem"))
            continue
        if kind == "round" and isinstance(number, int):
            if current is None or current.number != number:
                if current is not None:
                    yield current
                current = Message(number, _path(record.get("problem")), _int(record.get("session")))
            current.rounds.append(record)
            continue
        if current is not None:
            yield current
            current = None
        yield Event(str(record.get("command") or "record") if kind is None else str(kind), record)
    if current is not None:
        yield current


def _path(value: object) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(p, str) for p in value):
        return tuple(value)
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
