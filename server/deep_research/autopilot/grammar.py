"""A GBNF grammar for the next message, generated from the command table and the state.

llama.cpp (`llama-server`'s `grammar` field) then lets a model write only messages that
parse, and only commands that can run now:

- free text lines, and only the commands valid in the current phase (`engine.commands`,
  the one list of commands; nothing here names a command);
- blocks with exactly their sections, in the table's order, each non-empty, closed by `>>>`;
- `focus_down` and subproblem titles limited to the current subproblems, criterion
  numbers to the open criteria; a command that has nothing to act on is left out (and
  `search` in a research that sends no query (`provider = "none"`), `attach_url` and `search`
  in an offline research);
  URLs name a host, not an address literal;
- what would surely fail, or is surely wrong, is ruled out: a new subproblem or attachment
  named like an existing one, and the sample texts of the prompt's examples as arguments
  (a small model copies them);
- at least one command per message, at most one focus change, and it ends the message
  (defining the problem ends it too: a new session starts after it);
- `attach_file` only with a file of the research folder (one folder is listed, `ATTACHABLE`
  names at most; without one the command is left out);
- nothing over the research's budgets (engine/language/budgets.py: breadth, depth, criteria; once the
  rounds of this visit are spent, only the closing commands), and a method that makes even a
  small model finish what it opens. Where the depth allows subproblems, and while the visit
  has rounds left, a problem is broken into `BREAKDOWN_PARTS` of them (or `max_breadth`) before
  `focus_down` goes into one (until then each message starts with an `add_subproblem`), and its
  report rests on that many closed ones; `focus_down` only
  into subproblems not yet closed; `write_report` once every subproblem is closed and every
  criterion marked done (not again while the report is up to date); `focus_up` only with a
  report; `fail_task_and_focus_up` only with its reason, once closing for `FAIL_AFTER` rounds
  did not work out (a small model otherwise gives problems up at random).
- the researcher's own subtree only (parallel research): no subproblem another researcher
  holds (no `focus_down` into it, no criteria added to it, no `delegate` of it), `delegate`
  only of open subproblems once the breakdown is made (as `focus_down`), and no leaving the problem (`focus_up`, `fail_task_and_focus_up`)
  while delegations of it are running. The state is the researcher's own view.

Free text may not start a line with `/`, `<` or `>`, so it can never be mistaken for a
command. `SHUT_DOWN_DEEP_RESEARCHER` is not ruled out (GBNF cannot exclude a substring
cheaply); the prompt explains it.

A grammar cannot remember what an earlier command of the same message did, so it follows the
message as it is written (`MessageGrammar`, the client's `GrammarSteps`): after each complete
command the engine's dry run of the message so far (`incremental.DocumentAnalysis`, the
editor's: equal to the analysis execution runs, resumed at the command that changed, so the
reply is analysed once as it grows, and that analysis is the dry run its execution takes)
gives the state that command left, and when the grammar built from it differs, the
reply continues under the new one (only when the new state rules out something the grammar
in effect admits; what only adds choices waits for the next continuation). So a title the
message added is taken for the next `add_subproblem` (and can be focused on), a criterion it
ticked cannot be ticked again, a focus change is left out once a command failed or reaches outside
(`attach_url`, `attach_file`, `search` may fail when they run), and a focus change or
`define_problem` ends the message. One-line arguments are written with single spaces and
none at their ends, so that "taken" (which ignores case and spacing) is exact.
"""

from __future__ import annotations

import os
from typing import Sequence

from dataclasses import dataclass, field
from pathlib import Path
from functools import lru_cache

from ..engine.core.state import MAIN, Phase, Status
from ..engine.execution.evidence import MAX_FILE_BYTES
from ..engine.language import budgets, commands
from ..engine.language.commands import ArgType, CommandSpec, Finish, Form, Growth, Named
from ..engine.language.incremental import DocumentAnalysis
from ..engine.language.parser import BLOCK_CLOSE, LINE_PREFIX, ParsedMessage, parse, reparse
from ..engine.research import DryRun, checked_message
from ..engine.retrieval.parts import IN, OUTLINE_PAGE, layout, outline_size, split_reference
from ..engine.settings.rules import DEFAULT_REPORT_MAX_WORDS, Rules
from ..engine.store import Guard, is_own_entry
from ..engine.tree import citations, staleness
from ..engine.execution.reading import reading_room, searched
from ..engine.views.prompt import EXAMPLE_WORDING, example_texts
from ..engine.views.source_view import FIND_SAMPLE

