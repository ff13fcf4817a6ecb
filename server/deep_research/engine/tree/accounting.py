"""What each problem cost: messages, commands, time in focus, model rounds and tokens.

Everything comes from the journal (`.deep-research/journal.jsonl`), read tolerantly: a
line that is not a JSON object, a record of a kind this module does not know, a missing
or mistyped field is skipped, never an error. The journal's records:

- command records (no `record` key): one per command of a message, with `message`,
  `problem` (the focus when the message ran), `status` (ok/failed/skipped), `ended`;
  `reopen` and `SHUT_DOWN_DEEP_RESEARCHER` are command records too;
- `"record": "round"` (the autopilot): one per model round, with `problem`,
  `prompt_tokens`, `completion_tokens`, `tokens_estimated`, `ended`;
- `"record": "undo"`: message `message` was taken back.

Each record may name its `researcher` (parallel research; none means the main researcher):
time in focus is then counted per researcher, from its own previous event, and
`by_researcher()` gives each researcher's figures (`deep-research tree --stats`).

Figures are the effort spent, so an undone message still counts (it ran, its tokens were
paid), and is also counted as undone. Time in focus is the time from the previous event
in the journal to each message, given to the problem in focus while it was written, with
gaps longer than `IDLE` counted as `IDLE` (a night away is not work).

`Ledger` keeps the figures of one research and follows the journal as it grows: it is
cached by the file's stat and, since the journal is append-only, reads only what was
appended since (a 100,000-message journal is parsed once, not per hover). Figures roll
up the tree: `total(path)` is the problem's own figures plus all its subproblems'.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..core.state import MAIN, ProblemPath
from ..store import JOURNAL, Guard, Reads, bookkeeping, journal_records

IDLE = 30 * 60.0  # seconds: a longer gap between two events counts as this much
_CHECK = 64  # bytes before the read offset compared on refresh, to notice a rewritten journal


@dataclass
class Figures:
    messages: int = 0
    undone: int = 0  # of those messages, how many were undone
    commands: int = 0  # commands that ran (ok or failed)
    failed: int = 0
    skipped: int = 0  # commands that did not run (after a focus change, after a failure …)
    seconds: float = 0.0  # time in focus
    rounds: int = 0  # model rounds (autopilot)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False  # some token counts are estimates (the endpoint gave none)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def empty(self) -> bool:
        return self.messages == 0 and self.rounds == 0 and self.seconds == 0

    def add(self, other: Figures) -> None:
        # Spelled out: this runs for every problem and each of its parents when figures roll up.
        self.messages += other.messages
        self.undone += other.undone
        self.commands += other.commands
        self.failed += other.failed
        self.skipped += other.skipped
        self.seconds += other.seconds
        self.rounds += other.rounds
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.estimated = self.estimated or other.estimated

    def copy(self) -> Figures:
        return Figures(self.messages, self.undone, self.commands, self.failed, self.skipped, self.seconds, self.rounds,
                       self.prompt_tokens, self.completion_tokens, self.estimated)

    def minus(self, other: Figures) -> Figures:
        """What was added to `other` to make this (figures only grow)."""
        return Figures(
            self.messages - other.messages, self.undone - other.undone, self.commands - other.commands,
            self.failed - other.failed, self.skipped - other.skipped, self.seconds - other.seconds,
            self.rounds - other.rounds, self.prompt_tokens - other.prompt_tokens,
            self.completion_tokens - other.completion_tokens, self.estimated,
        )


class Ledger:
    """The figures of one research, kept up to date with its journal. Thread-safe: the
    language server reads a long journal for the first time in a thread (`warm_up`), and a
    hover meanwhile gets None from `total_if_ready` rather than waiting."""

    def __init__(self, root: Path) -> None:
        self.path = bookkeeping(root) / JOURNAL
        self._guard = Guard(root)  # the journal may be a link out of the research: not read then
        self._lock = threading.Lock()
        self._warm = threading.Event()  # set unless a background reading is under way
        self._warm.set()
        self._reset()

    def warm_up(self) -> None:
        """Read the journal in a background thread (once the server opens a research)."""
        self._warm.clear()

        def run() -> None:
            try:
                self.refresh()
            finally:
                self._warm.set()

        threading.Thread(target=run, name="journal-ledger", daemon=True).start()

    def _reset(self) -> None:
        self._signature: tuple[int, int, int] | None = None
        # The look at the journal that everything read so far came from: while it is unchanged
        # (with the language server's watch, no stat at all: engine/store/watch.py), nothing is new.
        self._look: Reads | None = None
        self._inode: int | None = None
        self._offset = 0
        self._check = b""
        self._own: dict[ProblemPath, Figures] = {}
        self._rolled: dict[ProblemPath, Figures] | None = None
        self._message_problem: dict[int, ProblemPath] = {}
        self._current: int | None = None  # the message whose records are being read
        self._clock: dict[str, float] = {}  # time of each researcher's latest event read
        self._focus: dict[str, ProblemPath] = {}  # each researcher's focus, as its records said
        self._researchers: dict[str, Figures] = {}  # each researcher's figures
        self._touched: dict[ProblemPath, Figures] | None = None  # own figures before this refresh
        self.events = 0  # records read (for tests and benchmarks)

    # -- reading ---------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Read what was appended since the last call; True if anything changed."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> bool:
        look = self._look
        if look is not None and look.unchanged():
            return False
        try:
            st = os.stat(self.path)
        except OSError:
            if self._signature is not None:
                self._reset()
                return True
            self._look = _look(str(self.path), None)
            return False
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
        if signature == self._signature:
            self._look = _look(str(self.path), st)
            return False
        handle = self._guard.open_binary(self.path)
        if handle is None:
            return False
        with handle:
            if self._inode is not None and (
                st.st_ino != self._inode or st.st_size < self._offset or not self._same_start(handle)
            ):
                self._reset()  # replaced or rewritten, not appended to: read it all again
            self._inode = st.st_ino
            handle.seek(self._offset)
            data = handle.read(max(0, st.st_size - self._offset))
        end = data.rfind(b"\n") + 1  # a torn last line waits for the rest of it
        if end:
            self._touched = {}
            self._read_lines(data[:end])
            self._offset += end
            self._check = (self._check[-_CHECK:] + data[max(0, end - _CHECK):end])[-_CHECK:]
            self._roll_up_changes()
        self._signature = signature if end == len(data) else None
        return bool(end)

    def _same_start(self, handle) -> bool:
        if not self._check:
            return True
        handle.seek(self._offset - len(self._check))
        return handle.read(len(self._check)) == self._check

    def _read_lines(self, data: bytes) -> None:
        for record in journal_records(data.split(b"\n")):
            self.events += 1
            self._read(record)

    def _read(self, record: dict) -> None:
        kind = record.get("record")
        if kind is None:
            self._command(record)
        elif kind == "round":
            self._round(record)
        elif kind == "undo":
            number = record.get("message")
            if isinstance(number, int) and number in self._message_problem:
                self._figures(self._message_problem[number]).undone += 1
                self._researcher(record).undone += 1
            self._tick(record, None)
        else:
            self._tick(record, None)  # a kind this version does not know: only its time

    def _command(self, record: dict) -> None:
        number = record.get("message")
        if record.get("command") == "reopen" or type(number) is not int:
            self._tick(record, None)
            return
        name = _researcher_name(record)
        problem = _path(record.get("problem"))
        if problem is None:
            problem = self._message_problem.get(number, self._focus.get(name, ()))
        both = (self._figures(problem), self._researcher(record))
        if number != self._current:
            self._current = number
            if number not in self._message_problem:
                for figures in both:
                    figures.messages += 1
                self._message_problem[number] = problem
        status = record.get("status")
        for figures in both:
            if status == "skipped":
                figures.skipped += 1
            elif status in ("ok", "failed"):
                figures.commands += 1
                figures.failed += status == "failed"
        self._focus[name] = problem
        self._tick(record, problem)

    def _round(self, record: dict) -> None:
        problem = _path(record.get("problem"))
        if problem is None:
            problem = self._focus.get(_researcher_name(record), ())
        for figures in (self._figures(problem), self._researcher(record)):
            figures.rounds += 1
            figures.prompt_tokens += _count(record.get("prompt_tokens"))
            figures.completion_tokens += _count(record.get("completion_tokens"))
            figures.estimated = figures.estimated or record.get("tokens_estimated") is True
        self._tick(record, problem)

    def _tick(self, record: dict, problem: ProblemPath | None) -> None:
        """Advance the record's researcher's clock to the record's end, giving the time since
        its previous event to `problem` (researchers working at once each count their own time)."""
        at = _time(record.get("ended")) or _time(record.get("started"))
        if at is None:
            return
        name = _researcher_name(record)
        clock = self._clock.get(name)
        if clock is None and name != MAIN:
            clock = self._clock.get(MAIN)  # a delegated researcher starts when main delegates it
        if clock is not None and problem is not None and at > clock:
            spent = min(at - clock, IDLE)
            self._figures(problem).seconds += spent
            self._researcher(record).seconds += spent
        if clock is None or at > clock:
            self._clock[name] = at

    def _researcher(self, record: dict) -> Figures:
        name = _researcher_name(record)
        found = self._researchers.get(name)
        if found is None:
            found = self._researchers[name] = Figures()
        return found

    def _figures(self, problem: ProblemPath) -> Figures:
        """The problem's own figures, to be changed (the first change is remembered)."""
        found = self._own.get(problem)
        if found is None:
            found = self._own[problem] = Figures()
        if self._touched is not None and problem not in self._touched:
            self._touched[problem] = found.copy()
        return found

    def _roll_up_changes(self) -> None:
        """Add what the new records changed to the rolled-up figures (if they were made)."""
        touched, self._touched = self._touched, None
        if self._rolled is None or touched is None:
            return
        for problem, before in touched.items():
            delta = self._own[problem].minus(before)
            for depth in range(len(problem) + 1):
                target = self._rolled.get(problem[:depth])
                if target is None:
                    target = self._rolled[problem[:depth]] = Figures()
                target.add(delta)

    # -- figures -----------------------------------------------------------------------------

    def own(self, path: ProblemPath) -> Figures:
        """The problem's own figures (messages written while it was in focus)."""
        with self._lock:
            self._refresh()
            return self._own.get(tuple(path), Figures()).copy()

    def by_researcher(self) -> dict[str, Figures]:
        """Each researcher's figures (main's first, then in the order they first appear),
        ended researchers included."""
        with self._lock:
            self._refresh()
            return {name: figures.copy() for name, figures in self._researchers.items()}

    def total(self, path: ProblemPath) -> Figures:
        """The problem's figures with all its subproblems'."""
        with self._lock:
            return self._total(path)

    def total_if_ready(self, path: ProblemPath, wait: float = 0.2) -> Figures | None:
        """Like `total`, or None if the journal is still being read in the background after
        `wait` seconds (a short journal is read by then; a 100,000-message one takes seconds)."""
        if not (self._warm.is_set() or self._warm.wait(wait)) or not self._lock.acquire(timeout=wait):
            return None
        try:
            return self._total(path)
        finally:
            self._lock.release()

    def _total(self, path: ProblemPath) -> Figures:
        look = self._look
        if look is None or not look.unchanged():
            self._refresh()
        if self._rolled is None:
            rolled: dict[ProblemPath, Figures] = {}
            for problem, figures in self._own.items():
                for depth in range(len(problem) + 1):
                    prefix = problem[:depth]
                    target = rolled.get(prefix)
                    if target is None:
                        target = rolled[prefix] = Figures()
                    target.add(figures)
            self._rolled = rolled
        found = self._rolled.get(tuple(path))
        return found.copy() if found is not None else Figures()


