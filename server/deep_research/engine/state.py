"""The research's state machine: its phase, the focus path and the session number.

    no_problem ──define_problem──▶ in_focus ──focus_up at the root──▶ finished
         │                            │  ▲
         │                            │  └── focus_down / focus_up / fail_task_and_focus_up
         └────── SHUT_DOWN_DEEP_RESEARCHER (from any phase) ──────▶ shut_down

Which commands are valid in which phase is declared in the command table; this module
only holds the vocabulary and the persisted record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from enum import Enum

ProblemPath = tuple[str, ...]  # folder names from the root problem down; () is the root
ROOT: ProblemPath = ()
FORMAT = 1


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
class State:
    """What `.deep-research/state.json` holds. Small on purpose: the tree is on disk."""

    phase: Phase = Phase.NO_PROBLEM
    focus: ProblemPath = ROOT
    session: int = 1
    messages: int = 0  # messages executed so far, over all sessions
    created: str = field(default_factory=now)
    last_message: str = ""  # sha256 of the last executed message, so it never runs twice

    def evolve(self, **changes: object) -> State:
        return replace(self, **changes)  # type: ignore[arg-type]

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "phase": self.phase.value,
                "focus": list(self.focus),
                "session": self.session,
                "messages": self.messages,
                "created": self.created,
                "last_message": self.last_message,
            },
            indent=2,
            ensure_ascii=False,
        ) + "\n"

    @classmethod
    def from_json(cls, text: str) -> State:
        """Tolerant: a hand-damaged file gives a usable state rather than an error."""
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
        return cls(
            phase=phase,
            focus=tuple(focus),
            session=session if isinstance(session, int) and session > 0 else 1,
            messages=messages if isinstance(messages, int) and messages >= 0 else 0,
            created=created if isinstance(created, str) else now(),
            last_message=last if isinstance(last, str) else "",
        )
