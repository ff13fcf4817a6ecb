"""The markdown files: what the engine writes reads back the same (round trips), and what
a person writes by hand reads back sensibly (tolerant reading)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from deep_research.engine.core.state import State, Status, Phase
from deep_research.engine.tree import formats
from deep_research.engine.tree.model import Attachment, Criterion, Problem

# -- round trips -------------------------------------------------------------------------------------------------

TITLES = [
    "Plain title", "Title: with a colon", '"Quoted" title', "# Hash first", "---", "Ünïcödé 日本語 🧩",
    "  spaced  ", "a\\b", "status: done", "x" * 300,
]
DEFINITIONS = [
    "", "One line.", "Para 1.\n\nPara 2.", "# A heading inside\ntext", "---\nlooks: like front matter\n---\nbody",
    "```\ncode\n```", "Trailing spaces   ", "\n\nLeading blank lines",
]


@pytest.mark.parametrize("title", TITLES)
@pytest.mark.parametrize("definition", DEFINITIONS)
@pytest.mark.parametrize("status", list(Status))
def test_definition_round_trip(title: str, definition: str, status: Status) -> None:
    problem = Problem(("x",), title.strip(), definition, status, order=7, created="2025-01-02T03:04:05+00:00")
    back = formats.parse_definition(formats.render_definition(problem), ("x",), "fallback")
    assert (back.title, back.definition, back.status, back.order, back.created) == (
        title.strip(), definition.strip(), status, 7, "2025-01-02T03:04:05+00:00",
    )


CRITERIA_LISTS = [
    [],
    [Criterion("Cites three sources")],
    [Criterion("Done one", True), Criterion("Open one", False), Criterion("Another done", True)],
    [Criterion("Mentions [x] in its text"), Criterion("2. starts with a number"), Criterion("- [ ] nested box")],
    [Criterion("Ünïcödé ✓ criterion")],
]


@pytest.mark.parametrize("criteria", CRITERIA_LISTS)
def test_criteria_round_trip(criteria: list[Criterion]) -> None:
    assert formats.parse_criteria(formats.render_criteria(criteria)) == criteria


ATTACHMENTS = [
    Attachment("https://example.org/a?b=c&d", "Body", "2025-01-02T03:04:05+00:00"),
    Attachment('Name with "quotes" and: colon', "Line 1\n\nLine 3", "t"),
    Attachment("front", "---\nname: fake\n---\nThe content starts with front matter", "t"),
    Attachment("blank start", "\n\nstarts after blank lines", "t"),
    Attachment("empty", "", "t"),
    Attachment("Ünïcödé 🧩", "contenu ✓", "t"),
]


@pytest.mark.parametrize("attachment", ATTACHMENTS, ids=lambda a: a.name)
def test_attachment_round_trip(attachment: Attachment) -> None:
    assert formats.parse_attachment(formats.render_attachment(attachment), "fallback") == attachment
    attached = attachment.attached()  # as attached: with the cutting its parts are made by (`cuts: 2`)
    written = formats.render_attachment(attached)
    assert "\ncuts: 2\n---\n" in written and formats.parse_attachment(written, "fallback") == attached


def test_an_attachment_file_that_records_no_cutting_was_cut_by_the_first() -> None:
    """Attached before issue 46: its parts are version 1's, as citations already written name them,
    and a copy of it (define_problem's of the pending attachments) keeps them."""
    old = "---\nname: Old\nadded: t\n---\n\nText of an old attachment.\n"
    found = formats.parse_attachment(old, "fallback")
    assert found.cuts == "" and found.reading.cuts == 1 and formats.render_attachment(found) == old
    assert found.copied()["cuts"] == "1" and found.attached().reading.cuts == 1 + 1


line_text = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=40).map(
    lambda t: " ".join(t.split())
).filter(bool)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(line_text, st.booleans()), max_size=8))
def test_criteria_round_trip_property(items: list[tuple[str, bool]]) -> None:
    criteria = [Criterion(text, done) for text, done in items]
    assert formats.parse_criteria(formats.render_criteria(criteria)) == criteria


