"""`deep-research repl DIR`: a person plays the assistant (seed 000's mock).

It shows the prompt, reads a multi-line message (Esc then Enter sends it; prompt_toolkit
does the key handling), executes it, shows the system's reply and the next prompt.
When standard input is not a terminal, messages are read from it, separated by lines
holding only `---`, so a session can be scripted.
"""

from __future__ import annotations

import sys
from typing import Iterator, TextIO

from .engine.research import Research
from .engine.state import Phase
from .engine.text import NotText, printable

SEPARATOR = "---"
RULE = "─" * 72


def run_repl(research: Research, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    interactive = stdin.isatty() and stdout.isatty()
    messages = _typed_messages() if interactive else _scripted_messages(stdin)
    from .config import load
    from .sources.gather import gather_and_execute_sync

    _show(stdout, research.prompt(), "PROMPT")
    for number, text in enumerate(messages, 1):
        # attach_url, attach_file and search gather their sources first, as `execute` does.
        try:
            result = gather_and_execute_sync(research, text, load(research.root)[0])
        except NotText as error:  # a NUL pasted in: nothing runs, say so and go on
            stdout.write(printable(str(error)) + "\n")
            continue
        if not result.executed:
            stdout.write("(empty message: nothing sent)\n")
            continue
        _show(stdout, result.reply, f"SYSTEM REPLY TO MESSAGE {number}")
        _show(stdout, result.prompt, "PROMPT")
        if research.state().phase in (Phase.FINISHED, Phase.SHUT_DOWN):
            stdout.write("The research has ended.\n")
            break
    stdout.flush()
    return 0


def _show(out: TextIO, text: str, title: str) -> None:
    # Control characters escaped: the prompt holds what anyone wrote into the research's files.
    out.write(f"{RULE}\n{title}\n{RULE}\n{printable(text.rstrip())}\n\n")
    out.flush()


def _scripted_messages(stdin: TextIO) -> Iterator[str]:
    lines: list[str] = []
    for line in stdin:
        if line.rstrip("\r\n") == SEPARATOR:
            yield "".join(lines)
            lines = []
        else:
            lines.append(line)
    if "".join(lines).strip():
        yield "".join(lines)


def _typed_messages() -> Iterator[str]:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.formatted_text import HTML

    session: PromptSession[str] = PromptSession()
    toolbar = HTML(" <b>Esc</b> then <b>Enter</b>: send the message   <b>Ctrl-D</b>: quit ")
    while True:
        try:
            yield session.prompt("message> ", multiline=True, bottom_toolbar=toolbar,
                                 prompt_continuation=lambda width, _line, _wrap: " " * width)
        except EOFError:
            return
        except KeyboardInterrupt:
            continue  # Ctrl-C drops the message being typed, as in a shell
