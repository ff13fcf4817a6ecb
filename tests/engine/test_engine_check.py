"""The lint behind `deep-research check` and the editor's diagnostics on the tree's files: its
safe fixes clear their findings, and no file content makes it (or tree, or the prompt) fail."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deep_research.engine.core.text import Edit, split_lines
from deep_research.engine.research import Research
from deep_research.engine.tree_view import render_outline, view
from deep_research.engine.views.check import check_file, check_research, tree_place

from dr_engine_support import BREAKDOWN, CRITERIA, DEFINITION, GOOD_REPORT, REPORT, attachment, line, ok, report


def apply(text: str, edits: tuple[Edit, ...]) -> str:
    lines = split_lines(text)
    for edit in sorted(edits, key=lambda e: e.span.start, reverse=True):
        start = sum(len(line) + 1 for line in lines[:edit.span.start.line]) + edit.span.start.col
        end = sum(len(line) + 1 for line in lines[:edit.span.end.line]) + edit.span.end.col
        text = text[:start] + edit.new_text + text[end:]
        lines = split_lines(text)
    return text


def fixed(research: Research, path: Path, text: str, words: str) -> str:
    """`text` after the first fix of the finding that says `words`, checked to clear it."""
    [finding] = [f for f in check_file(research, path, text) if words in f.message]
    after = apply(text, finding.fixes[0].edits)
    assert not [f for f in check_file(research, path, after) if words in f.message], after
    return after


def test_the_safe_fixes_clear_their_findings(research: Research, root: Path) -> None:
    definition = root / "Subproblems" / "Sub A" / DEFINITION
    text = definition.read_text(encoding="utf-8").replace("status: open", "status: Finished")
    assert "status: done" in fixed(research, definition, text, "unknown status")
    criteria = root / CRITERIA
    text = criteria.read_text(encoding="utf-8").replace("2. Second", "5. Second")
    assert "- [ ] 2. Second criterion" in fixed(research, criteria, text, "numbered 5")
    breakdown = root / "Breakdown Structure.md"
    text = breakdown.read_text(encoding="utf-8").replace("Sub B", "Sub Z")
    assert "Sub B" in fixed(research, breakdown, text, "no subproblem folder has that title")
    ok(research, attachment("Paper", "x") + report())
    report_file = root / REPORT
    text = report_file.read_text(encoding="utf-8").replace("A1: Cache misses.", "A1: Cache misses [[papr]].")
    assert "[[Paper]]" in fixed(research, report_file, text, "[[papr]] names no attachment")


def test_an_open_buffer_is_checked_as_it_reads(research: Research, root: Path) -> None:
    """The editor's unsaved text, not the file, is what is checked."""
    definition = root / DEFINITION
    assert check_file(research, definition, definition.read_text(encoding="utf-8")) == []
    unsaved = definition.read_text(encoding="utf-8").replace("status: open", "status: maybe")
    assert [f.line for f in check_file(research, definition, unsaved)] == [2]


def test_which_files_are_the_trees(root: Path) -> None:
    assert tree_place(root, root / DEFINITION) == ((), DEFINITION)
    assert tree_place(root, root / "Subproblems" / "A" / "Subproblems" / "B" / REPORT) == (("A", "B"), REPORT)
    assert tree_place(root, root / "Subproblems" / "A" / "Attachments" / "n.md") == (("A",), "Attachments")
    for other in (root / "notes.md", root / "Subproblems" / REPORT, root / ".deep-research" / "prompt.md",
                  root.parent / DEFINITION, root / "Attachments" / "x.txt"):
        assert tree_place(root, other) is None, other


