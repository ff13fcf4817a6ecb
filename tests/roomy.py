"""Budgets out of the way, for tests about something else (a research that grows past the
defaults of `max_breadth`, `max_depth`, `max_criteria`, `rounds_per_problem`)."""

from __future__ import annotations

from pathlib import Path

from deep_research.engine.settings.table import FIELDS
from deep_research.engine.store import CONFIG_FILE

BUDGETS = ("max_breadth", "max_depth", "max_criteria", "rounds_per_problem")
ROOMY = {key: FIELDS[key].maximum for key in BUDGETS}  # the most each budget may be
ROOMY_TOML = "".join(f"{key} = {value}\n" for key, value in ROOMY.items())


def roomy(root: Path) -> Path:
    """`root`'s deep-research.toml with the budgets at their maxima (its other keys kept)."""
    path = Path(root) / CONFIG_FILE
    kept = path.read_text(encoding="utf-8") if path.exists() else ""
    # again on the same research (a benchmark reusing its trees): a key given twice would not parse
    kept = "".join(line for line in kept.splitlines(keepends=True) if line.split("=")[0].strip() not in BUDGETS)
    # top-level keys must come before any [table]
    path.write_text(ROOMY_TOML + kept, encoding="utf-8")
    return path
