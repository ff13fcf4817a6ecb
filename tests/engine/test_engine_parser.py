"""The message parser: commands, sections and spans, and the syntax diagnostics of
half-typed input. One `check` helper, one table; each case shows what the user wrote
and what the parser must see in it.

Commands are rendered compactly:
    focus_up                          a one-line command without argument
    add_criteria(The answer)          a one-line command with its argument
    add_subproblem{title=T|content=C} a block with its sections
    …!unclosed                        a block without its >>>
Diagnostics as "code line:col-line:col" (0-based, columns in code points).
"""

from __future__ import annotations

import pytest

from deep_research.engine.core.text import Severity, split_lines
from deep_research.engine.language.parser import Command, parse

from dr_engine_support import apply_edits, fmt, span_is_valid, span_text


def render(command: Command) -> str:
    name = command.name or "?"
    if command.is_block:
        body = "|".join(f"{s.name or '?'}={s.content}" for s in command.sections)
        return f"{name}{{{body}}}" + ("" if command.closed else "!unclosed")
    return name + (f"({command.argument})" if command.argument is not None else "")


def check(text: str, commands: list[str], diagnostics: list[str]) -> None:
    parsed = parse(text)
    assert [render(c) for c in parsed.commands] == commands
    assert [f"{d.code} {fmt(d.span)}" for d in parsed.diagnostics] == diagnostics
    lines = split_lines(text)
    for d in parsed.diagnostics:
        assert span_is_valid(lines, d.span)
        assert d.message.strip(), d.code


