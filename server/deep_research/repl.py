"""`deep-research repl DIR`: a person plays the assistant (seed 000's mock).

It shows the prompt, reads a multi-line message (Esc then Enter sends it; prompt_toolkit
does the key handling), executes it and shows the system's reply; the prompt again on
request (`:prompt`), or after every reply with `--show-prompt` (the old behaviour). A message
that is exactly one of the REPL's own commands (`:help` lists them) does that instead of
being sent. On a terminal, Ctrl-C sets the message being typed aside (Up brings it back)
and never throws it away; while a message runs (pages being fetched …), a lone Esc or
Ctrl-C stops it and gives the message back to edit. When standard input is not a
terminal, messages are read from it, separated by lines holding only `---`, so a session
can be scripted.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from typing import TYPE_CHECKING, Callable, Iterator, TextIO

from .engine.core.state import Phase
from .engine.core.text import NotText, printable
from .engine.research import Research

if TYPE_CHECKING:  # pragma: no cover
    from .engine.research import Execution
    from .engine.settings.table import Config

SEPARATOR = "---"
RULE = "─" * 72
COMMANDS = {
    ":help": "this list",
    ":status": "where the research stands: the focus, its criteria and subproblems, the messages so far",
    ":tree": "the problem tree, as `deep-research tree` prints it",
    ":prompt": "the prompt the assistant sees now",
    ":history": "the messages of the current session and their replies",
    ":undo": "take back the last executed message (again: the one before); on a terminal it comes back to edit",
    ":compile": "write the whole research as one report, report.md in its folder (`:compile pdf`: html, docx, odt, "
                "pdf, csl-json or bibtex)",
    ":quit": "leave (Ctrl-D on an empty message, or the end of the input, too)",
}
_COMMAND = re.compile(r":[A-Za-z]+(?:[ \t]+[A-Za-z-]{1,20})?")  # `:compile pdf` takes a word


def run_repl(research: Research, stdin: TextIO | None = None, stdout: TextIO | None = None, *,
             show_prompt: bool = False) -> int:
    from .app.embed import keep_embedding

    keep_embedding()
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    interactive = stdin.isatty() and stdout.isatty()
    reader: _Reader = _Terminal() if interactive else _Script(stdin)
    return _Repl(research, stdout, interactive=interactive, show_prompt=show_prompt).loop(reader)


class _Repl:
    def __init__(self, research: Research, out: TextIO, *, interactive: bool, show_prompt: bool) -> None:
        self.research = research
        self.out = out
        self.interactive = interactive
        self.show_prompt = show_prompt
        self.sent = 0  # messages sent from this REPL

    def loop(self, reader: _Reader) -> int:
        self.show(self.research.prompt(), "PROMPT")
        self.write("Write the message the assistant would send. " + (
            "Esc then Enter sends it. " if self.interactive else f"Messages are separated by lines `{SEPARATOR}`. ")
            + ":help lists the REPL's own commands.\n")
        default = ""
        while True:
            text = reader.read(default)
            default = ""
            if text is None:
                break
            word = text.strip()
            if _COMMAND.fullmatch(word):
                if word == ":quit":
                    break
                default = self.command(word)
                continue
            if not word:
                self.write("(empty message: nothing sent)\n")
                continue
            try:
                result = self.send(text)
            except NotText as error:  # a NUL pasted in: nothing runs, say so and go on
                self.write(f"{error}\n")
                continue
            if result.reason == "cancelled":
                self.write("(stopped: nothing was sent; the message is back, to edit or send again)\n")
                default = text
                continue
            self.sent += 1
            self.show(result.reply, f"SYSTEM REPLY TO MESSAGE {self.sent}")
            if self.research.state().phase in (Phase.FINISHED, Phase.SHUT_DOWN):
                self.write("The research has ended. " + (
                    "`deep-research report` prints its answer; :undo takes the last message back, :quit leaves.\n"
                    if self.interactive else "\n"))
                if not self.interactive:
                    break  # a script's next messages could only fail
            elif self.show_prompt:
                self.show(result.prompt, "PROMPT")
            elif result.analysis is not None and result.analysis.focus_changed:
                self.write("A new session started: :prompt shows its prompt.\n\n")
        self.out.flush()
        return 0

    # -- messages ---------------------------------------------------------------------------

    def send(self, text: str) -> Execution:
        from .app.execute import execute_sync

        config = self.research.config()
        if not self.interactive:  # attach_url, attach_file and search gather first, as `execute` does
            return execute_sync(self.research, text, config, progress=_progress_to_stderr)
        return asyncio.run(self._wait(text, config))

    async def _wait(self, text: str, config: Config) -> Execution:
        """Run the message; a lone Esc or Ctrl-C stops it, as long as it has not been written."""
        from .app.execute import execute
        from .keys import EscapeWatch

        stopped = False

        def stop() -> None:
            nonlocal stopped
            stopped = True

        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, stop)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows: Ctrl-C raises as before
            pass
        watch = EscapeWatch(stop)
        watch.start()
        try:
            return await execute(self.research, text, config, cancelled=lambda: stopped, progress=self._progress)
        finally:
            watch.stop()
            try:
                loop.remove_signal_handler(signal.SIGINT)
            except (NotImplementedError, RuntimeError):  # pragma: no cover
                pass

    def _progress(self, done: int, total: int, what: str) -> None:
        self.write(f"[{done}/{total}] {what}" + ("   (Esc or Ctrl-C stops the message)" if done == 0 else "") + "\n")

    # -- the REPL's own commands ----------------------------------------------------------------

    def command(self, word: str) -> str:
        """Do `word`; the text to put back into the input (after an undo), else ""."""
        run: dict[str, Callable[[], str | None]] = {
            ":help": self._help, ":status": self._status, ":tree": self._tree, ":prompt": self._prompt,
            ":history": self._history, ":undo": self._undo,
        }
        name, _, argument = word.partition(" ")
        argument = argument.strip()
        if name == ":compile":
            self._compile(argument or None)
            return ""
        action = run.get(name)
        if action is None:
            self.write(f"Unknown REPL command `{name}`: nothing was sent. {_listing()}\n\n")
            return ""
        if argument:
            self.write(f"`{name}` takes no argument: nothing was done. {_listing()}\n\n")
            return ""
        return action() or ""

    def _compile(self, fmt: str | None) -> None:
        from .app.compile import Refused, choose_format, compile_report
        from .printouts import compile_printout

        try:
            done = compile_report(self.research.root, choose_format(fmt))
        except Refused as refusal:
            self.write(f"{refusal}\n\n")
            return
        self.write(compile_printout(done) + "\n\n")

    def _help(self) -> None:
        self.write("The REPL's own commands (a message that is exactly one of them is not sent):\n"
                   + "".join(f"  {name:<9} {what}\n" for name, what in COMMANDS.items()) + "\n")

    def _status(self) -> None:
        from .engine import undo
        from .engine.core.state import Status
        from .engine.tree.reader import problem_name

        research = self.research
        state = research.state()
        phase = {Phase.NO_PROBLEM: "no problem defined yet", Phase.IN_FOCUS: "in progress",
                 Phase.FINISHED: "finished", Phase.SHUT_DOWN: "shut down"}[state.phase]
        lines = [f"Research: {research.root} ({phase})"]
        focus = research.focus()
        if focus is not None:
            where = f"“{problem_name(research.tree, focus.path)}”" if focus.path else "the root problem"
            lines.append(f"Focus: {where}" if focus.path else f"Focus: the root problem, “{focus.title}”")
            children = research.tree.children(focus.path)
            still_open = sum(1 for c in children if c.status is Status.OPEN)
            lines.append(f"  criteria {focus.criteria_met} of {len(focus.criteria)} done; "
                         f"{len(children)} subproblem(s), {still_open} open; report {'written' if focus.report is not None else 'not written'}; "
                         f"{focus.status.value}")
        recent = research.recent()  # the session's end: its messages before are counted, not read
        sent = recent.earlier_messages + sum(1 for e in recent.entries if e.role == "assistant")
        left = len(undo.history(research.root))
        lines.append(f"Messages: {state.messages} executed; {sent} in this session (session {state.session}); "
                     f"{left} can be undone.")
        self.write("\n".join(lines) + "\n\n")

    def _tree(self) -> None:
        from .engine.tree_view import outline_lines

        self.write("\n".join(outline_lines(self.research)) + "\n\n")

    def _prompt(self) -> None:
        self.show(self.research.prompt(), "PROMPT")

    def _history(self) -> None:
        entries = self.research.transcript()
        if not entries:
            self.write("No message yet in this session.\n\n")
            return
        number = 0
        for entry in entries:
            if entry.role == "assistant":
                number += 1
                self.show(entry.text, f"MESSAGE {number} OF THIS SESSION")
            else:
                self.show(entry.text, "SYSTEM" if number == 0 else f"SYSTEM REPLY TO MESSAGE {number} OF THIS SESSION")

    def _undo(self) -> str | None:
        from .engine.undo import UndoRefused
        from .printouts import undo_printout

        try:
            undone = self.research.undo(document=None)
        except UndoRefused as refusal:
            self.write(f"{refusal}\n\n")
            return None
        back = "The message is back in the input: edit it and send it again, or clear it." if self.interactive else None
        shown = undo_printout(self.research, undone, put_back=False, prompt=":prompt shows the prompt as it is back.")
        self.write(shown + (f"{back}\n" if back else "") + "\n")
        return undone.text.rstrip() if self.interactive else None

    # -- output ------------------------------------------------------------------------------

    def show(self, text: str, title: str) -> None:
        self.write(f"{RULE}\n{title}\n{RULE}\n{text.rstrip()}\n\n")

    def write(self, text: str) -> None:
        # Control characters escaped, piped too: the prompt holds what anyone wrote into the research's files.
        self.out.write(printable(text))
        self.out.flush()


def _listing() -> str:
    return "The REPL's commands: " + ", ".join(COMMANDS) + "."


def _progress_to_stderr(done: int, total: int, what: str) -> None:
    print(printable(f"deep-research: [{done}/{total}] {what}"), file=sys.stderr, flush=True)


# -- reading messages ------------------------------------------------------------------------------


class _Reader:
    def read(self, default: str = "") -> str | None:
        """The next message; None at the end."""
        raise NotImplementedError


class _Script(_Reader):
    """Messages from a pipe or a file, separated by lines `---`."""

    def __init__(self, stdin: TextIO) -> None:
        self.messages = _scripted_messages(stdin)

    def read(self, default: str = "") -> str | None:
        return next(self.messages, None)


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


class _Terminal(_Reader):
    """prompt_toolkit's multi-line input: Esc then Enter sends; Ctrl-C sets the text aside in the
    history (Up brings it back) instead of throwing it away; Ctrl-D on an empty message quits."""

    def __init__(self) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.application import run_in_terminal
        from prompt_toolkit.formatted_text import HTML
        from prompt_toolkit.history import InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        bindings = KeyBindings()

        @bindings.add("c-c")
        def _set_aside(event) -> None:  # type: ignore[no-untyped-def]
            buffer = event.current_buffer
            if buffer.text.strip():
                buffer.reset(append_to_history=True)
                note = "(Ctrl-C: the message is set aside, not lost: press Up to get it back.)"
            else:
                note = "(Ctrl-C: nothing to set aside. :quit, or Ctrl-D on an empty message, quits.)"
            run_in_terminal(lambda: print(note))

        self.session: PromptSession[str] = PromptSession(history=InMemoryHistory(), key_bindings=bindings)
        self.toolbar = HTML(" <b>Esc</b> then <b>Enter</b>: send   <b>:help</b>: the REPL's commands   "
                            "<b>Ctrl-D</b>: quit ")

    def read(self, default: str = "") -> str | None:
        try:
            return self.session.prompt("message> ", multiline=True, default=default, bottom_toolbar=self.toolbar,
                                       prompt_continuation=lambda width, _line, _wrap: " " * width)
        except EOFError:
            return None