# A problem that may be broken down is, before work on its parts and its report: into this many
# parts (or max_breadth).
BREAKDOWN_PARTS = 2
FAIL_AFTER = 2  # closing rounds after which a problem may be failed instead
ATTACHABLE = 40  # files of the research folder offered to attach_file
# Bounds that make every message end (a small model repeats itself until its token limit):
PROSE_LINES = 2  # free-text lines between two commands: enough to think, not to ramble
LINE_CHARS = 240  # characters of any one line
TITLE_CHARS = 100  # characters of a one-line argument (a title, a name, a criterion)
TEXT_LINES = 8  # lines of a definition or of appended text (longer ones say so: `Argument.lines`)
REPORT_START = "Summarized problem definition:"
CHARS_PER_TOKEN = 3  # a low estimate for English prose: how much of a reply the budget leaves
REPORT_LINE_WORDS = 30  # words of one report line (the report's word limit counts lines of these)
REPORT_WORD_UNITS = 40  # characters (or citations) of one word of a report


@dataclass(frozen=True)
class GrammarInputs:
    """The parts of the state a grammar depends on (plain values)."""

    phase: Phase
    subproblems: tuple[str, ...] = ()
    open_criteria: tuple[int, ...] = ()
    attachments: tuple[str, ...] = ()
    search: bool = False  # the research may search (`config.search_provider`; else `search` surely fails)
    fetch: bool = True  # pages can be fetched (an offline research's `attach_url` surely fails)
    examples: frozenset[str] = field(default_factory=lambda: frozenset(example_texts()))
    written: int = 0  # commands already in the message (then it may end at once)
    focus_change: bool = True  # a focus change may come (no command before it failed or may fail)
    ended: bool = False  # the message must end here (a focus change or define_problem ran)
    reply_chars: int | None = None  # about how many characters the reply may still take
    report_words: int = DEFAULT_REPORT_MAX_WORDS  # the research's report_max_words
    cited: tuple[str, ...] = ()  # the attachments a report may cite: the focus's and its parents'
    # The research's budgets (engine/language/budgets.py): commands refused whatever their arguments
    # (over breadth, depth or criteria, or every non-closing one once the rounds are spent),
    # and the subproblems that cannot get another criterion.
    refused: frozenset[str] = frozenset()
    full_subproblems: tuple[str, ...] = ()
    # The autopilot closes what it opens: it focuses down only into subproblems not yet closed,
    # writes the report once every subproblem is closed (and only when there is none, or it is
    # out of date), focuses up only with a report, and fails a problem only with a reason.
    closed_subproblems: tuple[str, ...] = ()  # done or failed (not to enter or delegate)
    report: bool = False  # the current problem has a report that is up to date
    parts: int = 0  # subproblems it is broken into before work on them starts, and its report rests on
    closing: bool = False  # the rounds of this visit are spent: only the moves that close it
    give_up: bool = False  # closing for FAIL_AFTER rounds already: it may be failed (with its reason)
    files: tuple[str, ...] = ()  # files of the research folder attach_file may take (ATTACHABLE at most)
    # Parallel research: the researcher's own subtree only.
    held: tuple[str, ...] = ()  # subproblems another researcher holds (delegated): not to enter or change
    waiting: bool = False  # delegations of the current problem are running: it cannot be left
    # What `read` may name (the attachments visible here, nearest first, then the context items),
    # each with its number of parts; `find` needs one of them.
    readable: tuple[tuple[str, int], ...] = ()
    # The pages of each one's outline (`///outline NAME PAGE`), in the same order; 0: it has none.
    outlines: tuple[int, ...] = ()
    # In the message so far: the queries its finds searched (again, a find would show nothing), and
    # whether its reply has room for another read and another find (past it, they fail).
    searched: tuple[str, ...] = ()
    read_room: bool = True
    find_room: bool = True

    @classmethod
    def of(cls, research, config=None, reply_chars: int | None = None, researcher: str = MAIN) -> GrammarInputs:
        """From a `Research` (engine.research), its merged `Config` and whose message it is."""
        state = research.state(researcher)
        return cls.of_view(research.tree, state, _search(config), reply_chars=reply_chars,
                           rules=research.rules(), rounds=research.rounds(state), fetch=_fetch(config),
                           files=attachable(research.root), context=research.context())

    @classmethod
    def of_view(cls, view, state, search: bool = False, *, rules=None, rounds: int = 0, context=(),
                **more) -> GrammarInputs:
        """From any reading view of the tree (a `Tree`, or a dry run's `Draft`) and a state, under
        the research's `rules` (engine.rules.Rules; the defaults if None) after `rounds` of the
        autopilot at the focus in this visit; `context` is the research's context items."""
        rules = rules or Rules()
        more.setdefault("report_words", rules.report_max_words)
        if state.phase is not Phase.IN_FOCUS:
            return cls(state.phase, search=search, **more)
        focus = view.problem(state.focus)
        children = view.children(state.focus)
        attachments = tuple(a.name for a in view.attachments(state.focus))
        above = [a.name for depth in range(len(state.focus)) for a in view.attachments(state.focus[:depth])]
        refusals = budgets.refusals(focus, children, rules, rounds)
        closing = rounds >= rules.rounds_per_problem
        return cls(
            state.phase,
            tuple(child.title for child in children),
            tuple(n for n, c in enumerate(focus.criteria, 1) if not c.done) if focus else (),
            attachments,
            search,
            cited=tuple(dict.fromkeys(attachments + tuple(above))),
            refused=refusals.commands,
            full_subproblems=tuple(sorted(refusals.full_subproblems)),
            closed_subproblems=tuple(c.title for c in children if c.status is not Status.OPEN),
            report=bool(focus and focus.report and not staleness.changes(view, focus, children)),
            parts=0 if closing or len(state.focus) >= rules.max_depth else min(BREAKDOWN_PARTS, rules.max_breadth),
            closing=closing,
            give_up=rounds >= rules.rounds_per_problem + FAIL_AFTER,
            held=tuple(child.title for child in children if state.held_by_other(child.path) is not None),
            waiting=state.waiting(),
            **_readable(view, state.focus, context, rules.part_chars),
            **more,
        )

    @property
    def open_subproblems(self) -> tuple[str, ...]:
        return tuple(t for t in self.subproblems if t not in self.closed_subproblems)


