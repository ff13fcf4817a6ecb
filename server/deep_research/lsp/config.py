"""The server's settings: section `deepResearch`, read with `workspace/configuration`."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.commands import ApprovalMode

MIN_REPORT_MAX_WORDS = 100  # engine/rules.py's (checked by a test; not imported before `initialize`)
SECTION = "deepResearch"
MODES = ("none", "read", "create", "update", "delete")  # checked against ApprovalMode by a test
DEFAULT_MODE = "update"
log = logging.getLogger("deep_research.lsp")


SEARCH_PROVIDERS = ("searxng", "tavily", "brave")  # checked against deep_research.config by a test


@dataclass(frozen=True)
class Settings:
    approval: str = DEFAULT_MODE  # a label of ApprovalMode
    execute_on_save: bool = False  # execute on didSave, for clients that cannot run code actions on save
    show_prompt: bool = True  # open the prompt with window/showDocument after each execution
    # These override the research's deep-research.toml when set; None leaves the file's value.
    allow_private_networks: bool | None = None  # fetch.allowPrivateNetworks
    search_provider: str | None = None  # search.provider
    search_url: str | None = None  # search.url
    # The autopilot's (SPEC §10 names, camelCase in the editor); None leaves the file's value.
    model: str | None = None
    base_url: str | None = None
    max_rounds: int | None = None
    max_tokens: int | None = None
    max_prompt_tokens: int | None = None
    grammar: str | None = None  # auto | on | off
    parallel: int | None = None  # researchers at once
    # The research's rules (engine/rules.py); None leaves deep-research.toml's.
    report_max_words: int | None = None  # reportMaxWords

    def rule_overrides(self) -> dict:
        """For `Research.rule_overrides`: the rules these settings set."""
        return {} if self.report_max_words is None else {"report_max_words": self.report_max_words}

    def overrides(self) -> dict:
        """For `Config.merged`: the editor's settings beat the research's file."""
        return {
            "model": self.model, "base_url": self.base_url, "max_rounds": self.max_rounds,
            "max_tokens": self.max_tokens, "max_prompt_tokens": self.max_prompt_tokens, "grammar": self.grammar,
            "parallel": self.parallel, "report_max_words": self.report_max_words,
            "fetch": {"allow_private_networks": self.allow_private_networks},
            "search": {"provider": self.search_provider, "url": self.search_url},
        }

    @property
    def approval_mode(self) -> "ApprovalMode":
        # Imported here: the command table is not needed to answer `initialize`.
        from ..engine.commands import ApprovalMode

        return ApprovalMode.parse(self.approval)

    def describe(self) -> str:
        return (f"Settings: approvalMode={self.approval}, executeOnSave={self.execute_on_save}, "
                f"showPromptAfterExecute={self.show_prompt}, fetch.allowPrivateNetworks={self.allow_private_networks}, "
                f"search.provider={self.search_provider}, search.url={self.search_url}, model={self.model}, "
                f"baseUrl={self.base_url}, maxRounds={self.max_rounds}, maxTokens={self.max_tokens}, "
                f"maxPromptTokens={self.max_prompt_tokens}, grammar={self.grammar}, parallel={self.parallel}, "
                f"reportMaxWords={self.report_max_words}")

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
        fetch, search = _table(raw, "fetch"), _table(raw, "search")
        private = fetch.get("allowPrivateNetworks")
        provider = search.get("provider")
        provider = str(provider).strip().lower() if provider not in (None, "") else None
        if provider is not None and provider not in SEARCH_PROVIDERS:
            log.warning("deepResearch.search.provider %r is not one of %s; ignored", provider, ", ".join(SEARCH_PROVIDERS))
            provider = None
        url = search.get("url")
        return cls(
            approval=approval,
            execute_on_save=bool(raw.get("executeOnSave", False)),
            show_prompt=bool(raw.get("showPromptAfterExecute", True)),
            allow_private_networks=None if private is None else bool(private),
            search_provider=provider,
            search_url=str(url).strip() if isinstance(url, str) and url.strip() else None,
            model=_text(raw, "model"),
            base_url=_text(raw, "baseUrl"),
            max_rounds=_count(raw, "maxRounds", 1),
            max_tokens=_count(raw, "maxTokens", 1),
            max_prompt_tokens=_count(raw, "maxPromptTokens", 500),
            grammar=_choice(raw, "grammar", GRAMMARS),
            parallel=_count(raw, "parallel", 1),
            report_max_words=_count(raw, "reportMaxWords", MIN_REPORT_MAX_WORDS),
        )


GRAMMARS = ("auto", "on", "off")


def _text(raw: dict, key: str) -> str | None:
    value = raw.get(key)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _count(raw: dict, key: str, minimum: int) -> int | None:
    value = raw.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value < minimum:
        log.warning("deepResearch.%s %r is not a whole number ≥ %d; ignored", key, value, minimum)
        return None
    return int(value)


def _choice(raw: dict, key: str, choices: tuple[str, ...]) -> str | None:
    value = raw.get(key)
    if value in (None, ""):
        return None
    text = str(value).strip().lower()
    if text not in choices:
        log.warning("deepResearch.%s %r is not one of %s; ignored", key, value, ", ".join(choices))
        return None
    return text


def _table(raw: dict, name: str) -> dict:
    """`fetch` / `search` as a nested table (VS Code, Neovim) or dotted keys (`"fetch.allowPrivateNetworks"`)."""
    table = dict(raw[name]) if isinstance(raw.get(name), dict) else {}
    prefix = name + "."
    table.update({k[len(prefix):]: v for k, v in raw.items() if isinstance(k, str) and k.startswith(prefix)})
    return table
