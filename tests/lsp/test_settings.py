"""The server's settings: tolerant parsing, and the same approval modes as the engine's."""

from __future__ import annotations

from deep_research.engine.commands import DEFAULT_APPROVAL_MODE, ApprovalMode
from deep_research.lsp.config import DEFAULT_MODE, MODES, Settings


def test_modes_are_the_engines_approval_modes():
    assert MODES == tuple(mode.label for mode in ApprovalMode)
    assert DEFAULT_MODE == DEFAULT_APPROVAL_MODE.label


def test_settings_from_a_client_are_tolerant():
    assert Settings.from_client({"approvalMode": "Read "}).approval_mode is ApprovalMode.READ
    assert Settings.from_client({"deepResearch": {"approvalMode": "none"}}).approval_mode is ApprovalMode.NONE
    assert Settings.from_client({"approvalMode": "everything"}).approval_mode is DEFAULT_APPROVAL_MODE
    assert Settings.from_client(None) == Settings()
    odd = Settings.from_client({"executeOnSave": 1, "showPromptAfterExecute": 0})
    assert (odd.execute_on_save, odd.show_prompt) == (True, False)
