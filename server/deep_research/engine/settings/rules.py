"""The research's own rules: promises the prompt makes that execution keeps.

The rows of the settings table (`engine/settings/table.py::SETTINGS`) marked `rule`: the longest
report in words (`report_max_words`, seed 000's "maximum 3 pages") and the budgets of a
research that converges (`max_breadth`, `max_depth`, `max_criteria`, `rounds_per_problem`).
They live in the research's `deep-research.toml` beside its other settings, and the engine
reads them itself, with the rest of the file (`settings.read`, through the file cache):
every way of running a message (the command line, the language server, the autopilot, an
MCP agent) then applies the same limits, and a change to the file is seen on the next read
(an analysis kept by an editor notes the file as read). An editor's settings or `run`'s
options may override them (`Research.rule_overrides`). `Research.config_problems()` says
what is wrong in the file; a value that is not usable is the default.
"""

from __future__ import annotations

from dataclasses import field, make_dataclass

from .table import FIELDS, RULES

DEFAULT_REPORT_MAX_WORDS = FIELDS["report_max_words"].default  # about three pages
MIN_REPORT_MAX_WORDS = FIELDS["report_max_words"].minimum
DEFAULT_PART_CHARS = FIELDS["part_chars"].default  # what NAME#N means unless the research sets it (engine/retrieval/parts.py)

Rules = make_dataclass("Rules", [(s.key, int, field(default=s.default)) for s in RULES], frozen=True)
Rules.__doc__ = "The research's rules, one attribute per rule of the settings table (their defaults if not set)."


def rules_of(config) -> Rules:  # type: ignore[no-untyped-def]
    """The rules of a research's settings (`settings.Config`)."""
    return Rules(**{s.key: getattr(config, s.name) for s in RULES})