def _look(path: str, st: os.stat_result | None) -> Reads:
    """A look at the journal as `st` found it (None: absent)."""
    look = Reads()
    look.note(path, st)
    return look


# -- formatting ------------------------------------------------------------------------------------


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def summary(figures: Figures) -> str:
    """One line, for `tree --stats` and the dossier: '3 messages · 7 commands (1 failed) · …'."""
    if figures.empty:
        return "no activity yet"
    parts = [_plural(figures.messages, "message") + (f" ({figures.undone} undone)" if figures.undone else "")]
    commands = _plural(figures.commands, "command")
    if figures.failed:
        commands += f" ({figures.failed} failed)"
    parts += [commands, f"{duration(figures.seconds)} in focus"]
    if figures.rounds:
        approx = "~" if figures.estimated else ""
        parts.append(f"{_plural(figures.rounds, 'model round')}, {approx}{figures.tokens:,} tokens")
    return " · ".join(parts)


def markdown(figures: Figures, scope: str) -> str:
    """A short markdown block, for a hover: what was spent on `scope`."""
    if figures.empty:
        return f"**Effort** ({scope}): no activity yet."
    lines = [
        f"**Effort** ({scope})",
        "",
        f"- Messages: {figures.messages}" + (f" ({figures.undone} undone)" if figures.undone else ""),
        f"- Commands run: {figures.commands}, failed: {figures.failed}"
        + (f", not run: {figures.skipped}" if figures.skipped else ""),
        f"- Time in focus: {duration(figures.seconds)}",
    ]
    if figures.rounds:
        approx = " (partly estimated)" if figures.estimated else ""
        lines.append(f"- Model rounds: {figures.rounds}, tokens: {figures.tokens:,} "
                     f"({figures.prompt_tokens:,} prompt + {figures.completion_tokens:,} completion){approx}")
    return "\n".join(lines)


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


# -- tolerant field readers ------------------------------------------------------------------------


def _researcher_name(record: dict) -> str:
    name = record.get("researcher")
    return name if isinstance(name, str) and name else MAIN


def _path(value: object) -> ProblemPath | None:
    if isinstance(value, list) and all(isinstance(p, str) for p in value):
        return tuple(value)
    return None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _time(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        return None  # local times cannot be compared with the engine's UTC ones
    return stamp.timestamp()
