"""Binding a parsed command to the command table: unknown names ("did you mean"), the
wrong form, missing/unknown/duplicate/empty sections, missing or unexpected arguments.
These checks need no research state.

Each case: the text, the diagnostics as "code line:col-line:col", words the first
diagnostic's message must contain, and the text after applying its first quick fix
(None when there is no mechanical fix)."""

from __future__ import annotations

import pytest

from deep_research.engine.language import commands
from deep_research.engine.language.binding import bind
from deep_research.engine.language.commands import Form
from deep_research.engine.language.parser import parse

from dr_engine_support import apply_edits, fmt


def check(text: str, diagnostics: list[str], words: list[str], fixed: str | None) -> None:
    binding = bind(parse(text).commands[0])
    assert [f"{d.code} {fmt(d.span)}" for d in binding.diagnostics] == diagnostics
    first = binding.diagnostics[0]
    for word in words:
        assert word in first.message, first.message
    if fixed is None:
        assert not first.fixes
    else:
        assert first.fixes, "expected a quick fix"
        assert apply_edits(text, first.fixes[0].edits) == fixed
    assert binding.args is None, "a command with an error cannot run"


CASES = {
    # -- unknown names --------------------------------------------------------------------------------
    "misspelt one-line command": (
        "///focus_dwn Sub A", ["unknown-command 0:3-0:12"], ["focus_dwn", "Did you mean `focus_down`?"],
        "///focus_down Sub A",
    ),
    "misspelt criteria command": (
        "///add_critera Cites sources", ["unknown-command 0:3-0:14"], ["Did you mean `add_criteria`?"],
        "///add_criteria Cites sources",
    ),
    "misspelt block command": (
        "<<< add_subproblm\n///title\nT\n///content\nC\n>>>", ["unknown-command 0:4-0:17"],
        ["Did you mean `add_subproblem`?"], "<<< add_subproblem\n///title\nT\n///content\nC\n>>>",
    ),
    "upper-case name": ("///FOCUS_UP", ["unknown-command 0:3-0:11"], ["Did you mean `focus_up`?"], "///focus_up"),
    "nothing close": ("///xyzzy", ["unknown-command 0:3-0:8"], ["Unknown command `xyzzy`", "`add_subproblem`", "`focus_up`"], None),
    # -- the wrong form --------------------------------------------------------------------------------
    "block command on one line": (
        "///add_subproblem Tiling", ["block-command-on-one-line 0:3-0:17"], ["block command", "<<< add_subproblem", ">>>"],
        "<<< add_subproblem\n///title\nTiling\n///content\nWhat this subproblem must answer.\n>>>",
    ),
    "block command on one line without argument": (
        "///write_report", ["block-command-on-one-line 0:3-0:15"], ["<<< write_report"],
        "<<< write_report\n///content\n" + commands.COMMANDS["write_report"].arguments[0].placeholder + "\n>>>",
    ),
    "no-argument command as a block": (
        "<<< focus_up\n>>>", ["line-command-as-block 0:4-0:12"], ["not a block command", "`///focus_up`"], "///focus_up",
    ),
    "one-line command as a block": (
        "<<< add_criteria\n///criteria\nCites sources\n>>>", ["line-command-as-block 0:4-0:16"],
        ["not a block command"], "///add_criteria Cites sources",
    ),
    # -- sections -----------------------------------------------------------------------------------------
    "missing section": (
        "<<< add_subproblem\n///title\nT\n>>>", ["missing-section 0:0-0:18"], ["missing its `///content` section"],
        "<<< add_subproblem\n///title\nT\n///content\nWhat this subproblem must answer.\n>>>",
    ),
    "no sections at all": (
        "<<< append_to_problem_definition\n>>>", ["missing-section 0:0-0:32"], ["`///content`"],
        "<<< append_to_problem_definition\n///content\nClarification of the problem.\n>>>",
    ),
    "misspelt section": (
        "<<< add_subproblem\n///titel\nT\n///content\nC\n>>>",
        ["unknown-section 1:3-1:8", "missing-section 0:0-0:18"], ["no section `///titel`", "Did you mean `///title`?"],
        "<<< add_subproblem\n///title\nT\n///content\nC\n>>>",
    ),
    "section of another command": (
        "<<< add_attachment\n///title\nT\n///content\nC\n>>>",
        ["unknown-section 1:3-1:8", "missing-section 0:0-0:18"], ["`///name` and `///content`"], None,
    ),
    "duplicate section": (
        "<<< add_subproblem\n///title\nT\n///content\nC\n///content\nD\n>>>", ["duplicate-section 5:0-5:10"],
        ["appears twice"], None,
    ),
    "empty section": (
        "<<< add_subproblem\n///title\n\n///content\nC\n>>>", ["empty-section 1:0-1:8"], ["`///title`", "empty"], None,
    ),
    "section holding only spaces": (
        "<<< write_report\n///content   \n   \n\t\n>>>", ["empty-section 1:0-1:13"], ["`///content`", "empty"], None,
    ),
    "one-line command inside a block": (
        "<<< add_subproblem\n///title\nT\n///content\nC\n///focus_up\n>>>", ["command-inside-block 5:3-5:11"],
        ["is a command", "Close the block"], "<<< add_subproblem\n///title\nT\n///content\nC\n>>>\n///focus_up\n>>>",
    ),
    # -- arguments ----------------------------------------------------------------------------------------
    "argument where none is taken": (
        "///focus_up now", ["unexpected-argument 0:12-0:15"], ["takes no argument"], "///focus_up",
    ),
    "missing criteria text": ("///add_criteria", ["missing-argument 0:3-0:15"], ["///add_criteria <criteria>"], None),
    "missing criteria number": ("///mark_criteria_as_done   ", ["missing-argument 0:3-0:24"], ["criterion number"], None),
    "missing subproblem title": ("///focus_down", ["missing-argument 0:3-0:13"], ["subproblem title"], None),
}