CASES = {
    # -- plain text and complete commands ----------------------------------------------------------
    "empty message": ("", [], []),
    "free text only": ("I think the answer is 42.\nLet me check.", [], []),
    "command without argument": ("///focus_up", ["focus_up"], []),
    "one-line argument is stripped": ("///add_criteria   The answer cites sources  ", ["add_criteria(The answer cites sources)"], []),
    "commands among free text": (
        "First some thinking.\n///add_criteria A\nmore thinking\n///focus_down Sub A\n",
        ["add_criteria(A)", "focus_down(Sub A)"], [],
    ),
    "complete block keeps inner blank lines": (
        "<<< add_subproblem\n///title\nTiling\n///content\nLine 1\n\nLine 3\n>>>",
        ["add_subproblem{title=Tiling|content=Line 1\n\nLine 3}"], [],
    ),
    "section text on the header line": (
        "<<< add_subproblem\n///title Tiling\n///content\nC\n>>>", ["add_subproblem{title=Tiling|content=C}"], [],
    ),
    "blank lines around content are trimmed": (
        "<<< write_report\n///content\n\n\nBody\n\n>>>", ["write_report{content=Body}"], [],
    ),
    "block name written without a space": ("<<<focus_up\n>>>", ["focus_up{}"], []),
    "closing line with spaces around it": ("<<< write_report\n///content\nR\n  >>>  ", ["write_report{content=R}"], []),
    "two blocks back to back": (
        "<<< add_attachment\n///name\nN\n///content\nC\n>>>\n<<< append_to_problem_definition\n///content\nD\n>>>",
        ["add_attachment{name=N|content=C}", "append_to_problem_definition{content=D}"], [],
    ),
    "escaped markers are literal text": (
        "\\///focus_up\n<<< add_attachment\n///name\nN\n///content\n\\>>>\n\\///x\n\\<<< y\n>>>",
        ["add_attachment{name=N|content=>>>\n///x\n<<< y}"], [],
    ),
    # -- half-typed input ------------------------------------------------------------------------------
    "unclosed block at the end": (
        "<<< add_subproblem\n///title\nT", ["add_subproblem{title=T}!unclosed"], ["unclosed-block 0:0-0:18"],
    ),
    "unclosed block just opened": ("<<< add_subproblem", ["add_subproblem{}!unclosed"], ["unclosed-block 0:0-0:18"]),
    "unclosed block before another block": (
        "<<< add_attachment\n///name\nN\n<<< add_subproblem\n///title\nT\n///content\nC\n>>>",
        ["add_attachment{name=N}!unclosed", "add_subproblem{title=T|content=C}"], ["unclosed-block 0:0-0:18"],
    ),
    "empty ///": ("///", [], ["empty-command 0:0-0:3"]),
    "/// followed by a space": ("/// focus_up", [], ["empty-command 0:0-0:12"]),
    "empty <<<": ("<<<\n>>>", ["?{}"], ["empty-block-name 0:0-0:3"]),
    "empty <<< never closed": ("<<<", ["?{}!unclosed"], ["empty-block-name 0:0-0:3", "unclosed-block 0:0-0:3"]),
    "empty section name in a block": (
        "<<< add_subproblem\n///\nx\n>>>", ["add_subproblem{?=x}"], ["empty-section-name 1:0-1:3"],
    ),
    # A section header outside a block parses as a (unknown) one-line command; the
    # command table's checks say what is wrong with it (see test_engine_binding.py).
    "section outside a block": ("///title\nTiling", ["title"], []),
    "stray >>>": ("text\n>>>\nmore", [], ["stray-close 1:0-1:3"]),
    "stray >>> with spaces": ("  >>>  ", [], ["stray-close 0:0-0:7"]),
    "indented one-line command": ("  ///focus_up", [], ["indented-command 0:0-0:13"]),
    "indented block is not a block": (
        "\t<<< add_subproblem\n///title\nT\n>>>", ["title"], ["indented-command 0:0-0:19", "stray-close 3:0-3:3"],
    ),
    "text before the first section": (
        "<<< add_subproblem\nstray words\n///title\nT\n///content\nC\n>>>",
        ["add_subproblem{title=T|content=C}"], ["text-before-section 1:0-1:11"],
    ),
    "text after the block name": (
        "<<< add_subproblem now\n///title\nT\n///content\nC\n>>>",
        ["add_subproblem{title=T|content=C}"], ["block-header-text 0:19-0:22"],
    ),
    # -- line endings and characters ------------------------------------------------------------------
    "CRLF line endings": (
        "///add_criteria A\r\n<<< add_subproblem\r\n///title\r\nT\r\n///content\r\nL1\r\nL2\r\n>>>\r\n",
        ["add_criteria(A)", "add_subproblem{title=T|content=L1\nL2}"], [],
    ),
    "CRLF unclosed block": ("<<< add_subproblem\r\n///title\r\nT\r\n", ["add_subproblem{title=T}!unclosed"], ["unclosed-block 0:0-0:18"]),
    "lone CR ends a line": ("///focus_up\r///add_criteria x", ["focus_up", "add_criteria(x)"], []),
    "vertical tab does not end a line": ("///add_criteria a\x0bb", ["add_criteria(a\x0bb)"], []),
    "columns count code points": ("///add_criteria 日本語 ✓", ["add_criteria(日本語 ✓)"], []),
}


@pytest.mark.parametrize("text, commands, diagnostics", CASES.values(), ids=CASES.keys())
def test_parse(text: str, commands: list[str], diagnostics: list[str]) -> None:
    check(text, commands, diagnostics)


# -- spans of what was parsed ------------------------------------------------------------------------


def test_spans_of_a_one_line_command() -> None:
    text = "intro\n///add_criteria  Cites sources "
    command = parse(text).commands[0]
    assert (fmt(command.header), fmt(command.name_span), fmt(command.argument_span), fmt(command.span)) == (
        "1:0-1:31", "1:3-1:15", "1:17-1:30", "1:0-1:31",
    )
    assert span_text(text, command.argument_span) == "Cites sources"


def test_spans_of_a_block() -> None:
    text = "<<< add_subproblem\n///title\nTiling\n///content\nLine 1\nLine 2\n>>>\nafter"
    command = parse(text).commands[0]
    title, content = command.sections
    assert fmt(command.span) == "0:0-6:3"
    assert fmt(command.name_span) == "0:4-0:18"
    assert (fmt(title.header), fmt(title.name_span), fmt(title.content_span)) == ("1:0-1:8", "1:3-1:8", "2:0-2:6")
    assert fmt(content.content_span) == "4:0-5:6"
    assert span_text(text, content.content_span) == "Line 1\nLine 2"


