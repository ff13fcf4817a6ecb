"""The research's own rules: promises the prompt makes that execution keeps.

Today one: the longest report, in words (`report_max_words`, seed 000's "maximum 3 pages").
It lives in the research's `deep-research.toml` beside its other settings, and the engine
reads it itself, through the file cache: every way of running a message (the command line,
the language server, the autopilot, an MCP agent) then applies the same limit, and a change
to the file is seen on the next read (an analysis kept by an editor notes the file as read).
An editor's setting may override it (`Research.rule_overrides`). `deep_research.config`
validates the key and reports mistakes; here a value that is not usable is the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .store import CONFIG_FILE, FileCache

DEFAULT_REPORT_MAX_WORDS = 1500  # about three pages
MIN_REPORT_MAX_WORDS = 100


@dataclass(frozen=True)
class Rules:
    report_max_words: int = DEFAULT_REPORT_MAX_WORDS


def read_rules(root: Path, cache: FileCache) -> Rules:
    """The rules `root/deep-research.toml` sets; the defaults for what it does not (or for a
    file that cannot be read)."""
    return cache.read(root / CONFIG_FILE, _parse) or Rules()


def _parse(text: str) -> Rules:
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        raw = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return Rules()
    words = raw.get("report_max_words")
    if not valid_report_max_words(words):
        return Rules()
    return Rules(report_max_words=words)


def valid_report_max_words(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= MIN_REPORT_MAX_WORDS
