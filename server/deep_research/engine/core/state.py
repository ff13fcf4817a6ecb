"""The research's state machine: its phase, and where each researcher works.

    no_problem ──define_problem──▶ in_focus ──focus_up at the root──▶ finished
         │                            │  ▲
         │                            │  └── focus_down / focus_up / fail_task_and_focus_up
         └────── SHUT_DOWN_DEEP_RESEARCHER (from any phase) ──────▶ shut_down

Which commands are valid in which phase is declared in the command table; this module
only holds the vocabulary and the persisted record.

Researchers (docs/parallel.md). A research has a *main* researcher and, while it delegates,
*delegated* ones: each has a root (the research's root for main, a delegated subproblem
otherwise), a focus at or below it, a session and the digest of its last message (a `Seat`).
`State` is one researcher's view of the record: its own seat in `focus`, `session`,
`last_message` and `root`, every other researcher that has not ended in `others`, and the
research-wide facts (`phase`, `messages`, `created`, `sessions`). Operations change the view;
`to_json` writes the whole record back whichever researcher's view it is, so one message of
any researcher is one write of `state.json` in its transaction.

A delegated researcher's `phase` is the research's (`in_focus`, or `shut_down`), or
`finished` once it ended (it focused up from its root, done or failed): its seat is then
left out of the record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from enum import Enum

ProblemPath = tuple[str, ...]  # folder names from the root problem down; () is the root
ROOT: ProblemPath = ()
FORMAT = 1
MAIN = "main"  # the main researcher's name
NAME_SEPARATOR = " / "  # a delegated researcher's name: the titles below the root down to its root


class Phase(str, Enum):
    NO_PROBLEM = "no_problem"
    IN_FOCUS = "in_focus"
    FINISHED = "finished"
    SHUT_DOWN = "shut_down"

    def why_not(self) -> str:
        """Why a command that is not valid in this phase cannot run, and what to do."""
        return {
            Phase.NO_PROBLEM: "No problem is defined yet, so there is nothing to work on. "
            "Define the problem first with a `<<< define_problem` block.",
            Phase.IN_FOCUS: "The research problem is already defined and only one definition is "
            "allowed. Refine it with `<<< append_to_problem_definition` instead.",
            Phase.FINISHED: "The research is finished (the root problem was completed), so no "
            "command can run any more.",
            Phase.SHUT_DOWN: "The research was shut down with SHUT_DOWN_DEEP_RESEARCHER, so no "
            "command can run any more.",
        }[self]


class Status(str, Enum):
    OPEN = "open"
    DONE = "done"
    FAILED = "failed"

    @classmethod
    def parse(cls, value: str | None) -> Status:
        try:
            return cls((value or "").strip().lower())
        except ValueError:
            return cls.OPEN


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Seat:
    """Where one researcher works, as `state.json` keeps it."""

    name: str  # MAIN, or the titles below the research's root down to `root`, joined by NAME_SEPARATOR
    root: ProblemPath
    focus: ProblemPath
    session: int
    last_message: str = ""  # sha256 of its last executed message, so that it never runs twice
    started: str = ""  # when it was delegated

    def to_raw(self) -> dict:
        return {"name": self.name, "root": list(self.root), "focus": list(self.focus), "session": self.session,
                "last_message": self.last_message, "started": self.started}

    @classmethod
    def from_raw(cls, raw: object) -> Seat | None:
        """Tolerant: a hand-damaged entry is left out (None)."""
        if not isinstance(raw, dict):
            return None
        name, root, focus, session = raw.get("name"), _path(raw.get("root")), _path(raw.get("focus")), raw.get("session")
        if not (isinstance(name, str) and name and name != MAIN and root and isinstance(session, int) and session > 0):
            return None
        if focus is None or focus[: len(root)] != root:
            focus = root
        last, started = raw.get("last_message"), raw.get("started")
        return cls(name, root, focus, session, last if isinstance(last, str) else "",
                   started if isinstance(started, str) else "")

    def holds(self, path: ProblemPath) -> bool:
        """Whether `path` is in this researcher's subtree."""
        return path[: len(self.root)] == self.root


def _path(raw: object) -> ProblemPath | None:
    if isinstance(raw, list) and all(isinstance(p, str) and p for p in raw):
        return tuple(raw)
    return None