@settings(max_examples=200, deadline=None, database=None)
@given(title=line_text, definition=st.text(max_size=200))
@example(title="T", definition="page one\x0cpage two")  # a form feed, as pasted text has
def test_definition_round_trip_property(title: str, definition: str) -> None:
    problem = Problem((), title, definition)
    back = formats.parse_definition(formats.render_definition(problem), (), "fallback")
    assert (back.title, back.definition) == (title, definition.strip())


# -- tolerant reading of hand edits --------------------------------------------------------------------------------

HAND_CRITERIA = {
    # text a person wrote -> [(criterion, done)]
    "ticked by hand": ("- [x] 1. First\n- [ ] 2. Second\n", [("First", True), ("Second", False)]),
    "capital X": ("- [X] 1. First\n", [("First", True)]),
    "check mark": ("- [✓] First\n", [("First", True)]),
    "other bullets": ("* [x] Star\n+ [ ] Plus\n", [("Star", True), ("Plus", False)]),
    "no numbers": ("- [ ] One\n- [ ] Two\n", [("One", False), ("Two", False)]),
    "numbers renumbered by position": ("- [ ] 3. Was third\n- [ ] 1. Was first\n", [("Was third", False), ("Was first", False)]),
    "other number styles": ("- [ ] 1) Paren\n- [ ] 2: Colon\n", [("Paren", False), ("Colon", False)]),
    "empty box without space": ("- [] Empty box\n", [("Empty box", False)]),
    "indented": ("   - [x] Indented\n", [("Indented", True)]),
    "prose and headings are not criteria": ("# Criteria\n\nSome notes.\n- [ ] Real one\n", [("Real one", False)]),
    "a plain list item is an open criterion": ("- plain bullet\n1. numbered\n2) paren\n", [
        ("plain bullet", False), ("numbered", False), ("paren", False)]),
    "empty criterion ignored": ("- [ ] \n- [x]\n- [ ] Kept\n", [("Kept", False)]),
    "CRLF": ("- [x] 1. First\r\n- [ ] 2. Second\r\n", [("First", True), ("Second", False)]),
    "empty file": ("", []),
}


@pytest.mark.parametrize("text, expected", HAND_CRITERIA.values(), ids=HAND_CRITERIA.keys())
def test_criteria_written_by_hand(text: str, expected: list[tuple[str, bool]]) -> None:
    assert [(c.text, c.done) for c in formats.parse_criteria(text)] == expected


HAND_DEFINITIONS = {
    # text -> (title, definition, status)
    "no front matter": ("# My title\n\nThe body.\n", ("My title", "The body.", Status.OPEN)),
    "no heading either": ("Just a body.\nTwo lines.", ("folder name", "Just a body.\nTwo lines.", Status.OPEN)),
    "empty file": ("", ("folder name", "", Status.OPEN)),
    "unknown status": ("---\nstatus: paused\n---\n# T\n", ("T", "", Status.OPEN)),
    "status in capitals": ("---\nstatus: DONE\n---\n# T\nB", ("T", "B", Status.DONE)),
    "bad order": ("---\norder: first\n---\n# T\n", ("T", "", Status.OPEN)),
    "unterminated front matter": ("---\nstatus: done\n# T\n", ("folder name", "---\nstatus: done\n# T", Status.OPEN)),
    "CRLF": ("---\r\nstatus: done\r\n---\r\n\r\n# T\r\n\r\nBody\r\n", ("T", "Body", Status.DONE)),
    "edited body keeps heading-like lines": ("# T\n\n## Scope\nOnly x86.", ("T", "## Scope\nOnly x86.", Status.OPEN)),
    "empty heading": ("# \nBody", ("folder name", "Body", Status.OPEN)),
}


@pytest.mark.parametrize("text, expected", HAND_DEFINITIONS.values(), ids=HAND_DEFINITIONS.keys())
def test_definition_written_by_hand(text: str, expected: tuple[str, str, Status]) -> None:
    problem = formats.parse_definition(text, ("folder name",), "folder name")
    assert (problem.title, problem.definition, problem.status) == expected