HOSTILE = st.one_of(
    st.text(max_size=300),
    st.sampled_from([
        "---\n", "---\nstatus: ???\norder: x\n---\n# \n", "---\nrests_on: {\"definition\": 3}\n---\n[[",
        "- [ ] 99999999999999999999. x\n- [\n* [xx] y", "## 1. X [1/2 criteria met] (open)\n## 1. X [1/2 criteria met] (open)",
        "\x00\ufeff[[a|b]] ```\n[[c]]", "\r\n---\r\nname: \"\\ud800\"\r\n---\r\n",
    ]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(definition=HOSTILE, criteria=HOSTILE, breakdown=HOSTILE, report_text=HOSTILE, state=HOSTILE, journal=HOSTILE)
def test_no_file_content_crashes_check_tree_or_the_prompt(
    research: Research, root: Path, definition: str, criteria: str, breakdown: str, report_text: str, state: str,
    journal: str,
) -> None:
    sub = root / "Subproblems" / "Sub A"
    contents = {sub / DEFINITION: definition, root / CRITERIA: criteria, root / "Breakdown Structure.md": breakdown,
                sub / REPORT: report_text, root / REPORT: report_text, root / ".deep-research" / "state.json": state,
                root / ".deep-research" / "journal.jsonl": journal}
    for path, text in contents.items():
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    fresh = Research(root)
    for finding in check_research(fresh):
        assert finding.message and finding.line >= 1
    render_outline(fresh)
    view(fresh)
    assert fresh.prompt().startswith("# Deep Research Interface")


# -- the walk's shortcuts say what the whole check says ------------------------------------------------
#
# `check` reads a file as the engine wrote it in one match, and looks no further at what the
# reading found fine (that keeps it near the cost of reading the files on a 100,000-problem
# tree). These two tests hold the shortcuts to the long way: the same files in a form written
# by hand, and each file checked alone (as an editor checks an open file), say the same.


def _a_research_with_something_to_say(research: Research, root: Path) -> None:
    """A clash of titles, criteria over budget, a stale report, one over the word limit, a
    citation of nothing, leaves with empty breakdowns, and plain files all around."""
    long_report = GOOD_REPORT + "\n" + " ".join(["word"] * 150)
    ok(research, attachment("Paper", "x") + line("focus_down", "Sub A"))
    ok(research, report() + line("focus_up"))
    ok(research, line("focus_down", "Sub B"))
    ok(research, report(long_report) + line("focus_up"))
    (root / "deep-research.toml").write_text("max_criteria = 1\nmax_breadth = 1\nreport_max_words = 100\n",
                                             encoding="utf-8")
    sub_a = root / "Subproblems" / "Sub A"
    definition = sub_a / DEFINITION
    definition.write_text(definition.read_text(encoding="utf-8") + "\nOne more sentence.\n", encoding="utf-8")
    sub_b = root / "Subproblems" / "Sub B" / DEFINITION
    sub_b.write_text(sub_b.read_text(encoding="utf-8").replace("# Sub B", "# sub  A"), encoding="utf-8")
    (sub_a / REPORT).write_text((sub_a / REPORT).read_text(encoding="utf-8").replace("L1.", "L1 [[Papr]]."),
                                encoding="utf-8")


def _said(research: Research, root: Path) -> set[tuple[str, int, str]]:
    return {(f.path.relative_to(root).as_posix(), f.line, f.message) for f in check_research(Research(root))}


def test_check_says_the_same_of_files_as_written_and_as_a_person_would_write_them(
        research: Research, root: Path) -> None:
    _a_research_with_something_to_say(research, root)
    written = _said(research, root)
    messages = " | ".join(m for _, _, m in written)
    for words in ("collides with its sibling", "over the research's budget of 1 (max_criteria)", "out of date",
                  "over the limit of", "[[Papr]] names no attachment", "(max_breadth)"):
        assert words in messages, (words, messages)
    by_hand = 0
    for path in root.rglob("*.md"):  # the same meaning, not the engine's exact bytes
        text = path.read_text(encoding="utf-8")
        if path.name in (CRITERIA, BREAKDOWN):
            changed = text + "\n"
        elif path.name in (DEFINITION, REPORT) and text.startswith("---\n"):
            changed = "--- \n" + text[4:]
        else:
            continue
        path.write_text(changed, encoding="utf-8")
        by_hand += 1
    assert by_hand >= 10
    assert _said(research, root) == written


def test_each_file_alone_gets_what_the_whole_check_says_of_it(research: Research, root: Path) -> None:
    _a_research_with_something_to_say(research, root)
    walked: dict[str, set[tuple[int, str]]] = {}
    for finding in check_research(Research(root)):
        walked.setdefault(finding.path.relative_to(root).as_posix(), set()).add((finding.line, finding.message))
    fresh = Research(root)
    for path in root.rglob("*.md"):
        if path.name not in (DEFINITION, CRITERIA, BREAKDOWN, REPORT):
            continue
        alone = {(f.line, f.message) for f in check_file(fresh, path, path.read_text(encoding="utf-8"))}
        assert alone == walked.get(path.relative_to(root).as_posix(), set()), path


def test_two_attachments_of_one_name_are_found_and_both_defined_from_pending(research: Research, root: Path) -> None:
    """The engine keeps names apart; a copy or a hand edit may not, and then `read`, `find` and
    citations reach one of the two: `check` says so. A research made before names were kept
    apart has such twins waiting for the problem: defining it keeps both, each by a name."""
    folder = root / "Attachments"
    folder.mkdir(exist_ok=True)
    (folder / "notes.md").write_text("---\nname: Notes\n---\n\nFirst.\n", encoding="utf-8")
    (folder / "notes copy.md").write_text("---\nname: notes\n---\n\nSecond.\n", encoding="utf-8")
    [finding] = [f for f in check_research(research) if "as notes" in f.message or "as notes copy" in f.message]
    assert "`read`, `find` and citations reach only one of them" in finding.message
    (folder / "notes copy.md").write_text("---\nname: Notes, second\n---\n\nSecond.\n", encoding="utf-8")
    assert not [f for f in check_research(research) if "reach only one" in f.message]

    fresh_root = root.parent / "fresh"
    made = Research.create(fresh_root, "Twins.", attachments=[("Paper", "One.")])
    pending = fresh_root / ".deep-research" / "pending-attachments"
    (pending / "Paper copy.md").write_text("---\nname: Paper\n---\n\nTwo.\n", encoding="utf-8")
    made.execute("<<< define_problem\n///title T\n///content C\n>>>\n")
    names = sorted(a.name for a in made.tree.attachments(()))
    assert names == ["Paper", "Paper (2)"]