@dataclass(frozen=True)
class State:
    """What `.deep-research/state.json` holds, as one researcher sees it (see the module's
    docstring). Small on purpose: the tree is on disk."""

    phase: Phase = Phase.NO_PROBLEM
    focus: ProblemPath = ROOT
    session: int = 1
    messages: int = 0  # messages executed so far, over all sessions and researchers
    created: str = field(default_factory=now)
    last_message: str = ""  # sha256 of the last executed message, so it never runs twice
    researcher: str = MAIN  # whose view this is
    root: ProblemPath = ROOT  # that researcher's root problem
    started: str = ""  # when that researcher was delegated ("" for main)
    others: tuple[Seat, ...] = ()  # every other researcher that has not ended (main too, in a delegated view)
    sessions: int = 0  # the highest session number given so far, by any researcher

    def evolve(self, **changes: object) -> State:
        return replace(self, **changes)  # type: ignore[arg-type]

    # -- researchers -------------------------------------------------------------------------

    @property
    def is_main(self) -> bool:
        return self.researcher == MAIN

    @property
    def seat(self) -> Seat:
        return Seat(self.researcher, self.root, self.focus, self.session, self.last_message, self.started)

    def seats(self) -> list[Seat]:
        """Every researcher that has not ended, main first, then in the order they were delegated
        (this view's own seat left out once it ended)."""
        own = [] if self.ended else [self.seat]
        every = own + list(self.others)
        return sorted(every, key=lambda seat: (seat.name != MAIN, seat.started, seat.root))

    @property
    def ended(self) -> bool:
        """A delegated researcher that focused up from its root in this view."""
        return not self.is_main and self.phase is Phase.FINISHED

    def delegated(self) -> list[Seat]:
        """The delegated researchers (every seat but main's)."""
        return [seat for seat in self.seats() if seat.name != MAIN]

    def find(self, name: str) -> Seat | None:
        """The researcher called `name` (exactly, or as `name_key` would compare it: see
        `Research.researcher_named` for the forgiving lookup)."""
        return next((seat for seat in self.seats() if seat.name == name), None)

    def view(self, name: str) -> State | None:
        """The same record as researcher `name` sees it; None if no such researcher works."""
        if name == self.researcher:
            return None if self.ended else self
        seat = self.find(name)
        if seat is None:
            return None
        others = tuple(s for s in self.seats() if s.name != name)
        phase = self.research_phase
        if name != MAIN and phase is Phase.FINISHED:
            phase = Phase.FINISHED
        return replace(self, phase=phase, focus=seat.focus, session=seat.session, last_message=seat.last_message,
                       researcher=seat.name, root=seat.root, started=seat.started, others=others)

    @property
    def research_phase(self) -> Phase:
        """The research's phase (a delegated view's own phase says whether it ended)."""
        if self.is_main:
            return self.phase
        return Phase.SHUT_DOWN if self.phase is Phase.SHUT_DOWN else Phase.IN_FOCUS

    def holder(self, path: ProblemPath) -> Seat:
        """The researcher whose subtree holds `path`: the one with the deepest root above it."""
        best = Seat(MAIN, ROOT, ROOT, 1)
        for seat in self.seats():
            if seat.holds(path) and len(seat.root) >= len(best.root):
                best = seat
        return best

    def held_by_other(self, path: ProblemPath) -> Seat | None:
        """Another researcher holding `path` (it may not be changed or entered here), or None."""
        holder = self.holder(path)
        return None if holder.name == self.researcher else holder

    def delegations(self, at: ProblemPath) -> list[Seat]:
        """The researchers given a subproblem of the problem at `at`, still working."""
        return [seat for seat in self.others if seat.root[:-1] == at and seat.name != MAIN]

    def waiting(self) -> bool:
        """Whether this researcher's current problem waits for delegations to end."""
        return bool(self.delegations(self.focus))

    def highest_session(self) -> int:
        return max([self.sessions, self.session] + [seat.session for seat in self.others])

    def new_session(self, **changes: object) -> State:
        """This view in a new session (numbered after every session of every researcher)."""
        number = self.highest_session() + 1
        return replace(self, session=number, sessions=number, **changes)  # type: ignore[arg-type]

    def with_seat(self, seat: Seat) -> State:
        """This view with another researcher added (a delegation)."""
        return replace(self, others=self.others + (seat,), sessions=max(self.highest_session(), seat.session))

    def position(self) -> tuple:
        """Everything but the message counter: what must be as a message left it for its undo."""
        return (self.research_phase, tuple(self.seats()), self.highest_session())

    # -- the file ------------------------------------------------------------------------------

    def to_json(self) -> str:
        """The whole record, whichever researcher's view this is."""
        main = self.find(MAIN) or Seat(MAIN, ROOT, ROOT, 1)
        delegated = self.delegated()
        record: dict[str, object] = {
            "format": FORMAT,
            "phase": self.research_phase.value,
            "focus": list(main.focus),
            "session": main.session,
            "messages": self.messages,
            "created": self.created,
            "last_message": main.last_message,
        }
        if delegated or self.highest_session() > main.session:
            record["sessions"] = self.highest_session()
        if delegated:
            record["researchers"] = [seat.to_raw() for seat in delegated]
        return json.dumps(record, indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> State:
        """The main researcher's view. Tolerant: a hand-damaged file gives a usable state
        rather than an error."""
        try:
            raw = json.loads(text)
        except ValueError:
            raw = {}
        if not isinstance(raw, dict):
            raw = {}
        focus = raw.get("focus")
        if not (isinstance(focus, list) and all(isinstance(p, str) for p in focus)):
            focus = []
        try:
            phase = Phase(raw.get("phase", Phase.NO_PROBLEM.value))
        except ValueError:
            phase = Phase.NO_PROBLEM
        session = raw.get("session")
        messages = raw.get("messages")
        created = raw.get("created")
        last = raw.get("last_message")
        sessions = raw.get("sessions")
        seats: list[Seat] = []
        listed = raw.get("researchers")
        for item in listed if isinstance(listed, list) else []:
            seat = Seat.from_raw(item)
            if seat is not None and all(seat.root != s.root and seat.name != s.name for s in seats):
                seats.append(seat)
        return cls(
            phase=phase,
            focus=tuple(focus),
            session=session if isinstance(session, int) and session > 0 else 1,
            messages=messages if isinstance(messages, int) and messages >= 0 else 0,
            created=created if isinstance(created, str) else now(),
            last_message=last if isinstance(last, str) else "",
            others=tuple(seats),
            sessions=sessions if isinstance(sessions, int) and sessions > 0 else 0,
        )
