"""The research's own rules: promises the prompt makes that execution keeps.

The rows of the settings table (`deep_research.config.SETTINGS`) marked `rule`: the longest
report in words (`report_max_words`, seed 000's "maximum 3 pages") and the budgets of a
research that converges (`max_breadth`, `max_depth`, `max_criteria`, `rounds_per_problem`).
They live in the research's `deep-research.toml` beside its other settings, and the engine
reads them itself, through the file cache: every way of running a message (the command line,
the language server, the autopilot, an MCP agent) then applies the same limits, and a change
to the file is seen on the next read (an analysis kept by an editor notes the file as read).
An editor's settings or `run`'s options may override them (`Research.rule_overrides`).
`deep_research.config` reports mistakes; here a value that is not usable is the default.
"""

from __future__ import annotations

from dataclasses import field, make_dataclass
from pathlib import Path

from ..config import FIELDS, RULES, parse_toml, read_table
from .store import CONFIG_FILE, FileCache

DEFAULT_REPORT_MAX_WORDS = FIELDS["report_max_words"].default  # about three pages
MIN_REPORT_MAX_WORDS = FIELDS["report_max_words"].minimum
DEFAULT_PART_CHARS = FIELDS["part_chars"].default  # what NAME#N means unless the research sets it (engine/parts.py)

Rules = make_dataclass("Rules", [(s.key, int, field(default=s.default)) for s in RULES], frozen=True)
Rules.__doc__ = "The research's rules, one attribute per rule of the settings table (their defaults if not set)."


def read_rules(root: Path, cache: FileCache) -> Rules:
    """The rules `root/deep-research.toml` sets; the defaults for what it does not (or for a
    file that cannot be read)."""
    return cache.read(root / CONFIG_FILE, _parse) or Rules()


def _parse(text: str) -> Rules:
    raw, _ = parse_toml(text=text)
    return Rules(**read_table(raw, None, CONFIG_FILE, settings=RULES))


def valid_report_max_words(value: object) -> bool:
    return FIELDS["report_max_words"].check(value)[0] is not None
