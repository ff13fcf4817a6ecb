"""`deep-research check --fix`: the safe fixes of `check`, made.

The fixes are `lint`'s own (`Finding.fixes`, the same an editor offers as quick fixes on the
tree's open markdown files); only those a finding marks `safe` are made: a generated file
written again, criteria renumbered where their numbers stand, a status word whose meaning
is known. Nothing a person wrote is removed. Generated files come first in each pass, and
the passes repeat (at most `PASSES`) because one fix can make another (a status corrected
changes its parent's breakdown). Each pass is one transaction under the research's lock,
so a crash leaves every file old or new.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ..core.text import Edit, Fix, apply_edits
from ..store import BREAKDOWN, Transaction, locked, read_text, recover
from .check import Finding, check_research

PASSES = 3


@dataclass(frozen=True)
class Fixed:
    """A finding and the fix that cleared it."""

    finding: Finding
    fix: Fix


def fix_research(research) -> list[Fixed]:  # research: engine.research.Research
    """Make every safe fix `check_research` finds, until none is left; what was fixed."""
    done: list[Fixed] = []
    with locked(research.root):
        recover(research.root, research.cache)
        for _ in range(PASSES):
            made = [m for m in _one_pass(research) if m.finding not in {d.finding for d in done}]
            if not made:
                break
            done += made
    return done


def _one_pass(research) -> list[Fixed]:
    by_file: dict[Path, list[Finding]] = defaultdict(list)
    for finding in check_research(research):
        if finding.safe and finding.fixes:
            by_file[finding.path].append(finding)
    if not by_file:
        return []
    tx = Transaction(research.root, durable=research.durable)
    made = []
    for path in sorted(by_file, key=lambda p: (p.name != BREAKDOWN, str(p))):  # generated files first
        text = read_text(path)
        if text is None:
            continue
        edits: list[Edit] = []
        for finding in by_file[path]:
            fix = finding.fixes[0]
            if not all(e in edits for e in fix.edits):  # one fix may clear several findings
                if any(_overlap(e, other) for e in fix.edits for other in edits):
                    continue  # the next pass sees it again, on the text this one leaves
                edits += fix.edits
            made.append(Fixed(finding, fix))
        tx.write(path, apply_edits(text, edits))
    tx.commit(research.cache)
    return made


def _overlap(a: Edit, b: Edit) -> bool:
    return a.span.start < b.span.end and b.span.start < a.span.end or a.span == b.span