def _readable(view, focus, context, part_chars: int) -> dict[str, tuple]:
    """The names `read` may take at `focus` with their parts (`readable`) and their outlines' pages
    (`outlines`): the focus's attachments and its parents' (nearest first), then the context's; a
    name seen once hides the later ones."""
    seen: set[str] = set()
    out, pages = [], []
    items = [a for depth in range(len(focus), -1, -1) for a in view.attachments(focus[:depth])] + list(context)
    for attachment in items:
        key = citations.key(attachment.name)
        if key not in seen and "\n" not in attachment.name and attachment.name.strip():
            seen.add(key)
            shape = layout(attachment.content, part_chars, attachment.reading)
            out.append((attachment.name, shape.count))
            pages.append(-(-outline_size(shape) // OUTLINE_PAGE))
    return {"readable": tuple(out), "outlines": tuple(pages)}


def attachable(root: Path) -> tuple[str, ...]:
    """The research folder's own files `attach_file` may take, by name: regular files that are
    not the research's own (`store.is_own_entry`; one folder, no walk; ATTACHABLE at most)."""
    found = []
    for entry in Guard(root).list_dir(root):  # a research from someone else: never a link out
        if len(found) >= ATTACHABLE:
            break
        name = entry.name
        if is_own_entry(name) or "\n" in name:
            continue
        try:
            if entry.is_file() and not entry.is_symlink() and os.stat(entry.path).st_size <= MAX_FILE_BYTES:
                found.append(name)
        except OSError:
            continue
    return tuple(sorted(found))


def _searches(name: str) -> bool:
    """Whether the command `name` searches the sources (its argument is a line of words)."""
    spec = commands.COMMANDS.get(name)
    return spec is not None and any(a.type is ArgType.WORDS for a in spec.arguments)


def _reading(draft, rules: Rules, queries: Sequence[str]) -> dict:
    """What a message's reads and finds so far leave to the rest of it (`GrammarInputs`). The
    queries searched are those of `queries` (its finds as written: SmolLM2 wrote
    `///find 10% of current current problem` three times a message) and their words as the
    engine keys them."""
    read_room, find_room = reading_room(rules, draft.answered, TITLE_CHARS)
    written = {q for q in queries if not q.startswith(IN)}  # `in:NAME` searches one source: another search
    return {"searched": tuple(sorted(set(searched(draft.shown)) | written)), "read_room": read_room,
            "find_room": find_room}


def _search(config) -> bool:
    from ..engine.settings.table import search_provider

    return search_provider(config) is not None


def _fetch(config) -> bool:
    return not (config is not None and config.fetch.offline)


class MessageGrammar:
    """The grammar of one round's message, following it as it is written (the client's
    `GrammarSteps`): `first()` for its start; `next(text)` at the end of each line gives a new
    grammar when the command that line completed changed what may follow ("" when the
    message must end), else None."""

    def __init__(self, research, config=None, *, max_reply_tokens: int | None = None, roots=(),
                 researcher: str = MAIN) -> None:
        self.research = research
        self.researcher = researcher
        self.search = _search(config)
        self.fetch = _fetch(config)
        self.roots = tuple(roots)
        self.max_chars = max_reply_tokens * CHARS_PER_TOKEN if max_reply_tokens else None
        state = research.state(researcher)
        self.rules = research.rules()
        self.rounds = research.rounds(state)  # at the message's start: the budget of this round
        self.files = attachable(research.root)
        self.context = research.context()
        self.inputs = GrammarInputs.of_view(research.tree, state, self.search, reply_chars=self.max_chars,
                                            rules=self.rules, rounds=self.rounds, fetch=self.fetch, files=self.files,
                                            context=self.context)
        self.grammar = build_grammar(self.inputs)
        self._commands = 0  # complete commands looked at
        # The reply as it grows: parsed again only where it grew, analysed again only from the
        # command it changed (the editor's incremental analysis, a checkpoint at every command).
        self.parsed: ParsedMessage | None = None
        self.analysis = DocumentAnalysis(research, every=1, roots=self.roots, researcher=researcher)

    def first(self) -> str:
        return self.grammar

    def next(self, text: str) -> str | None:
        last = text.rstrip("\n").rsplit("\n", 1)[-1].rstrip("\r")
        if not (last.startswith(LINE_PREFIX) or last.strip() == BLOCK_CLOSE):
            return None  # free text, or inside a block
        found = self._parse(text).commands
        if not found or not found[-1].closed or len(found) == self._commands:
            return None
        self._commands = len(found)
        # the dry run execution would do, from the researcher's state as it is now
        analysis = self.analysis.analyze(self._parse(text))
        after = analysis.after
        ended = analysis.focus_changed or analysis.shutdown or after.phase is not Phase.IN_FOCUS
        left = None if self.max_chars is None else max(0, self.max_chars - len(text))
        inputs = GrammarInputs.of_view(
            analysis.draft, after, self.search, written=len(found), ended=ended, reply_chars=left,
            rules=self.rules, rounds=self.rounds, fetch=self.fetch, files=self.files, context=self.context,
            # no focus change after a command that failed or may fail, nor after one whose answer
            # the new session would not show (`read`, `find`)
            focus_change=not analysis.needs and all(o.status.value == "ok" and not (o.spec and o.spec.answers)
                                                    for o in analysis.outcomes),
            **_reading(analysis.draft, self.rules, [c.argument for c in found if c.argument and _searches(c.name)]),
        )
        if not _narrower(inputs, self.inputs):
            return None
        self.inputs = inputs
        self.grammar = "" if ended else build_grammar(inputs)
        return self.grammar

    def dry_run(self, text: str, consume: Path | None = None) -> DryRun:
        """The whole reply's dry run, for its execution (`Research.dry_run`'s equal): the
        analysis that followed the reply, brought up to its end (nothing is done again when
        it ended with the last command looked at)."""
        text = checked_message(text, consume)
        analysis = self.analysis.analyze(self._parse(text)) if text.strip() else None
        return DryRun(text, self.researcher, consume, self.roots, analysis, self.analysis.reads)

    def _parse(self, text: str) -> ParsedMessage:
        self.parsed = parse(text) if self.parsed is None else reparse(self.parsed, text)
        return self.parsed

    @staticmethod
    def complete_part(text: str) -> str:
        """`text` without an unfinished command at its end (a reply cut off by its token limit):
        up to the end of the last line before that command began."""
        parsed = parse(text)
        last = parsed.commands[-1] if parsed.commands else None
        unfinished = last is not None and (not last.closed or (not last.is_block and not text.endswith("\n")))
        if not unfinished:
            return text
        lines = text.split("\n")
        return "".join(line + "\n" for line in lines[: last.span.start.line])


def _narrower(new: GrammarInputs, old: GrammarInputs) -> bool:
    """Does the state `new` rule out something the grammar built from `old` admits? Only then
    is the reply continued under a new grammar (a request); what only adds choices (a new
    criterion to tick, a new subproblem to focus on) waits for the next continuation."""
    return (
        new.ended
        or (old.focus_change and not new.focus_change)
        or bool(set(old.open_criteria) - set(new.open_criteria))  # ticked: not again
        or bool(set(new.subproblems) - set(old.subproblems))  # titles now taken
        or bool(set(new.attachments) - set(old.attachments))  # names now taken
        or bool(set(new.full_subproblems) - set(old.full_subproblems))  # criteria budget of a subproblem
        or any(_admitted(old, spec) and not _admitted(new, spec) for spec in commands.COMMANDS.values())  # budgets, method
        or new.report != old.report  # a report written: now the problem can be left
        or new.phase is not old.phase
        or bool(set(new.held) - set(old.held))  # delegated: not again, not entered
        or (new.waiting and not old.waiting)  # the problem cannot be left now
        or bool(set(new.searched) - set(old.searched))  # searched: not again
        or (old.read_room and not new.read_room) or (old.find_room and not new.find_room)  # the reply is full
    )


def _admitted(inputs: GrammarInputs, spec: CommandSpec) -> bool:
    """What the budgets and the autopilot's method leave of a command (whatever its arguments)."""
    if spec.name in inputs.refused:
        return False
    if spec.finishes is Finish.REPORT:  # on closed parts and done criteria; not again while it is up to date
        return (not inputs.open_subproblems and not inputs.open_criteria and not inputs.report
                and len(inputs.closed_subproblems) >= inputs.parts)
    if spec.finishes is Finish.DONE:  # leave with a report, once every subproblem is closed
        return inputs.report and not inputs.open_subproblems
    if spec.finishes is Finish.FAILED:  # given up only when closing it otherwise did not work out
        return inputs.give_up
    return True
def _leaves(spec: CommandSpec) -> bool:
    """A focus change that leaves the current problem (up), not one into a subproblem."""
    return spec.changes_focus and not any(a.type is ArgType.SUBPROBLEM for a in spec.arguments)


def _budget_lines(chars: int) -> int:
    """How many lines a block's text may take when about `chars` characters of reply are left."""
    return max(1, (chars - 120) // LINE_CHARS)


def build_grammar(inputs: GrammarInputs, *, exclude_examples: bool = True) -> str:
    """The GBNF grammar (root rule `root`) of every message the model may write now."""
    return _Builder(inputs, exclude_examples).build()


class _Builder:
    def __init__(self, inputs: GrammarInputs, exclude_examples: bool) -> None:
        self.inputs = inputs
        self.examples = _shortest(set(inputs.examples)) if exclude_examples else set()
        # The prompt's sample titles are ruled out by their first words too ("Title goes…").
        shown = {" ".join(t.split()[:2]) for t in EXAMPLE_WORDING.values()}
        self.title_examples = _shortest(self.examples | shown) if exclude_examples else set()
        self.rules: dict[str, str] = {}
        self._line_rules: dict[tuple[frozenset[str], frozenset[str], int], str] = {}

    def build(self) -> str:
        steps, focus = [], []
        breakdown = None  # the rule of the command that breaks the problem down
        for spec in commands.valid_in(self.inputs.phase):
            if spec.changes_focus and not self.inputs.focus_change or not _admitted(self.inputs, spec):
                continue
            if self.inputs.waiting and _leaves(spec):  # refused while delegations of the problem run
                continue
            rule = self._command(spec)
            if rule is not None:
                (focus if spec.ends_message else steps).append(rule)
                breakdown = rule if spec.grows is Growth.SUBPROBLEMS else breakdown
        self.rules["any"] = f"[^\\n]{{0,{LINE_CHARS - 1}}}"
        self.rules["text-line"] = '([^\\n/<>] any)? "\\n"'
        self.rules["prose"] = f"text-line{{0,{PROSE_LINES}}}"
        ends = " | ".join(focus) if focus else None
        more = "*" if self.inputs.written else "+"  # a message holds at least one command
        breaking_down = (not self.inputs.written and breakdown in steps
                         and len(self.inputs.subproblems) < self.inputs.parts)
        if breaking_down:  # a problem to break down: the message starts with a part of it
            self.rules["step"] = " | ".join(steps)
            root = f"prose {breakdown} prose (step prose)*" + (f" ({ends})?" if ends else "")
        elif steps:
            self.rules["step"] = " | ".join(steps)
            root = f"prose ((step prose){more} ({ends})? | {ends})" if ends else f"prose (step prose){more}"
        elif ends:
            root = f"prose ({ends})?" if self.inputs.written else f"prose ({ends})"
        else:
            root = "prose"
        lines = [f"root ::= {root}"] + [f"{name} ::= {body}" for name, body in self.rules.items()]
        return "\n".join(lines) + "\n"

    # -- commands -------------------------------------------------------------------------

    def _command(self, spec: CommandSpec) -> str | None:
        name = "cmd-" + spec.name.replace("_", "-")
        if spec.form is Form.NONE:
            body = _literal(f"///{spec.name}\n")
        elif spec.form is Form.LINE:
            argument = spec.arguments[0]
            # a text written on the command's line is one line (the block form holds more)
            value = (self._line_except(set(), self.examples) if argument.type is ArgType.TEXT
                     else self._value(spec, argument))
            if value is None:
                return None
            # an optional argument is written too: a failure says why (its reason is what the parent reads)
            body = f'{_literal(f"///{spec.name} ")} {value} "\\n"'
        else:
            parts = [_literal(f"<<< {spec.name}\n")]
            for argument in spec.arguments:
                value = self._value(spec, argument)
                if value is None:
                    return None
                newline = "" if argument.type is ArgType.TEXT else ' "\\n"'
                parts.append(f'{_literal(f"///{argument.name}" + chr(10))} {value}{newline}')
            parts.append(_literal(">>>\n"))
            body = " ".join(parts)
        self.rules[name] = body
        return name

    def _value(self, spec: CommandSpec, argument: commands.Argument) -> str | None:
        """The rule for one argument's value, or None when nothing valid can be written."""
        if argument.type is ArgType.SUBPROBLEM:
            titles = tuple(t for t in self.inputs.subproblems if t not in self.inputs.held)
            enough = len(self.inputs.subproblems) >= self.inputs.parts
            if spec.changes_focus or argument.open_only:  # into (or delegating) a subproblem still to
                # close, once the breakdown is made
                titles = tuple(t for t in titles if t not in self.inputs.closed_subproblems) if enough else ()
            elif argument.grows is Growth.CRITERIA:  # one that has room for another criterion
                titles = tuple(t for t in titles if t not in self.inputs.full_subproblems)
            return "(" + " | ".join(_literal(t) for t in titles) + ")" if titles else None
        if argument.type is ArgType.CRITERION:
            numbers = self.inputs.open_criteria
            return "(" + " | ".join(_literal(str(n)) for n in numbers) + ")" if numbers else None
        if argument.type is ArgType.QUERY and not self.inputs.search:
            return None
        if argument.type is ArgType.URL and not self.inputs.fetch:
            return None
        if argument.type is ArgType.PART:  # a name visible here, with a part it has, while the reply has room
            return self._parts() if self.inputs.readable and self.inputs.read_room else None
        if argument.type is ArgType.WORDS:  # a line of words, where there is something to search
            if not (self.inputs.readable and self.inputs.find_room):
                return None
            # not the prompt's sample words (a small model copies `///find WORDS`), nor a query this
            # message searched; starting with a letter or digit: a line of punctuation alone (`*/`)
            # is no query, and the engine refuses it
            samples = {FIND_SAMPLE, argument.placeholder} if self.examples else set()
            words = self._line_except(samples | set(self.inputs.searched), self.title_examples | {IN}, TITLE_CHARS,
                                      words=True, alnum_first=True)
            scopes = [_literal(IN + (f'"{name}"' if " " in name else name) + " ")
                      for name, _count in self.inputs.readable if '"' not in name]  # `in:NAME`: one source only
            return f"(({' | '.join(scopes)}) {words} | {words})" if scopes else words
        if argument.type is ArgType.SOURCE:  # a name visible here that has an outline, and a page of it
            return self._outlines()
        if argument.type is ArgType.PATH:  # a file that is there (any other path surely fails)
            files = self.inputs.files
            return "(" + " | ".join(_literal(f) for f in files) + ")" if files else None
        if argument.type is ArgType.URL:
            # a host name, not an address literal (which would skip name resolution)
            self.rules["url"] = f'"http" "s"? "://" [a-zA-Z] [^\\x00-\\x20]{{0,{TITLE_CHARS * 2}}}'
            return "url"
        taken = set({Named.SUBPROBLEM: self.inputs.subproblems, Named.ATTACHMENT: self.inputs.attachments}.get(
            argument.names_new, ()))
        if argument.type is not ArgType.TEXT:  # one line: a title, a name, a criterion, a path, a query
            return self._line_except(taken, self.title_examples, TITLE_CHARS, words=True)
        first = self._line_except(taken, self.examples)
        lines = (argument.lines or TEXT_LINES) - 1
        if self.inputs.reply_chars is not None:  # the block must close before the reply's token limit
            lines = min(lines, _budget_lines(self.inputs.reply_chars) - 1)
        if spec.finishes is Finish.REPORT:
            return self._report(lines)
        more = f' text-line{{0,{lines}}}' if lines > 0 else ""
        return f'{first} "\\n"{more}'

    def _parts(self) -> str:
        """`NAME` or `NAME#N` for each readable name, N one of its parts (a name that ends in `#`
        and digits itself takes its part always: engine/retrieval/parts.py)."""
        alternatives = []
        for index, (name, count) in enumerate(self.inputs.readable):
            number = f"part-{index}"
            self.rules[number] = _number_upto(count)
            whole = split_reference(name)[1] is None
            alternatives.append(f'{_literal(name)} ("#" {number})' + ("?" if whole else ""))
        return "(" + " | ".join(alternatives) + ")"

    def _outlines(self) -> str | None:
        """`NAME` or `NAME PAGE` for each readable name whose outline has entries, PAGE one of its pages."""
        outlines = self.inputs.outlines or (1,) * len(self.inputs.readable)
        alternatives = []
        for index, ((name, _count), pages) in enumerate(zip(self.inputs.readable, outlines)):
            if pages < 1:
                continue
            if pages == 1:
                alternatives.append(_literal(name))
                continue
            number = f"page-{index}"
            self.rules[number] = _number_upto(pages)
            alternatives.append(f'{_literal(name)} (" " {number})?')
        return "(" + " | ".join(alternatives) + ")" if alternatives else None

    def _report(self, lines: int) -> str:
        """A report: the structure the report check looks for (`Summarized problem definition:`
        first), at most `report_max_words` words, and citations only of attachments in scope.
        Words are counted as the engine does (whitespace-separated): each line holds at most
        REPORT_LINE_WORDS of them, and there are at most report_max_words // REPORT_LINE_WORDS
        lines, so the limit holds exactly (more lines of fewer words would fit too: the bound
        is safe, not tight)."""
        per = REPORT_LINE_WORDS
        lines = min(lines, self.inputs.report_words // per - 1)
        cites = " | ".join(_literal(name) for name in self.inputs.cited if name.strip() and "]" not in name and "\n" not in name)
        # A citation: `[[NAME]]`, `[[NAME#N]]`, or the opening of a quoted one, `[[NAME#N|"`, whose
        # words follow as the report's words (spaces keep separating words: the limit stays exact).
        cite = f' | "[[" ({cites}) ("#" [1-9] [0-9]{{0,4}})? ("]]" | "|\\"")' if cites else ""
        unit = '[^ \\t\\n\\[] | "[" [^ \\t\\n\\[]' + cite
        first_unit = '[^ \\t\\n\\[/<>] | "[" [^ \\t\\n\\[]' + cite
        self.rules["r-word"] = f"({unit}){{1,{REPORT_WORD_UNITS}}}"
        self.rules["r-first"] = f"({first_unit}) ({unit}){{0,{REPORT_WORD_UNITS - 1}}}"
        self.rules["r-line"] = f'(r-first ([ \\t]+ r-word){{0,{per - 1}}} [ \\t]*)? "\\n"'
        head = f'{_literal(REPORT_START)} ([ \\t]+ r-word){{0,{per - 4}}} [ \\t]* "\\n"'
        return head + (f" r-line{{0,{lines}}}" if lines > 0 else "")

    def _line_except(self, exact: set[str], prefixes: set[str], chars: int = LINE_CHARS, *, words: bool = False,
                     alnum_first: bool = False) -> str:
        """A rule for one non-empty line that does not start with whitespace or a command
        character, is none of `exact` and starts with none of `prefixes`, ignoring case:
        the complement of a trie of those words. With `words`, single spaces only and none at
        the end (a one-line argument: the engine compares them ignoring case and spacing); with
        `alnum_first`, its first character is an ASCII letter or digit."""
        exact = {" ".join(w.split()).casefold() for w in exact if w.strip() and "\n" not in w}
        prefixes = {w.casefold() for w in prefixes if w.strip() and "\n" not in w}
        key = (frozenset(exact), frozenset(prefixes), chars, words, alnum_first)
        if key in self._line_rules:
            return self._line_rules[key]
        name = f"line{len(self._line_rules)}"
        self._line_rules[key] = name
        self.rules.update(_complement(name, *key))
        return name


@lru_cache(maxsize=64)
def _complement(
    name: str, exact: frozenset[str], prefixes: frozenset[str], chars: int, words: bool, alnum_first: bool = False,
) -> tuple[tuple[str, str], ...]:
    """The rules of `_line_except` (cached: the sample texts are the same every round)."""
    rules: dict[str, str] = {}
    trie: dict = {}
    for word, mark in [(w, _EXACT) for w in sorted(exact)] + [(w, _PREFIX) for w in sorted(prefixes)]:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[mark] = True
    counter = [0]
    rest = f"{name}-rest"
    # with `words`, the rest of the line is words with single spaces between, none at the end
    rules[rest] = f'(" "? [^ \\t\\n]){{0,{chars - 1}}}' if words else f"[^\\n]{{0,{chars - 1}}}"

    def emit(node: dict, rule: str, depth: int, after_space: bool = False) -> bool:
        """Write the rule for `node`; False if no line may pass through it."""
        if _PREFIX in node:
            return False
        alternatives = []
        if depth > 0 and _EXACT not in node and not after_space:
            alternatives.append('""')
        children = [c for c in node if isinstance(c, str) and len(c) == 1]
        banned = {v for c in children for v in _cases(c)} | {"\n"}
        if depth == 0:
            banned |= set(_FORBIDDEN_FIRST)
        if words:
            banned |= {" ", "\t"}
            if depth > 0 and not after_space and " " not in children:
                alternatives.append(f'" " [^ \\t\\n] {rest}')
        if depth == 0 and alnum_first:
            allowed = [c for c in _ASCII_ALNUM if c not in banned]
            alternatives.append(f"[{''.join(allowed)}] {rest}")
        else:
            alternatives.append(f"{_char_class(banned)} {rest}")
        for char in sorted(children):
            if depth == 0 and (char in _FORBIDDEN_FIRST or (alnum_first and char not in _ASCII_ALNUM)):
                continue
            if words and char == " " and (after_space or depth == 0):
                continue
            counter[0] += 1
            child = f"{name}-{counter[0]}"
            if emit(node[char], child, depth + 1, char == " "):
                variants = sorted(_cases(char))
                match = _literal(char) if len(variants) == 1 else "[" + "".join(_class_char(v) for v in variants) + "]"
                alternatives.append(f"{match} {child}")
        rules[rule] = " | ".join(alternatives)
        return True

    emit(trie, name, 0)
    return tuple(rules.items())


def _number_upto(n: int) -> str:
    """A GBNF expression for exactly the whole numbers 1 to `n`, written without leading zeros."""
    digits = str(max(1, n))
    shorter = [f"[1-9]{' [0-9]' * (length - 1)}" for length in range(1, len(digits))]
    same = []  # as many digits as n: a prefix of n, then one digit below n's, then any digits
    for at, char in enumerate(digits):
        low = "1" if at == 0 else "0"
        high = str(int(char) - 1)
        if high >= low:
            rest = " [0-9]" * (len(digits) - at - 1)
            head = _literal(digits[:at]) + " " if at else ""
            same.append(f"{head}[{low}-{high}]{rest}")
    same.append(_literal(digits))
    return " | ".join(f"({alternative})" for alternative in shorter + same)


def _shortest(prefixes: set[str]) -> set[str]:
    """The prefixes, casefolded, without those another one already rules out."""
    folded = sorted({p.casefold().strip() for p in prefixes if p.strip()})
    return {p for p in folded if not any(p != q and p.startswith(q) for q in folded)}


_EXACT, _PREFIX = "<exact>", "<prefix>"  # trie marks (longer than one character: never a key)
_FORBIDDEN_FIRST = " \t/<>"
_ASCII_ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _cases(char: str) -> set[str]:
    """The characters that casefold to `char` (as far as upper/lower go)."""
    return {v for v in (char, char.upper(), char.lower()) if len(v) == 1 and v.casefold() == char}


def _literal(text: str) -> str:
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _char_class(banned: set[str]) -> str:
    return "[^" + "".join(_class_char(c) for c in sorted(banned)) + "]"


def _class_char(char: str) -> str:
    if char.isalnum() and char.isascii():
        return char
    code = ord(char)
    return f"\\x{code:02X}" if code < 0x80 else (f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}")
