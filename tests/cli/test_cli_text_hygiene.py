"""Control characters on the command line (issue 25): what anyone wrote into a research's files
is shown escaped by every printout for people (`tree`, `check`, `run`'s display, the REPL; the
prompt and replies on a terminal), never raw; an instruction or a research name holding one is
refused; text from outside keeps none (replaced by U+FFFD)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pexpect
import pytest

from dr_cli_support import BOOK, REPO, cli_env, snapshot

ESCAPES = "\x1b[2J\x1b]0;pwned\x07\u202e\x9b"  # clear the screen, set the window's title, reverse, CSI
SHOWN = "\\x1b[2J\\x1b]0;pwned\\x07\\u202e\\x9b"


@pytest.fixture
def hostile(research: Path) -> Path:
    """A research whose subproblem's title and criteria were written by hand with escapes."""
    (research / "message.dr").write_text("<<< add_subproblem\n///title\nSub\n///content\nx\n>>>\n", encoding="utf-8")
    return research


def plant_title(research: Path, run) -> Path:
    run("execute", research / "message.dr")
    definition = research / "Subproblems" / "Sub" / "Problem Definition.md"
    definition.write_text(definition.read_text(encoding="utf-8").replace("# Sub", f"# Sub {ESCAPES}"),
                          encoding="utf-8")
    (research / "Attachments").mkdir(exist_ok=True)
    (research / "Attachments" / f"Note {ESCAPES}.md").write_text(f"front {ESCAPES}\n", encoding="utf-8")
    return definition


def test_tree_and_check_show_control_characters_escaped(run, hostile: Path) -> None:
    plant_title(hostile, run)
    tree = run("tree", hostile).stdout
    assert f"Sub {SHOWN} [0/0] (open)" in tree
    check = run("check", hostile, code=None)
    for output in (tree, check.stdout, check.stderr):
        assert not any(c in output for c in "\x1b\x07\u202e\x9b"), output


def test_the_repl_and_run_show_them_escaped(run, hostile: Path) -> None:
    from tests.autopilot.test_run_cli import deep_research
    from tests.scripted_model import Say, ScriptedModel

    plant_title(hostile, run)
    repl = run("repl", hostile, input="///add_criteria Fine\n")
    assert SHOWN in repl.stdout and "\x1b" not in repl.stdout
    with ScriptedModel([Say(f"Thinking {ESCAPES}\n///add_criteria Still fine\n")]) as model:
        result = deep_research("run", hostile, "--base-url", model.base_url, "--max-rounds", "1", "--grammar", "off")
    assert "\x1b" not in result.stdout + result.stderr and "round 1" in result.stdout


def test_the_prompt_is_exact_when_piped_and_escaped_on_a_terminal(run, hostile: Path) -> None:
    plant_title(hostile, run)
    piped = run("prompt", hostile).stdout
    assert ESCAPES in piped  # what a script or a model reads is the research as it is
    child = pexpect.spawn(sys.executable, ["-m", "deep_research", "prompt", str(hostile)], env=cli_env(),
                          encoding="utf-8", timeout=60, dimensions=(50, 400))
    shown = child.read()
    child.close()
    assert SHOWN in shown and "\x1b[2J" not in shown and "\x07" not in shown


def test_run_in_a_terminal_shows_the_models_escapes_escaped(tmp_path: Path) -> None:
    """The terminal display styles its own lines; what the model wrote is escaped inside them."""
    from deep_research.console import TerminalObserver

    class Terminal:
        written: list[str] = []

        def isatty(self) -> bool:
            return True

        def write(self, text: str) -> int:
            self.written.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    out = Terminal()
    observer = TerminalObserver(out)
    observer.text(f"reply {ESCAPES}")
    observer.notice(f"note {ESCAPES}")
    shown = "".join(out.written)
    assert f"reply {SHOWN}" in shown and f"note {SHOWN}" in shown
    assert "\x1b]0" not in shown and "\x1b[2J" not in shown and "\u202e" not in shown


@pytest.mark.parametrize("args, named", [
    (("--instruction", "Study \x1b]0;pwned\x07 tiles"), "The instruction holds a control character, U+001B (ESC)"),
    (("--context-text", "Caches\u202e are small"), "Context text 1 holds a control character, U+202E"),
])
def test_an_instruction_or_context_with_control_characters_is_refused(run, tmp_path: Path, args, named) -> None:
    result = run("new", tmp_path / "r", *args, code=2)
    assert named in result.stderr and "Nothing was created." in result.stderr
    assert "\x1b" not in result.stderr and not (tmp_path / "r").exists()


@pytest.mark.parametrize("name", ["two\nlines", "esc\x1b[2J", "bell\x07", "over\u202eride"])
def test_a_research_name_with_control_characters_is_refused(run, tmp_path: Path, name: str) -> None:
    result = run("new", tmp_path / name, "--instruction", "x", code=2)
    assert "holds a control character" in result.stderr and "Nothing was created." in result.stderr
    assert not (tmp_path / name).exists() and "\x1b" not in result.stderr


def test_text_from_outside_keeps_no_control_characters(run, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(f"Tiles of 32 {ESCAPES} fit.\n", encoding="utf-8")
    run("new", tmp_path / "r", "--instruction", "Study tiles", "--context", notes, "--attach", notes)
    prompt = (tmp_path / "r" / BOOK / "prompt.md").read_text(encoding="utf-8")
    assert "Tiles of 32 \ufffd[2J\ufffd]0;pwned\ufffd\ufffd\ufffd fit." in prompt
    for path in (tmp_path / "r").rglob("*"):
        if path.name.startswith("index.sqlite3"):  # the search index: SQLite's binary format; its text is checked
            import sqlite3

            texts = sqlite3.connect(path).execute("SELECT heading || body FROM parts").fetchall()
            assert texts and not any(c in text for (text,) in texts for c in "\x1b\x07\x00")
        elif path.is_file():
            assert not any(c in path.read_text(encoding="utf-8", errors="replace") for c in "\x1b\x07\x00")


def test_error_messages_escape_what_they_quote(run, tmp_path: Path) -> None:
    folder = tmp_path / "esc\x1b[2Jape"
    result = run("prompt", folder, code=2)
    assert "esc\\x1b[2Jape" in result.stderr and "\x1b" not in result.stderr