def test_attachment_without_front_matter_is_named_after_its_file() -> None:
    attachment = formats.parse_attachment("Pasted by hand.\n", "my notes")
    assert (attachment.name, attachment.content) == ("my notes", "Pasted by hand.")


def test_breakdown_lists_children_with_counts_and_status() -> None:
    children = [
        Problem(("a",), "Alpha", "Def A", Status.DONE, [Criterion("c", True)]),
        Problem(("b",), "Beta", "", Status.FAILED, [Criterion("c"), Criterion("d", True)]),
    ]
    assert formats.render_breakdown(children) == (
        "# Breakdown Structure\n\n"
        "## 1. Alpha [1/1 criteria met] (done)\n\nDef A\n\n"
        "## 2. Beta [1/2 criteria met] (failed)\n"
    )
    assert "_No subproblems yet._" in formats.render_breakdown([])


STATES = {
    "garbage": ("not json", State(phase=Phase.NO_PROBLEM)),
    "a list": ("[1, 2]", State(phase=Phase.NO_PROBLEM)),
    "unknown phase": ('{"phase": "dancing", "focus": ["a"], "session": 3}', State(phase=Phase.NO_PROBLEM, focus=("a",), session=3)),
    "bad focus": ('{"phase": "in_focus", "focus": "a/b", "session": 0}', State(phase=Phase.IN_FOCUS)),
    "negative messages": ('{"phase": "in_focus", "messages": -4}', State(phase=Phase.IN_FOCUS)),
}


@pytest.mark.parametrize("text, expected", STATES.values(), ids=STATES.keys())
def test_state_reads_tolerantly(text: str, expected: State) -> None:
    state = State.from_json(text)
    assert (state.phase, state.focus, state.session, state.messages) == (
        expected.phase, expected.focus, expected.session, expected.messages,
    )


def test_state_round_trip() -> None:
    state = State(phase=Phase.IN_FOCUS, focus=("a", "b c"), session=4, messages=9, created="c")
    assert State.from_json(state.to_json()) == state


def test_definition_keeps_unusual_separators() -> None:
    """Form feeds and Unicode line separators (common in pasted text) are not line breaks
    in a definition: they must come back unchanged, not turned into newlines."""
    definition = "Page one\x0cpage two; copied\u2028from a web page\x1eend"
    back = formats.parse_definition(formats.render_definition(Problem((), "T", definition)), (), "f")
    assert back.definition == definition


def test_lines_that_are_not_criteria_are_kept_where_they_were() -> None:
    """Issue 25: a note written by hand in the criteria file survives the next rewrite."""
    text = ("# Criteria of Definition of Done\n\nRead these first.\n- [ ] 1. One\n  (the hard one)\n- [x] 2. Two\n"
            "- [ ] \nLast words.\n")
    read = formats.read_criteria(text)
    assert [c.text for c in read.criteria] == ["One", "Two"]
    assert read.notes == ((0, "Read these first."), (1, "  (the hard one)"), (2, "- [ ] "), (2, "Last words."))
    written = formats.render_criteria(list(read.criteria) + [formats.Criterion("Three")], read.notes)
    assert written == ("# Criteria of Definition of Done\n\nRead these first.\n- [ ] 1. One\n  (the hard one)\n"
                       "- [x] 2. Two\n- [ ] \nLast words.\n- [ ] 3. Three\n")
    assert formats.read_criteria(written).notes == read.notes


def test_front_matter_lines_the_engine_does_not_use_are_kept() -> None:
    text = "---\nstatus: open\ntags: cache, tiles\norder: 2\njust a line\n---\n\n# T\n\nBody.\n"
    problem = formats.parse_definition(text, ("T",), "T")
    assert problem.extra_meta == ("tags: cache, tiles", "just a line")
    written = formats.render_definition(problem)
    assert "tags: cache, tiles\njust a line\n---" in written and "status: open" in written
    assert formats.parse_definition(written, ("T",), "T").extra_meta == problem.extra_meta


# -- the one-match readings of files as the engine writes them ------------------------------------------
#
# A criteria file or a report exactly as the engine writes it is read in one match (a whole-tree
# walk reads tens of thousands); anything else line by line. A trailing blank line, or a space
# after the front matter's `---`, changes nothing a file says but takes the long way: both ways
# must read the same.

