"""`deep-research check DIR` (issue 16): a research on disk linted, hand edits included; one
finding a line `path:line: message`; exit 0 clean, 1 findings, 2 not a research; nothing written."""

from __future__ import annotations

import json
from pathlib import Path

from deep_research.engine.research import Research

from dr_cli_support import snapshot

REPORT = "Summarized problem definition: tiles.\nQ1: Which size?\nA1: 32 [[Paper]].\nConclusion: 32."
STEPS = [
    "<<< define_problem\n///title\nTiling\n///content\nWhich tiles, as [[Paper]] asks?\n>>>\n",
    "<<< add_attachment\n///name\nPaper\n///content\nTiles fit L1.\n>>>\n///add_criteria One\n///add_criteria Two\n"
    "<<< add_subproblem\n///title\nCache\n///content\nL1?\n>>>\n<<< add_subproblem\n///title\nFlags\n///content\n-O3?\n>>>\n",
    "///focus_down Cache\n",
    f"<<< write_report\n///content\n{REPORT}\n>>>\n///focus_up\n",
    f"///mark_criteria_as_done 1\n///mark_criteria_as_done 2\n<<< write_report\n///content\n{REPORT}\n>>>\n",
]


def make(folder: Path) -> Path:
    research = Research.create(folder)
    for text in STEPS:
        result = research.execute(text)
        assert result.analysis is not None and not [o for o in result.analysis.outcomes if o.status.value != "ok"]
    return folder


def findings(output: str) -> list[tuple[str, int, str]]:
    out = []
    for line in output.splitlines():
        path, number, message = line.split(":", 2)
        out.append((path, int(number), message.strip()))
    return out


def test_a_clean_research(run, tmp_path: Path) -> None:
    folder = make(tmp_path / "r")
    result = run("check", "r", code=0)
    assert result.stdout == "" and "nothing found in r" in result.stderr
    assert folder.is_dir()


