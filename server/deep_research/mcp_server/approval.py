"""Commands above the research's approval mode run only with the user's approval.

The research's mode is `approval_mode` in its deep-research.toml (default: update, as for
the autopilot). When a message holds commands of a higher kind, the execution asks its
approver (`Elicitation`, engine/language/approval.py): the user through MCP elicitation (run / skip)
if the client declared that it can; otherwise nothing runs and the reply says what needs
approval and how the user can give it. Neither way writes anything for a message that does
not run.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..engine.language.analysis import Outcome
from ..engine.language.approval import ApprovalRequest, Decision
from ..engine.language.commands import DEFAULT_APPROVAL_MODE, ApprovalMode
from ..engine.research import MAIN, MESSAGE_FILE
from ..engine.settings.table import CONFIG_FILE, Config

log = logging.getLogger("deep_research.mcp")

SHOWN_MESSAGE = 4_000  # characters of the message shown in the question

QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Run this message?",
            "description": "run: execute the whole message now; skip: execute nothing (the agent is told).",
            "enum": ["run", "skip"],
            "default": "run",
        },
    },
    "required": ["decision"],
}


def mode_of(config: Config) -> ApprovalMode:
    return ApprovalMode.parse(config.approval_mode or DEFAULT_APPROVAL_MODE.label, DEFAULT_APPROVAL_MODE)


def can_ask(session: Any) -> bool:
    """Whether the client declared form elicitation (an empty elicitation capability means form)."""
    capabilities = getattr(session, "client_capabilities", None)
    elicitation = getattr(capabilities, "elicitation", None)
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None


class Elicitation:
    """The approver of a tool call (engine/language/approval.py): the user is asked through the client,
    if it can; otherwise the message waits (`STOP`) and the reply says how to approve it."""

    def __init__(self, session: Any, request_id: Any, research: str) -> None:
        self.session, self.request_id, self.research = session, request_id, research

    async def decide(self, request: ApprovalRequest) -> Decision:
        if not can_ask(self.session):
            return Decision.STOP
        text = request.text
        shown = text if len(text) <= SHOWN_MESSAGE else text[:SHOWN_MESSAGE] + f"\n… ({len(text) - SHOWN_MESSAGE:,} more characters)"
        whose = "" if request.researcher == MAIN else f" as its researcher “{request.researcher}”"
        question = (
            f"An agent wants to execute a message in the research “{self.research}”{whose}. These commands are above "
            f"its approval mode `{request.mode.label}`:\n{_listed(request.waiting)}\n\nThe whole message:\n\n{shown}"
        )
        try:
            result = await self.session.elicit_form(question, QUESTION_SCHEMA, related_request_id=self.request_id)
        except Exception as error:  # a client that declared elicitation but cannot answer: say how to approve
            log.warning("the approval question failed: %s", error)
            return Decision.STOP
        decision = (result.content or {}).get("decision") if result.action == "accept" else None
        return Decision.RUN if decision == "run" else Decision.SKIP  # skip, decline or cancel


def declined_reply(waiting: list[Outcome], mode: ApprovalMode) -> str:
    return (
        "## Execution Status Report\n\n"
        f"Nothing in your message was executed: the user did not approve it. These commands are above the "
        f"research's approval mode `{mode.label}`:\n{_listed(waiting)}\n\n"
        "Write another message; leave out what the user did not approve, or ask the user about it."
    )


def needs_approval_reply(root: Path, waiting: list[Outcome], mode: ApprovalMode, document: Path | None = None) -> str:
    """How the user approves a message the client cannot ask about; `document` is the message
    document of the researcher who wrote it (default: main's)."""
    document = document or root / MESSAGE_FILE
    kinds = sorted({o.spec.kind for o in waiting if o.spec is not None})
    wanted = kinds[-1].label if kinds else "update"
    return (
        "## Execution Status Report\n\n"
        "Nothing in your message was executed: it needs the user's approval, and this client cannot ask the user "
        f"(it does not support MCP elicitation). These commands are above the research's approval mode "
        f"`{mode.label}`:\n{_listed(waiting)}\n\n"
        "How the user can approve it, either:\n"
        f"- run the message themselves: put it into {document} and run "
        f"`deep-research execute {document}` (or execute it in the editor); or\n"
        f"- let agents run such commands: set `approval_mode = \"{wanted}\"` in {root / CONFIG_FILE}.\n\n"
        "Tell the user this. If they ran the message, read the prompt (get_prompt) before writing the next one; "
        "if they changed the approval mode, send the message again."
    )


def _listed(waiting: list[Outcome]) -> str:
    return "\n".join(f"- line {o.line}: `{o.label}` ({o.spec.kind.label if o.spec else '?'})" for o in waiting)
