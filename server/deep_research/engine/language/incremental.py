"""Analysis of a document as it is edited: only what an edit touched is done again.

An editor asks for diagnostics (and code actions) after every keystroke. `DocumentAnalysis`
gives exactly what `Research.analyze` would, but:

- when the text, the research's state and every file the last analysis read are as they
  were, it returns the last analysis without running anything (`FileCache.recording`
  notes what was read; checking it costs one `stat` per file);
- after an edit, it resumes the last run at the first command the edit changed: commands
  are independent of the text around them (`parser.reparse` keeps the unchanged ones as
  they were), so only the draft and the message rules' state before that command matter,
  and those were saved along the way (`Draft.checkpoint`, every `EVERY` commands).

The autopilot's grammar follows a reply with it as the reply grows (a checkpoint at every
command; one is kept at the end of the text too, so a text that grows goes on from there),
and the reply's execution takes that analysis as its dry run (`Research.execute` reuses it
under the lock only while nothing it read has changed).
`Memo` does the same for any value computed from files (the editor's snapshot of the
research for completion and hover).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Generic, TypeVar

from ..core.state import MAIN, State
from ..core.text import Diagnostic
from ..execution.draft import Draft
from ..store import FileCache, Reads
from .analysis import Analysis, Outcome, Run, collect
from .parser import ParsedMessage

if TYPE_CHECKING:  # pragma: no cover
    from ..research import Research

EVERY = 4  # commands between checkpoints: resuming re-runs at most EVERY - 1 unchanged ones
T = TypeVar("T")


@dataclass
class _Checkpoint:
    draft: Draft  # frozen (Draft.checkpoint)
    focus_change: Outcome | None
    failed_before: bool


@dataclass
class _Done:
    """The last analysis, and what it takes to resume it."""

    parsed: ParsedMessage
    state: State
    analysis: Analysis
    found: list[list[Diagnostic]]  # each command's diagnostics
    checkpoints: list[_Checkpoint]  # before command 0, EVERY, 2 * EVERY …
    reads: Reads


class DocumentAnalysis:
    """The analysis of one document of one research, kept between edits: the message of
    `researcher` (whose state it runs on)."""

    def __init__(self, research: Research, every: int = EVERY, roots: tuple[Path, ...] = (),
                 researcher: str = MAIN) -> None:
        self.research = research
        self.researcher = researcher
        self.every = every
        self.roots = roots  # folders attach_file may read besides the research
        self._done: _Done | None = None
        self.resumed_at: int | None = None  # the first command the last call did not re-run (None: all)

    def analyze(self, parsed: ParsedMessage) -> Analysis:
        """What `Research.analyze(parsed.text, parsed=parsed, roots=roots)` gives now. `parsed` should come
        from `parser.reparse` of the previous text: commands it kept are recognised as
        unchanged by identity."""
        done = self._done
        if done is None or not done.reads.unchanged():
            return self._from_scratch(parsed)
        if parsed is done.parsed:
            self.resumed_at = len(parsed.commands)
            return done.analysis
        if bool(parsed.shutdowns) != bool(done.parsed.shutdowns):
            return self._from_scratch(parsed)  # a shutdown anywhere changes every command's fate
        return self._resume(done, parsed, _first_changed(done.parsed, parsed))

    @property
    def reads(self) -> Reads | None:
        """What the last analysis read from disk (with what earlier ones it built on read)."""
        return self._done.reads if self._done else None

    def _from_scratch(self, parsed: ParsedMessage) -> Analysis:
        research = self.research
        self.resumed_at = None
        with research.cache.recording() as reads:
            state = research.state(self.researcher)
            draft = Draft(research.tree, state, pending=research.pending_attachments, roots=self.roots,
                          rules=research.rules(), rounds=research.rounds(state))
            run = Run(parsed, draft)
            checkpoints: list[_Checkpoint] = []
            self._steps(run, 0, checkpoints)
            analysis = run.finish(state)
        self._done = _Done(parsed, state, analysis, run.found, checkpoints, reads)
        return analysis

    def _resume(self, done: _Done, parsed: ParsedMessage, changed: int) -> Analysis:
        self.resumed_at = changed
        if changed == len(done.found) == len(parsed.commands):
            # No command changed (an edit of the text between them): every outcome stands.
            analysis = Analysis(parsed, done.state, done.analysis.draft, done.analysis.outcomes,
                                collect(parsed, done.found), done.analysis.shutdown)
            self._done = _Done(parsed, done.state, analysis, done.found, done.checkpoints, done.reads)
            return analysis
        index = min(changed // self.every, len(done.checkpoints) - 1)
        start = index * self.every
        checkpoint = done.checkpoints[index]
        run = Run(parsed, checkpoint.draft.resume())
        run.outcomes = done.analysis.outcomes[:start]
        run.found = done.found[:start]
        run.focus_change, run.failed_before = checkpoint.focus_change, checkpoint.failed_before
        checkpoints = done.checkpoints[: index + 1]
        with self.research.cache.recording() as reads:
            self._steps(run, start, checkpoints)
            analysis = run.finish(done.state)
        reads.merge(done.reads)  # the resumed part rests on what the first part read
        self._done = _Done(parsed, done.state, analysis, run.found, checkpoints, reads)
        return analysis

    def _steps(self, run: Run, start: int, checkpoints: list[_Checkpoint]) -> None:
        commands = run.parsed.commands
        for index in range(start, len(commands) + 1):  # the end too: a text that grows goes on from there
            if index % self.every == 0 and index // self.every == len(checkpoints):
                checkpoints.append(_Checkpoint(run.draft.checkpoint(), run.focus_change, run.failed_before))
            if index < len(commands):
                run.step(commands[index])


def _first_changed(old: ParsedMessage, new: ParsedMessage) -> int:
    """The first command whose outcome may differ. An unchanged command (the same object:
    `reparse` keeps them) has the same outcome given the same draft, unless it ends the
    text in one version and not in the other: a fix that removes it depends on that."""
    before, after = old.commands, new.commands
    count = min(len(before), len(after))
    index = 0
    while index < count and after[index] is before[index]:
        index += 1
    if index:  # only the last command of either text can end it
        command = after[index - 1]
        end, start = command.span.end.line, command.span.start.line
        last_old, last_new = len(old.lines) - 1, len(new.lines) - 1
        if (end == last_old or end == last_new) and not (
                last_old == last_new and (start == 0 or old.lines[start - 1] == new.lines[start - 1])):
            index -= 1
    return index


class Memo(Generic[T]):
    """A value computed from files, kept for as long as none of the files it read changed."""

    def __init__(self, cache: FileCache, compute: Callable[[], T]) -> None:
        self.cache, self.compute = cache, compute
        self._value: T | None = None
        self._reads: Reads | None = None

    def get(self) -> T:
        if self._reads is not None and self._reads.unchanged():
            return self._value  # type: ignore[return-value]
        with self.cache.recording() as reads:
            value = self.compute()
        self._value, self._reads = value, reads
        return value
