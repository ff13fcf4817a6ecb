"""The server's settings: section `deepResearch`, read with `workspace/configuration`."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..engine.commands import DEFAULT_APPROVAL_MODE, ApprovalMode

SECTION = "deepResearch"
log = logging.getLogger("deep_research.lsp")


@dataclass(frozen=True)
class Settings:
    approval_mode: ApprovalMode = DEFAULT_APPROVAL_MODE
    execute_on_save: bool = False  # execute on didSave, for clients that cannot run code actions on save
    show_prompt: bool = True  # open the prompt with window/showDocument after each execution

    def describe(self) -> str:
        return (f"Settings: approvalMode={self.approval_mode.label}, executeOnSave={self.execute_on_save}, "
                f"showPromptAfterExecute={self.show_prompt}")

    @classmethod
    def from_client(cls, raw: object) -> "Settings":
        """Tolerant: a bad value falls back to its default and is logged, never raised."""
        if not isinstance(raw, dict):
            return cls()
        if isinstance(raw.get(SECTION), dict):  # some clients send the whole settings tree
            raw = raw[SECTION]
        mode = raw.get("approvalMode", DEFAULT_APPROVAL_MODE.label)
        approval = ApprovalMode.parse(mode, DEFAULT_APPROVAL_MODE)
        if str(mode).strip().lower() != approval.label:
            log.warning("deepResearch.approvalMode %r is not one of none, read, create, update, delete; using %s",
                        mode, approval.label)
        return cls(
            approval_mode=approval,
            execute_on_save=bool(raw.get("executeOnSave", False)),
            show_prompt=bool(raw.get("showPromptAfterExecute", True)),
        )
