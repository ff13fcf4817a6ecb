"""A message with commands above the approval mode runs only when someone decides so.

The research's approval mode says which command kinds run without asking
(`commands.ApprovalMode`; `Analysis.needing_approval` lists the others). Whoever runs a
message plugs in an `Approver`, the one way every front end is asked:

- the terminal (`deep-research run`): a question, run / skip / stop;
- an editor: the message pauses in its document until the user approves it there;
- MCP: elicitation, when the client can ask its user;
- nobody to ask (`StopApprover`): the message waits.

The use case `app/execute.py::execute` asks it after the dry run, before anything is gathered
or written: `RUN` executes the message as it is, `SKIP` runs none of it (the writer is told
and writes another), `STOP` runs none of it and leaves it waiting where it was written.
Plain values and a protocol; nothing here does input or output.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..core.state import MAIN
from .commands import ApprovalMode

if TYPE_CHECKING:  # pragma: no cover
    from .analysis import Outcome


class Decision(Enum):
    RUN = "run"  # run it (approval given)
    SKIP = "skip"  # do not run it; the writer is told and writes another message
    STOP = "stop"  # do not run it; it waits where it was written


# Why a message did not run, by decision (`Execution.reason`).
NOT_RUN = {Decision.SKIP: "declined", Decision.STOP: "needs-approval"}


@dataclass
class ApprovalRequest:
    text: str
    waiting: list[Outcome]  # the commands above the approval mode
    mode: ApprovalMode
    pending: bool = False  # True: the document held this message before its writer's turn began
    document: Path | None = None
    researcher: str = MAIN  # whose message it is


class Approver(Protocol):
    async def decide(self, request: ApprovalRequest) -> Decision: ...


class StopApprover:
    """Nobody to ask: every message that needs approval waits."""

    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision.STOP
