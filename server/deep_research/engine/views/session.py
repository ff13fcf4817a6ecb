"""The session as the prompt shows it: bounded, however long the session grows.

The session's log on disk keeps every message and every reply, appended and never rewritten
(what undo cuts back). The prompt shows its end (docs/evidence.md, "The session in the prompt"):

- at most the last `SESSION_MESSAGES` messages with their replies;
- the newest turn (the last message and what follows it) whole; in the replies before it,
  the parts, passages and outlines that `read`, `find` and `outline` showed are named only
  (`by_name`): shown once, they are one command away, and a researcher keeps what matters
  with `add_attachment` or a citation;
- all of it within `SESSION_CHARS` (engine/views/prompt.py shortens the oldest entries, then
  leaves them out, each cut marked).

So a message costs the same at the 10th find of a session as at the 1,000th: `read_recent`
reads only the log's end (and counts the entries before it, without parsing them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..store import Guard
from .reply import SOURCES_HEADING, SOURCES_NOTE

SESSION_MESSAGES = 20  # of the session's messages (with their replies), the prompt shows at most the last
SESSION_CHARS = 40_000  # what the prompt shows of the session at most (the newest turn always whole)
_LINE_START = b'\n{"role": "'  # how every entry's line starts (`Entry.to_json`)
_MESSAGE_START = b'\n{"role": "assistant"'
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Entry:
    """One entry of the session: a message of the assistant, or the system's reply or note."""

    role: str  # "assistant" or "system"
    text: str
    at: str = ""

    def to_json(self) -> str:
        return json.dumps({"role": self.role, "text": self.text, "at": self.at}, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, line: str) -> Entry | None:
        try:
            raw = json.loads(line)
            return cls(str(raw["role"]), str(raw["text"]), str(raw.get("at", "")))
        except (ValueError, KeyError, TypeError):
            return None


def parse(text: str) -> list[Entry]:
    """A session log's entries (a line that is not one is skipped)."""
    entries = (Entry.from_json(line) for line in text.splitlines() if line.strip())
    return [e for e in entries if e is not None]


@dataclass(frozen=True)
class Recent:
    """The end of a session: its last entries, and how many entries (and of them, messages of
    the assistant) come before them."""

    entries: list[Entry]
    earlier: int = 0
    earlier_messages: int = 0

    def plus(self, entries: list[Entry]) -> Recent:
        return Recent(self.entries + entries, self.earlier, self.earlier_messages)


def read_recent(guard: Guard, path: Path, messages: int = SESSION_MESSAGES) -> Recent:
    """The end of the session log at `path`: its entries from its `messages`-th last message of
    the assistant on (all of them in a shorter session). Reads the log backwards from its end
    until it has them; what comes before is counted, not parsed."""
    handle = guard.open_binary(path)
    if handle is None:
        return Recent([])
    with handle:
        try:
            size = handle.seek(0, 2)
            start = _tail_start(handle, size, messages)
            handle.seek(start)
            data = handle.read(size - start)
            earlier, earlier_messages = _count_before(handle, start) if start else (0, 0)
        except OSError:
            return Recent([])
    return Recent(parse(data.decode("utf-8", errors="replace")), earlier, earlier_messages)


def _tail_start(handle, size: int, messages: int) -> int:
    """Where the line of the `messages`-th last message starts (0: the log's start)."""
    chunk = _CHUNK
    while True:
        start = max(0, size - chunk)
        handle.seek(start)
        data = handle.read(size - start)
        at = len(data)
        for _ in range(messages):
            at = data.rfind(_MESSAGE_START, 0, at)
            if at < 0:
                break
        else:
            return start + at + 1
        if start == 0:
            return 0
        chunk *= 4


def _count_before(handle, end: int) -> tuple[int, int]:
    """The entries, and the assistant's messages, whose lines start before offset `end` (a line
    starts there): counted in the raw bytes, not parsed."""
    handle.seek(0)
    counts = {_LINE_START: 0, _MESSAGE_START: 0}
    carries = dict.fromkeys(counts, b"\n")  # the log's first line starts at its start
    read = 0
    while read < end:
        chunk = handle.read(min(_CHUNK * 16, end - read))
        if not chunk:
            break
        read += len(chunk)
        for pattern, carry in carries.items():
            data = carry + chunk
            counts[pattern] += data.count(pattern)
            carries[pattern] = data[-(len(pattern) - 1):]  # too short to hold a match: none is counted twice
    return counts[_LINE_START], counts[_MESSAGE_START]


# -- what was shown before, by name -------------------------------------------------------------------------------

# A part, passage or outline as `read`, `find` and `outline` show it (engine/execution/reading.py).
_ELEMENT = re.compile(r'<(part|passage|outline)((?: [a-z]+="[^"\n]*")+)>\n')


def by_name(entries: list[Entry]) -> list[Entry]:
    """`entries` with the parts, passages and outlines that replies before the newest turn (the
    last message of the assistant and what follows it) showed, named only: each element's
    opening tag, self-closed (the prompt says once how to show them again). An entry left as it
    was is the same object."""
    newest = max((i for i, e in enumerate(entries) if e.role == "assistant"), default=len(entries))
    return [_named(e) if i < newest and e.role == "system" else e for i, e in enumerate(entries)]


def _named(entry: Entry) -> Entry:
    heading = f"\n{SOURCES_HEADING}\n\n"
    at = entry.text.find(heading)
    if at < 0:
        return entry
    start = at + len(heading)
    text = entry.text
    opens = list(_ELEMENT.finditer(text, start))
    if not opens:
        return entry
    done = start + len(SOURCES_NOTE) + 2 if text.startswith(SOURCES_NOTE + "\n\n", start) else start
    out = [text[:start]]
    for number, match in enumerate(opens):
        tag = match.group(1)
        bound = opens[number + 1].start() if number + 1 < len(opens) else len(text)
        close = text.rfind(f"\n</{tag}>", match.end() - 1, bound)
        if close < 0:
            continue  # no element after all (a source's own text): left as it is
        out += [text[done:match.start()], f"<{tag}{match.group(2)}/>"]
        done = close + len(tag) + 4
    out.append(text[done:])
    named = "".join(out)
    return entry if named == text else Entry(entry.role, named, entry.at)
