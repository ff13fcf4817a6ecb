"""The REPL in a real terminal (a pty): prompt_toolkit reads a multi-line message that
Esc then Enter sends, as seed 000's mock asks; the REPL's own commands; Ctrl-C never throws
a message away; a lone Esc (or Ctrl-C) stops a message while it runs (issue 26)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pexpect
import pytest
from pytest_httpserver import HTTPServer

REPO = Path(__file__).resolve().parents[2]
RUN = [sys.executable, "-m", "deep_research"]
# A pty is not a terminal emulator: it cannot answer cursor-position requests.
ENV = {**os.environ, "PYTHONPATH": str(REPO / "server"), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
DEFINE = "<<< define_problem\r///title\rTyped in a terminal\r///content\rEnter adds lines.\r>>>\r"
SEND = "\x1b\r"  # Esc, then Enter


# The input line's "message>", not the "</message>" that ends the prompt's transcript once a
# message has run: keys sent on that one can arrive before the input line puts the terminal
# in raw mode, and a Ctrl-D there is taken by the terminal's line discipline. This test hung
# on it now and then on a loaded machine (mistaken at first for slowness).
INPUT_PROMPT = r"(?<!/)message>"


def spawn_repl(folder: Path, *args: str) -> pexpect.spawn:
    if not folder.exists():
        pexpect.run(" ".join([*RUN, "new", str(folder)]), env=ENV, timeout=90)
    # Deadlines, not timings: generous, for a loaded 2-core machine (CI).
    return pexpect.spawn(RUN[0], [*RUN[1:], "repl", str(folder), *args], env=ENV, encoding="utf-8",
                         timeout=90, dimensions=(50, 200))


def quit_(child: pexpect.spawn) -> None:
    child.expect(INPUT_PROMPT)
    child.sendeof()  # Ctrl-D on an empty message quits
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_esc_enter_sends_a_multi_line_message_the_reply_comes_alone_and_ctrl_d_quits(tmp_path: Path):
    folder = tmp_path / "research"
    child = spawn_repl(folder)
    child.expect("# How to define a problem")  # the prompt is shown first
    child.expect(INPUT_PROMPT)
    child.send(DEFINE)
    child.send(SEND)
    child.expect("SYSTEM REPLY TO MESSAGE 1")
    child.expect("define_problem`: done")
    child.expect("A new session started: :prompt shows its prompt.")  # the reply alone, not ~10,000 characters
    assert "# Current Problem" not in child.before
    child.expect(INPUT_PROMPT)
    child.send(":prompt" + SEND)  # on request
    child.expect("# Current Problem: Typed in a terminal")
    quit_(child)
    definition = (folder / "Problem Definition.md").read_text(encoding="utf-8")
    assert "# Typed in a terminal\n\nEnter adds lines." in definition


def test_show_prompt_keeps_the_old_behaviour(tmp_path: Path):
    child = spawn_repl(tmp_path / "research", "--show-prompt")
    child.expect(INPUT_PROMPT)
    child.send(DEFINE + SEND)
    child.expect("define_problem`: done")
    child.expect("# Current Problem: Typed in a terminal")  # after the reply, without asking
    quit_(child)


def test_ctrl_c_sets_the_message_aside_and_up_brings_it_back(tmp_path: Path):
    folder = tmp_path / "research"
    child = spawn_repl(folder)
    child.expect(INPUT_PROMPT)
    child.send("<<< define_problem\r///title\rKept\r///content\rNot lost.\r>>>")
    child.sendintr()  # Ctrl-C
    child.expect("the message is set aside, not lost: press Up to get it back")
    child.expect(INPUT_PROMPT)
    child.sendintr()  # on an empty message: says how to quit, quits nothing
    child.expect("nothing to set aside")
    child.send("\x1b[A")  # Up: the message is back, whole
    child.send(SEND)
    child.expect("define_problem`: done")
    quit_(child)
    assert "# Kept\n\nNot lost." in (folder / "Problem Definition.md").read_text(encoding="utf-8")


def test_the_repls_own_commands_on_a_terminal(tmp_path: Path):
    folder = tmp_path / "research"
    child = spawn_repl(folder)
    child.expect(INPUT_PROMPT)
    child.send(":help" + SEND)
    for name in (":status", ":tree", ":prompt", ":history", ":undo", ":quit"):
        child.expect(name)
    child.expect(INPUT_PROMPT)
    child.send(DEFINE + SEND)
    child.expect("define_problem`: done")
    child.expect(INPUT_PROMPT)
    child.send("///add_criteria Typed twice\r" + SEND)
    child.expect("add_criteria`: done")
    child.expect(INPUT_PROMPT)
    child.send(":status" + SEND)
    child.expect("Focus: the root problem, “Typed in a terminal”")
    child.expect("criteria 0 of 1 done; 0 subproblem\\(s\\), 0 open; report not written; open")
    child.expect("Messages: 2 executed; 1 in this session \\(session 2\\); 2 can be undone.")
    child.send(":tree" + SEND)
    child.expect("Typed in a terminal \\[0/1\\] \\(open\\)  ◀ focus")
    child.send(":history" + SEND)
    child.expect("MESSAGE 1 OF THIS SESSION")
    child.expect("///add_criteria Typed twice")
    child.expect("SYSTEM REPLY TO MESSAGE 1 OF THIS SESSION")
    child.send(":frobnicate" + SEND)
    child.expect("Unknown REPL command `:frobnicate`: nothing was sent.")
    child.send(":undo" + SEND)
    child.expect("Undid message 2 \\(with `add_criteria`, which begins “///add_criteria Typed twice”\\)")
    child.expect("The message is back in the input")
    child.expect(INPUT_PROMPT)
    child.send(SEND)  # sent again as it came back
    child.expect("SYSTEM REPLY TO MESSAGE 3")
    child.expect("add_criteria`: done")
    child.expect(INPUT_PROMPT)
    child.send(":quit" + SEND)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "1. Typed twice" in (folder / "Criteria of Definition of Done.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("key", ["esc", "ctrl-c"])
def test_a_lone_esc_or_ctrl_c_stops_a_running_message_and_gives_it_back(tmp_path: Path, web: HTTPServer, key: str):
    arrived, release = threading.Event(), threading.Event()

    def stuck(request):  # a page that takes its time: the REPL waits for it
        arrived.set()
        release.wait(60)
        return "late"

    web.expect_request("/stuck").respond_with_handler(stuck)
    folder = tmp_path / "research"
    child = spawn_repl(folder)
    (folder / "deep-research.toml").write_text("[fetch]\nallow_private_networks = true\n", encoding="utf-8")
    child.expect(INPUT_PROMPT)
    child.send(DEFINE + SEND)
    child.expect("define_problem`: done")
    child.expect(INPUT_PROMPT)
    child.send(f"///add_criteria Not kept\r///attach_url {web.url_for('/stuck')}\r" + SEND)
    child.expect("Esc or Ctrl-C stops the message")
    try:
        assert arrived.wait(60)
        child.send("\x1b[B")  # an arrow key (Esc [ B) stops nothing ...
        if key == "esc":
            child.send("\x1b")  # ... a lone Esc does
        else:
            child.sendintr()
        child.expect("stopped: nothing was sent; the message is back, to edit or send again")
    finally:
        release.set()
    child.expect(INPUT_PROMPT)
    child.expect("///attach_url")  # back in the input
    child.sendintr()  # set it aside, then quit
    quit_(child)
    assert "Not kept" not in (folder / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