@pytest.mark.parametrize("text, diagnostics, words, fixed", CASES.values(), ids=CASES.keys())
def test_bind(text: str, diagnostics: list[str], words: list[str], fixed: str | None) -> None:
    check(text, diagnostics, words, fixed)


# -- what binds cleanly --------------------------------------------------------------------------------------

VALID = {
    "no argument": ("///focus_up", {}),
    "one-line argument": ("///mark_criteria_as_done 2", {"number": "2"}),
    "block": ("<<< add_subproblem\n///title\nTiling\n///content\nA\n\nB\n>>>", {"title": "Tiling", "content": "A\n\nB"}),
    "sections in any order": ("<<< add_attachment\n///content\nC\n///name\nN\n>>>", {"name": "N", "content": "C"}),
    "title lines are joined": (
        "<<< add_subproblem\n///title\nTiling\n  strategies\n///content\nC\n>>>",
        {"title": "Tiling strategies", "content": "C"},
    ),
    "tabs in a title become spaces": (
        "<<< add_subproblem\n///title\nA\tB\t C\n///content\nC\n>>>", {"title": "A B C", "content": "C"},
    ),
    "criteria of a subproblem is one line": (
        "<<< add_criteria_to_subproblem\n///title\nSub A\n///criteria\nIt cites\nsources\n>>>",
        {"title": "Sub A", "criteria": "It cites sources"},
    ),
}


@pytest.mark.parametrize("text, args", VALID.values(), ids=VALID.keys())
def test_binds(text: str, args: dict[str, str]) -> None:
    binding = bind(parse(text).commands[0])
    assert [d for d in binding.diagnostics if d.is_error] == []
    assert {k: a.value for k, a in (binding.args or {}).items()} == args


CONTROL = {  # issue 25: refused in every argument, with the character's place and a fix removing them
    "escape in a line argument": ("///add_criteria Cites \x1b[2J sources", "0:22-0:23", "U+001B (ESC)",
                                  "///add_criteria Cites [2J sources"),
    "NUL in a title": ("<<< add_subproblem\n///title\nA\x00B\n///content\nC\n>>>", "2:1-2:2", "U+0000 (NUL)",
                       "<<< add_subproblem\n///title\nAB\n///content\nC\n>>>"),
    "override in content, two more below": (
        "<<< add_attachment\n///name\nN\n///content\nab\u202ecd\n\x07\x9b\n>>>", "4:2-4:3",
        "3 control characters, the first U+202E (RIGHT-TO-LEFT OVERRIDE)",
        "<<< add_attachment\n///name\nN\n///content\nabcd\n\n>>>"),
    "window title in a reason": ("///fail_task_and_focus_up \x1b]0;pwned\x07", "0:26-0:27", "U+001B (ESC)",
                                 "///fail_task_and_focus_up ]0;pwned"),
}


@pytest.mark.parametrize("text, span, named, fixed", CONTROL.values(), ids=CONTROL.keys())
def test_control_characters_in_an_argument_are_refused(text: str, span: str, named: str, fixed: str) -> None:
    binding = bind(parse(text).commands[0])
    [found] = [d for d in binding.diagnostics if d.code == "control-character"]
    assert binding.args is None and found.is_error and fmt(found.span) == span
    assert named in found.message and "Remove them" in found.message
    assert apply_edits(text, found.fixes[0].edits) == fixed
    assert bind(parse(fixed).commands[0]).args is not None


def test_multi_line_title_is_a_warning_that_shows_the_result() -> None:
    binding = bind(parse("<<< add_subproblem\n///title\nTiling\nstrategies\n///content\nC\n>>>").commands[0])
    assert [(d.code, d.severity.name, fmt(d.span)) for d in binding.diagnostics] == [
        ("multi-line-title", "WARNING", "2:0-3:10")
    ]
    assert "'Tiling strategies'" in binding.diagnostics[0].message


@pytest.mark.parametrize("name", list(commands.COMMANDS))
def test_every_command_example_binds_cleanly(name: str) -> None:
    """The command table's own examples (shown in the prompt and hover) are valid."""
    spec = commands.COMMANDS[name]
    for text in (spec.example(), spec.usage().replace("<", "").replace(">", "") if spec.form is not Form.BLOCK else spec.example()):
        parsed = parse(text)
        assert parsed.diagnostics == []
        binding = bind(parsed.commands[0])
        assert binding.diagnostics == [] and binding.args is not None, (name, binding.diagnostics)
        assert binding.spec is spec


@pytest.mark.parametrize("section", ["title", "criteria"])
def test_section_outside_a_block_says_it_belongs_in_a_block(section: str) -> None:
    """`///title` on its own is a block section written outside its block (the user forgot
    `<<< add_subproblem`): the message should say so, not only list every command."""
    binding = bind(parse(f"///{section}\nTiling").commands[0])
    message = binding.diagnostics[0].message
    assert "section" in message and "<<<" in message, message