criterion_line = st.one_of(
    st.builds(lambda mark, number, text: f"- [{mark}] {number}. {text}", st.sampled_from(["x", " ", "X", "✓", ""]),
              st.integers(0, 12), st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)),
    st.sampled_from(["", "_No criteria yet._", "a note", "- plain item", "1. numbered", "# heading", "  - [ ] 1. x"]),
)


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(criterion_line, max_size=6), st.booleans())
@example(["- [x] 1. One", "- [ ] 2. Two"], True)
@example(["- [x] 1. One", "- [ ] 3. Two"], True)
@example(["_No criteria yet._"], True)
@example(["- [ ] 1. trailing \r"], True)
def test_criteria_read_in_one_match_read_as_line_by_line(lines: list[str], heading: bool) -> None:
    text = ("# Criteria of Definition of Done\n\n" if heading else "") + "".join(line + "\n" for line in lines)
    assert formats.read_criteria(text) == formats.read_criteria(text + "\n")


@settings(max_examples=200, deadline=None, database=None)
@given(st.sampled_from(["2025-01-01", "2025-01-02T03:04:05+00:00", "", "x y"]),
       st.one_of(st.sampled_from(['{"definition": "a", "criteria": "b", "subproblems": {"A": null, "B": "c"}}',
                                  '{"definition": "a", "criteria": "b"}', '{"definition": 3}', "{", "{}"]),
                 st.text(max_size=30)),
       st.text(max_size=60))
@example("2025-01-01", '{"definition": "a", "criteria": "b", "subproblems": {}}', "Conclusion: yes.")
def test_reports_read_in_one_match_read_as_line_by_line(written: str, rests_on: str, body: str) -> None:
    text = f"---\nwritten: {written}\nrests_on: {rests_on}\n---\n\n{body}"
    assert formats.read_report(text) == formats.read_report("--- \n" + text[4:])


@settings(max_examples=300, deadline=None, database=None)
@given(st.sampled_from(["open", "done", "failed"]), st.integers(-3, 12),
       st.text(st.characters(blacklist_categories=("Cs",)), max_size=12), st.text(max_size=40))
@example("open", 1, "  ", "body")
@example("done", 2, "Title\r", "\n\nbody\r\n")
@example("failed", 0, "", "")
def test_definitions_read_in_one_match_read_as_line_by_line(status: str, order: int, title: str, body: str) -> None:
    text = f'---\nstatus: {status}\norder: {order}\ncreated: "2025-01-01T00:00:00+00:00"\n---\n\n# {title}\n{body}'
    assert formats.read_definition(text, ("x",), "fallback") == formats.read_definition(
        "--- \n" + text[4:], ("x",), "fallback")


@pytest.mark.parametrize("title", TITLES)
@pytest.mark.parametrize("definition", DEFINITIONS)
def test_definitions_the_engine_writes_are_what_the_one_match_reading_expects(title: str, definition: str) -> None:
    """If a `render_*` changes its output, its `_CANONICAL_*` reading must change with it; else
    every file takes the line-by-line reading (still right, but `check` loses its speed)."""
    problem = Problem(("x",), title.strip(), definition, Status.DONE, order=3, created="2025-01-02T03:04:05+00:00")
    assert formats._CANONICAL_DEFINITION.match(formats.render_definition(problem))


def test_criteria_and_reports_the_engine_writes_are_what_the_one_match_readings_expect() -> None:
    from deep_research.engine.core.state import now
    from deep_research.engine.tree.staleness import Basis

    criteria = [Criterion("Cites three sources", True), Criterion("Ünïcödé ✓ criterion")]
    assert formats._CANONICAL_CRITERIA.match(formats.render_criteria(criteria))
    assert formats._CANONICAL_CRITERIA.match(formats.render_criteria([]))
    report = formats.render_report("Conclusion: yes.", Basis("a", "b", {"A": None, "B": "c"}), now())  # as draft.py
    assert formats._CANONICAL_REPORT.match(report)
