"""The server's settings: section `deepResearch`, read with `workspace/configuration`.

Every key is a row of the settings table (`engine/settings/table.py::SETTINGS`, its `editor_key`):
the editor's own (`approvalMode`, `executeOnSave`, `showPromptAfterExecute`) and those that
override the research's `deep-research.toml` when set (`model`, `maxRounds`, `reportMaxWords`,
`maxBreadth`, `fetch.allowPrivateNetworks` …). Light: imported before `initialize`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engine.settings.table import APPROVAL_CHOICES, FIELDS, SETTINGS, Setting, rule_values

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.language.commands import ApprovalMode

SECTION = "deepResearch"
MODES = APPROVAL_CHOICES  # checked against ApprovalMode by a test
DEFAULT_MODE = FIELDS["approval_mode"].editor_default
EDITOR: tuple[Setting, ...] = tuple(s for s in SETTINGS if s.editor_key is not None)
log = logging.getLogger("deep_research.lsp")


@dataclass(frozen=True)
class Settings:
    """The editor's values by the table's keys: only those it set (None and "" are not set)."""

    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        """The editor's value of a table key, or what it means when unset (`editor_default`,
        or the table's default for a setting of the editor only)."""
        if key in self.values:
            return self.values[key]
        setting = FIELDS[key]
        return setting.editor_default if setting.toml else setting.default

    @property
    def approval(self) -> str:
        return self.get("approval_mode")

    @property
    def execute_on_save(self) -> bool:  # execute on didSave, for clients that cannot run code actions on save
        return self.get("execute_on_save")

    @property
    def show_prompt(self) -> bool:  # open the prompt with window/showDocument after each execution
        return self.get("show_prompt_after_execute")

    def rule_overrides(self) -> dict:
        """For `Research.rule_overrides`: the rules these settings set."""
        return rule_values(self.values)

    def overrides(self) -> dict:
        """For `Config.merged`: the editor's settings beat the research's file (every research
        setting, None where the editor leaves the file's value)."""
        return {s.key: self.get(s.key) for s in EDITOR if s.toml}

    @property
    def approval_mode(self) -> "ApprovalMode":
        # Imported here: the command table is not needed to answer `initialize`.
        from ..engine.language.commands import ApprovalMode

        return ApprovalMode.parse(self.approval)

    def describe(self) -> str:
        return "Settings: " + ", ".join(f"{s.editor_key}={self.get(s.key)}" for s in EDITOR)

    @classmethod
    def from_client(cls, raw: object) -> "Settings":
        """Tolerant: a bad value falls back to its default and is logged, never raised."""
        if not isinstance(raw, dict):
            return cls()
        if isinstance(raw.get(SECTION), dict):  # some clients send the whole settings tree
            raw = raw[SECTION]
        values = {}
        for setting in EDITOR:
            given = _lookup(raw, setting.editor_key)
            value, ok = setting.check(given, lenient=True)
            if not ok and setting.strict and isinstance(given, str):  # refused where it is used, not replaced
                log.warning("%s.%s %r must be %s", SECTION, setting.editor_key, given, setting.expected())
                values[setting.key] = given.strip().lower()
            elif not ok:
                log.warning("%s.%s %r must be %s; ignored", SECTION, setting.editor_key, given, setting.expected())
            elif value is not None:
                values[setting.key] = value
        return cls(values)


def _lookup(raw: dict, key: str) -> Any:
    """`fetch.allowPrivateNetworks` as a nested table (VS Code, Neovim) or a dotted key."""
    if key in raw:
        return raw[key]
    table, _, name = key.partition(".")
    inner = raw.get(table)
    return inner.get(name) if name and isinstance(inner, dict) else None
