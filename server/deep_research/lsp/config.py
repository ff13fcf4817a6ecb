"""The server's settings: section `deepResearch`, read with `workspace/configuration`."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.commands import ApprovalMode

SECTION = "deepResearch"
MODES = ("none", "read", "create", "update", "delete")  # checked against ApprovalMode by a test
DEFAULT_MODE = "update"
log = logging.getLogger("deep_research.lsp")


@dataclass(frozen=True)
class Settings:
    approval: str = DEFAULT_MODE  # a label of ApprovalMode
    execute_on_save: bool = False  # execute on didSave, for clients that cannot run code actions on save
    show_prompt: bool = True  # open the prompt with window/showDocument after each execution

    @property
    def approval_mode(self) -> "ApprovalMode":
        # Imported here: the command table is not needed to answer `initialize`.
        from ..engine.commands import ApprovalMode

        return ApprovalMode.parse(self.approval)

    def describe(self) -> str:
        return (f"Settings: approvalMode={self.approval}, executeOnSave={self.execute_on_save}, "
                f"showPromptAfterExecute={self.show_prompt}")

    @classmethod
    def from_client(cls, raw: object) -> "Settings":
        """Tolerant: a bad value falls back to its default and is logged, never raised."""
        if not isinstance(raw, dict):
            return cls()
        if isinstance(raw.get(SECTION), dict):  # some clients send the whole settings tree
            raw = raw[SECTION]
        mode = raw.get("approvalMode", DEFAULT_MODE)
        approval = str(mode).strip().lower()
        if approval not in MODES:
            log.warning("deepResearch.approvalMode %r is not one of %s; using %s", mode, ", ".join(MODES), DEFAULT_MODE)
            approval = DEFAULT_MODE
        return cls(
            approval=approval,
            execute_on_save=bool(raw.get("executeOnSave", False)),
            show_prompt=bool(raw.get("showPromptAfterExecute", True)),
        )