def hand_edited(folder: Path) -> Path:
    """A research with the mistakes people make by hand, one of each kind."""
    make(folder)
    sub = folder / "Subproblems"
    edit = lambda path, old, new: path.write_text(path.read_text(encoding="utf-8").replace(old, new, 1), encoding="utf-8")  # noqa: E731
    edit(sub / "Cache" / "Problem Definition.md", "status: done", "status: finished")
    edit(sub / "Flags" / "Problem Definition.md", "# Flags", "# cache")  # collides with "Cache"
    edit(folder / "Criteria of Definition of Done.md", "- [x] 2. Two", "- [x] 7. Two\n3) Three, no box\nA note by hand")
    edit(folder / "Report 3 Pager.md", "[[Paper]]", "[[Papr]]")
    edit(sub / "Cache" / "Report 3 Pager.md", "A1: 32", "A1: 64")  # the root's report is now stale
    (sub / "Lost").mkdir()  # a folder without a definition, missing from the breakdown
    (sub / "notes.txt").write_text("x", encoding="utf-8")
    (folder / "Attachments" / "Paper.md").write_text("---\nname: Paper\nbroken line\n---\nTiles.\n", encoding="utf-8")
    with open(folder / ".deep-research" / "journal.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"torn": ')
    state = json.loads((folder / ".deep-research" / "state.json").read_text(encoding="utf-8"))
    state["focus"] = ["Gone"]
    (folder / ".deep-research" / "state.json").write_text(json.dumps(state, indent=2), encoding="utf-8")
    return folder


def test_hand_edits_are_found_one_line_each(run, tmp_path: Path) -> None:
    folder = hand_edited(tmp_path / "r")
    before = snapshot(folder)
    result = run("check", "r", code=1)
    assert snapshot(folder) == before, "check writes nothing"
    found = findings(result.stdout)
    expected = [
        ("r/.deep-research/state.json", "the focus is on a problem that does not exist (Gone)"),
        ("r/.deep-research/journal.jsonl", "not a JSON record (a torn last line"),
        ("r/Problem Definition.md", None),  # none: [[Paper]] in the definition resolves
        ("r/Criteria of Definition of Done.md", "numbered 7, but it is criterion 2"),
        ("r/Criteria of Definition of Done.md", "this line is not a criterion, so the assistant does not see it"),
        ("r/Breakdown Structure.md", "the subproblem “Lost” is missing from the breakdown"),
        ("r/Breakdown Structure.md", "“Flags” is listed, but no subproblem folder has that title"),
        ("r/Report 3 Pager.md", "the report is out of date. Since this report was written, its criteria changed and the "
                                 "report of “Cache” changed."),
        ("r/Report 3 Pager.md", "[[Papr]] names no attachment of this problem or of its parents; did you mean [[Paper]]?"),
        ("r/Subproblems/notes.txt", "a file among the subproblems is not a subproblem"),
        ("r/Subproblems/Lost/Problem Definition.md", "has no Problem Definition.md"),
        ("r/Attachments/Paper.md", "this front matter line is not `key: value`"),
        ("r/Subproblems/Cache/Problem Definition.md", "unknown status “finished”: it is read as open"),
        ("r/Subproblems/Cache/Problem Definition.md", "the title “Cache” collides with its sibling “cache” (Flags)"),
        ("r/Subproblems/Flags/Problem Definition.md", "the title “cache” collides with its sibling “Cache” (Cache)"),
    ]
    for path, words in expected:
        hits = [f for f in found if f[0] == path and (words is None or words in f[2])]
        assert bool(hits) == (words is not None), (path, words, result.stdout)
    assert len(found) == len([e for e in expected if e[1]]), result.stdout
    assert all(number >= 1 for _, number, _ in found)
    lines = {(p, m.split(":")[0]): n for p, n, m in found}
    assert lines[("r/Criteria of Definition of Done.md", "numbered 7, but it is criterion 2")] == 4
    assert f"{len(found)} finding(s)" in result.stderr


def test_not_a_research(run, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    result = run("check", "plain", code=2)
    assert "plain is not a research" in result.stderr
    folder = make(tmp_path / "r")
    result = run("check", folder / "Subproblems" / "Cache", code=2)
    assert "inside the research in" in result.stderr
    assert run("check", "missing", code=2).stderr.strip() == "deep-research: missing: no such folder"


def test_an_interrupted_message_is_reported_not_finished(run, tmp_path: Path) -> None:
    folder = make(tmp_path / "r")
    pending = folder / ".deep-research" / "pending.json"
    pending.write_text('{"writes": {}, "appends": []}', encoding="utf-8")
    result = run("check", "r", code=1)
    assert "r/.deep-research/pending.json:1: a message was interrupted" in result.stdout
    assert pending.exists()


def test_fix_makes_the_safe_fixes_prints_them_and_removes_nothing_a_person_wrote(run, tmp_path: Path) -> None:
    """Issue 26: `check` said "it is generated, write it again" and nothing could; `--fix` makes the
    fixes an editor offers that cannot lose anything, generated files first, and prints each."""
    folder = hand_edited(tmp_path / "r")
    result = run("check", "r", "--fix", code=1)  # some findings need a person
    fixed = [line for line in result.stdout.splitlines() if ": fixed: " in line]
    assert "r/Subproblems/Cache/Problem Definition.md:2: fixed: Change the status to “done” (unknown status “finished”" \
        in "\n".join(fixed), fixed
    assert any(line.startswith("r/Criteria of Definition of Done.md:4: fixed: Renumber the criteria (numbered 7")
               for line in fixed), fixed
    assert any(line.startswith("r/Breakdown Structure.md:") and "Write the breakdown again" in line for line in fixed)
    criteria = (folder / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
    assert "- [x] 2. Two\n3) Three, no box" in criteria  # renumbered where it stands; the person's line kept
    assert "status: done" in (folder / "Subproblems" / "Cache" / "Problem Definition.md").read_text(encoding="utf-8")
    breakdown = (folder / "Breakdown Structure.md").read_text(encoding="utf-8")
    assert "## 1. Lost [0/0 criteria met] (open)" in breakdown and "## 2. Cache [0/0 criteria met] (done)" in breakdown
    assert "[[Papr]]" in (folder / "Report 3 Pager.md").read_text(encoding="utf-8")  # a guess: left to a person
    left = findings("\n".join(line for line in result.stdout.splitlines() if ": fixed: " not in line))
    assert not [f for f in left if "numbered" in f[2] or "unknown status" in f[2] or f[0].endswith("Breakdown Structure.md")]
    assert [f for f in left if "[[Papr]]" in f[2]] and [f for f in left if "this line is not a criterion" in f[2]]
    assert f"fixed {len(fixed)} finding(s); {len(left)} finding(s) left (they need a person)" in result.stderr
    # Fixed is fixed: a second run fixes nothing more, and plain check agrees with what is left.
    again = run("check", "r", "--fix", code=1)
    assert ": fixed: " not in again.stdout and "fixed 0 finding(s)" in again.stderr
    assert findings(run("check", "r", code=1).stdout) == left


def test_fix_on_a_clean_research_changes_nothing(run, tmp_path: Path) -> None:
    folder = make(tmp_path / "r")
    before = snapshot(folder)
    result = run("check", "r", "--fix", code=0)
    assert result.stdout == "" and "fixed 0 finding(s); nothing left in r" in result.stderr
    assert snapshot(folder) == before
