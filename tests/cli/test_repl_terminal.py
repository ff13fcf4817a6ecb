"""The REPL in a real terminal (a pty): prompt_toolkit reads a multi-line message that
Esc then Enter sends, as seed 000's mock asks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect

REPO = Path(__file__).resolve().parents[2]


# The input line's "message>", not the "</message>" that ends the prompt's transcript once a
# message has run: keys sent on that one can arrive before the input line puts the terminal
# in raw mode, and a Ctrl-D there is taken by the terminal's line discipline. This test hung
# on it now and then on a loaded machine (mistaken at first for slowness).
INPUT_PROMPT = r"(?<!/)message>"


def test_esc_enter_sends_a_multi_line_message_and_ctrl_d_quits(tmp_path: Path):
    # A pty is not a terminal emulator: it cannot answer cursor-position requests.
    env = {**os.environ, "PYTHONPATH": str(REPO / "server"), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    folder = tmp_path / "research"
    run = [sys.executable, "-m", "deep_research"]
    pexpect.run(" ".join([*run, "new", str(folder)]), env=env, timeout=90)
    # Deadlines, not timings: generous, for a loaded 2-core machine (CI).
    child = pexpect.spawn(run[0], [*run[1:], "repl", str(folder)], env=env, encoding="utf-8",
                          timeout=90, dimensions=(50, 200))
    child.expect("# How to define a problem")  # the prompt is shown first
    child.expect(INPUT_PROMPT)
    child.send("<<< define_problem\r///title\rTyped in a terminal\r///content\rEnter adds lines.\r>>>\r")
    child.send("\x1b\r")  # Esc, then Enter: send
    child.expect("SYSTEM REPLY TO MESSAGE 1")
    child.expect("define_problem`: done")
    child.expect("# Current Problem: Typed in a terminal")
    child.expect(INPUT_PROMPT)
    child.sendeof()  # Ctrl-D on an empty message quits
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    definition = (folder / "Problem Definition.md").read_text(encoding="utf-8")
    assert "# Typed in a terminal\n\nEnter adds lines." in definition