def test_spans_ignore_carriage_returns() -> None:
    text = "<<< add_subproblem\r\n///title\r\nTiling\r\n///content\r\nC\r\n>>>\r\n"
    command = parse(text).commands[0]
    assert fmt(command.span) == "0:0-5:3"
    assert span_text(text, command.sections[0].content_span) == "Tiling"
    assert "\r" not in command.sections[1].content


def test_empty_section_has_no_content_span() -> None:
    command = parse("<<< add_subproblem\n///title\n\n///content\nC\n>>>").commands[0]
    assert command.sections[0].content == "" and command.sections[0].content_span is None


def test_shutdown_is_found_anywhere() -> None:
    text = "please SHUT_DOWN_DEEP_RESEARCHER now\n<<< write_report\n///content\nSHUT_DOWN_DEEP_RESEARCHER\n>>>"
    parsed = parse(text)
    assert [fmt(s) for s in parsed.shutdowns] == ["0:7-0:32", "3:0-3:25"]
    assert [render(c) for c in parsed.commands] == ["write_report{content=SHUT_DOWN_DEEP_RESEARCHER}"]


def test_command_at_finds_the_command_under_the_cursor() -> None:
    parsed = parse("text\n<<< add_subproblem\n///title\nT\n>>>\n///focus_up")
    from deep_research.engine.core.text import Pos

    assert parsed.command_at(Pos(3, 0)).name == "add_subproblem"
    assert parsed.command_at(Pos(5, 4)).name == "focus_up"
    assert parsed.command_at(Pos(0, 1)) is None


# -- the messages and quick fixes the user sees ---------------------------------------------------------

FIXES = {
    # name: (text, diagnostic code, words the message must contain, the text after applying the fix)
    "unclosed block at the end": (
        "<<< add_subproblem\n///title\nT", "unclosed-block", ["add_subproblem", "not closed", ">>>", "end of the message"],
        "<<< add_subproblem\n///title\nT\n>>>",
    ),
    "unclosed block before another": (
        "<<< add_attachment\n///name\nN\n<<< write_report\n///content\nR\n>>>", "unclosed-block",
        ["add_attachment", "not closed", "before line 4"],
        "<<< add_attachment\n///name\nN\n>>>\n<<< write_report\n///content\nR\n>>>",
    ),
    "stray >>>": ("text\n>>>\nmore", "stray-close", ["no block is open"], "text\nmore"),
    "stray >>> on the last line": ("text\n>>>", "stray-close", ["no block is open"], "text"),
    "indented command": ("  ///focus_up", "indented-command", ["beginning of a line", "indentation"], "///focus_up"),
}


@pytest.mark.parametrize("text, code, words, fixed", FIXES.values(), ids=FIXES.keys())
def test_diagnostic_message_and_fix(text: str, code: str, words: list[str], fixed: str) -> None:
    diagnostic = next(d for d in parse(text).diagnostics if d.code == code)
    for word in words:
        assert word in diagnostic.message
    assert diagnostic.fixes, "a mechanical problem comes with a quick fix"
    assert apply_edits(text, diagnostic.fixes[0].edits) == fixed
    assert parse(fixed).diagnostics == [], "the fixed text is clean"


def test_severities() -> None:
    parsed = parse("  ///focus_up\n<<< add_subproblem now\n///title\nT\n///content\nC\n>>>\n>>>")
    assert {d.code: d.severity for d in parsed.diagnostics} == {
        "indented-command": Severity.WARNING,  # read as text, nothing lost
        "block-header-text": Severity.ERROR,  # the text would be lost, so the block does not run
        "stray-close": Severity.ERROR,
    }


def test_unclosed_block_without_a_name_reads_well() -> None:
    message = next(d.message for d in parse("<<<\n///title\nT").diagnostics if d.code == "unclosed-block")
    assert message.startswith("This block is not closed"), message
