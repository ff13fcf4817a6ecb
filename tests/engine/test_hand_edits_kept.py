"""Hand edits are never lost in silence (issue 25): a line the engine rewrites a file around is
either read for what it means or kept where it was, and `check` says which."""

from __future__ import annotations

from pathlib import Path

from deep_research.engine.research import Research
from deep_research.engine.views.check import check_research

from dr_engine_support import CRITERIA, DEFINITION, line, ok, read, report, sub


def test_a_hand_written_criterion_and_a_note_survive_the_next_rewrite(research: Research, root: Path) -> None:
    criteria = root / CRITERIA
    criteria.write_text(read(root, CRITERIA) + "- Cites a benchmark\nAsk Ada before closing this.\n", encoding="utf-8")
    prompt = research.prompt()
    assert "3. [ ] Cites a benchmark" in prompt  # read for what it means: an open criterion
    findings = [f.message for f in check_research(research) if f.path == criteria]
    assert findings == ["this line is not a criterion, so the assistant does not see it; it is kept as it is when "
                        "the criteria are written again. To make it a criterion, write it as `- [ ] text`"]
    ok(research, line("add_criteria", "Names a tile size") + line("mark_criteria_as_done", "3"))
    assert read(root, CRITERIA).endswith("- [x] 3. Cites a benchmark\nAsk Ada before closing this.\n"
                                         "- [ ] 4. Names a tile size\n")


def test_front_matter_a_person_added_survives_a_status_change(research: Research, root: Path) -> None:
    definition = root / sub("Sub A") / DEFINITION
    definition.write_text(read(root, sub("Sub A"), DEFINITION).replace("---\n\n", "owner: Ada\n---\n\n", 1),
                          encoding="utf-8")
    ok(research, line("focus_down", "Sub A"))
    ok(research, report() + line("focus_up"))  # the status becomes done: the file is written again
    text = read(root, sub("Sub A"), DEFINITION)
    assert "status: done" in text and "owner: Ada\n---" in text
