"""What each command does, run against a `Draft`.

Every operation first checks everything it needs and raises `CommandError` (with a
message that says how to fix the command) before changing anything, so a failing
command never changes the draft. The command table (`commands.py`) points at these
functions; it is the only place that maps names to them.
"""

from __future__ import annotations

import re

from ..core.names import look_alike, suggest_title
from ..core.state import NAME_SEPARATOR, ROOT, Phase, Seat, Status, now
from ..core.text import Edit, Fix, Span
from ..settings.rules import DEFAULT_REPORT_MAX_WORDS, Rules
from ..tree import citations, quotes, staleness
from ..tree import report as report_checks
from ..tree.model import Criterion
from ..tree.reader import problem_name
from .draft import CRITERIA_ASPECT, DEFINITION_ASPECT, REPORT_ASPECT, Draft
from .protocol import Arg, Args, CommandError, Result, Warning_, quote


def _new_session(draft: Draft, **changes: object) -> None:
    draft.state = draft.state.new_session(**changes)


# -- define and refine ---------------------------------------------------------------------


def define_problem(draft: Draft, args: Args) -> Result:
    title, content = args["title"].value, args["content"].value
    draft.create_root(title, content)
    copied = draft.pending()
    for attachment in copied:  # a URL stays one; twins (a hand edit, an older research) get names of their own
        draft.add_attachment(ROOT, draft.free_attachment_name(ROOT, attachment.name), attachment.content,
                             **attachment.copied())
    _new_session(draft, phase=Phase.IN_FOCUS, focus=ROOT)
    note = f" Its {len(copied)} attachment(s) were copied to it." if copied else ""
    return Result(f"Defined the research problem {quote(title)}.{note}")


def append_to_problem_definition(draft: Draft, args: Args) -> Result:
    problem = draft.focus
    problem.definition = (problem.definition.rstrip() + "\n\n" + args["content"].value).strip()
    draft.mark(problem.path, DEFINITION_ASPECT)
    return Result(f"Appended {len(args['content'].value)} characters to the definition of {quote(problem.title)}.")


# -- criteria ---------------------------------------------------------------------------------


def _add_criterion(draft: Draft, path: tuple[str, ...], text: str, span: Span | None = None) -> Result:
    problem = draft.problem(path)
    assert problem is not None
    for number, existing in enumerate(problem.criteria, 1):
        if " ".join(existing.text.split()).casefold() == " ".join(text.split()).casefold():
            return Result(
                f"{quote(problem.title)} already has this as criterion {number}; nothing added.",
                [Warning_(f"Criterion {number} of {quote(problem.title)} already says this; nothing was added.")],
            )
    if len(problem.criteria) >= draft.rules.max_criteria:
        raise CommandError(_criteria_refusal(problem.title, len(problem.criteria), draft.rules), span)
    problem.criteria.append(Criterion(text))
    draft.mark(path, CRITERIA_ASPECT)
    return Result(f"Added criterion {len(problem.criteria)} to {quote(problem.title)}: {quote(text)}.")


def add_criteria(draft: Draft, args: Args) -> Result:
    return _add_criterion(draft, draft.focus.path, args["criteria"].value, args["criteria"].span)


_NUMBER = re.compile(r"#?\s*(\d+)\s*[.)]?")


def mark_criteria_as_done(draft: Draft, args: Args) -> Result:
    arg = args["number"]
    problem = draft.focus
    count = len(problem.criteria)
    match = _NUMBER.fullmatch(arg.value.strip())
    listing = (
        f"The current problem has criteria 1 to {count}." if count else
        "The current problem has no criteria yet: add one with `///add_criteria`."
    )
    if match is None:
        raise CommandError(
            f"`{arg.value}` is not a criterion number. Write one number, e.g. `///mark_criteria_as_done 1`. {listing}",
            arg.span,
        )
    number = int(match.group(1))
    if not 1 <= number <= count:
        raise CommandError(f"There is no criterion {number}. {listing}", arg.span)
    criterion = problem.criteria[number - 1]
    if criterion.done:
        return Result(
            f"Criterion {number} was already done.",
            [Warning_(f"Criterion {number} ({quote(criterion.text, 50)}) is already marked done.", arg.span)],
        )
    criterion.done = True
    draft.mark(problem.path, CRITERIA_ASPECT)
    return Result(f"Marked criterion {number} as done ({problem.criteria_met}/{count} met): {quote(criterion.text)}.")


def add_criteria_to_subproblem(draft: Draft, args: Args) -> Result:
    child = _subproblem(draft, args["title"])
    _not_held(draft, child, args["title"], "add criteria to it")
    return _add_criterion(draft, child.path, args["criteria"].value, args["criteria"].span)


# -- subproblems and attachments -------------------------------------------------------------------


# The research's budgets (engine/language/budgets.py): each refusal names the budget and what to do instead.


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _breadth_refusal(title: str, count: int, rules: Rules) -> str:
    return (f"{quote(title)} already has {_count(count, 'subproblem')}, the most the research's budget allows "
            f"(max_breadth = {rules.max_breadth}). Work with those: focus down into one, or add a criterion to "
            "one with `<<< add_criteria_to_subproblem`.")


def _depth_refusal(title: str, level: int, rules: Rules) -> str:
    return (f"{quote(title)} is {level} level{'s' if level != 1 else ''} below the root problem, the deepest the "
            f"research's budget allows (max_depth = {rules.max_depth}), so it cannot have subproblems. Answer it "
            "here: save what you find as attachments, then write its report.")


def _criteria_refusal(title: str, count: int, rules: Rules) -> str:
    return (f"{quote(title)} already has {_count(count, 'criterion', 'criteria')}, the most the research's budget allows "
            f"(max_criteria = {rules.max_criteria}). Work on those and mark them done; a further requirement can "
            "go into the definition with `<<< append_to_problem_definition`.")


def add_subproblem(draft: Draft, args: Args) -> Result:
    title, content = args["title"], args["content"].value
    focus = draft.focus
    rules = draft.rules
    if len(focus.path) >= rules.max_depth:
        raise CommandError(_depth_refusal(focus.title, len(focus.path), rules), title.span)
    if draft.child_count(focus.path) >= rules.max_breadth:
        raise CommandError(_breadth_refusal(focus.title, draft.child_count(focus.path), rules), title.span)
    clash = draft.child_title_clash(focus.path, title.value)
    if clash is not None:
        same = clash.title == title.value
        raise CommandError(
            f"{quote(focus.title)} already has a subproblem titled {quote(clash.title)}"
            + ("" if same else " (titles must differ by more than case or spacing)")
            + ". Choose another title, or add criteria to the existing one with `<<< add_criteria_to_subproblem`.",
            title.span,
        )
    child = draft.add_child(focus.path, title.value, content)
    count = draft.child_count(focus.path)
    return Result(f"Added subproblem {count} {quote(child.title)} to {quote(focus.title)}.")


def add_attachment(draft: Draft, args: Args) -> Result:
    name, content = args["name"], args["content"].value
    focus = draft.focus
    if draft.attachment_taken(focus.path, name.value):
        raise CommandError(
            f"{quote(focus.title)} already has an attachment named {quote(name.value)}. "
            "Choose another name; attachments are never overwritten.",
            name.span,
        )
    draft.add_attachment(focus.path, name.value, content)
    return Result(f"Attached {quote(name.value)} ({len(content)} characters) to {quote(focus.title)}.")


def _subproblem(draft: Draft, arg: Arg):
    focus = draft.focus
    child = draft.child_titled(focus.path, arg.value)
    if child is not None:
        return child
    titles = [c.title for c in draft.children(focus.path)]
    if not titles:
        raise CommandError(
            f"{quote(focus.title)} has no subproblems yet. Add one first with `<<< add_subproblem`.", arg.span
        )
    near = suggest_title(arg.value, titles)  # never one that looks the same: that one it names
    fixes: tuple[Fix, ...] = ()
    hint = ""
    if near:
        hint = f" Did you mean {quote(near)}?{look_alike(arg.value, near)}"
        if arg.span is not None:
            fixes = (Fix(f"Change to {quote(near)}", (Edit(arg.span, near),)),)
    listing = "; ".join(quote(t, 60) for t in titles[:12]) + ("; …" if len(titles) > 12 else "")
    raise CommandError(
        f"{quote(focus.title)} has no subproblem titled {quote(arg.value)}.{hint} "
        f"Its subproblems are: {listing}. Titles must match exactly.",
        arg.span,
        fixes,
    )


def _not_held(draft: Draft, child, arg: Arg, what: str) -> None:
    """Refuse to enter or change a subproblem another researcher holds (a delegation)."""
    holder = draft.state.held_by_other(child.path)
    if holder is not None:
        raise CommandError(
            f"{quote(child.title)} is delegated: the researcher {quote(holder.name)} is working on it, so you "
            f"cannot {what} until that researcher ends. Its report will come under Child Reports; meanwhile work "
            "on the other subproblems.",
            arg.span,
        )


def _listing(seats: list[Seat]) -> str:
    titles = [quote(seat.name.rsplit(NAME_SEPARATOR, 1)[-1], 60) for seat in seats]
    return ", ".join(titles[:-1]) + " and " + titles[-1] if len(titles) > 1 else titles[0]


def researcher_name(draft: Draft, path: tuple[str, ...]) -> str:
    """A delegated researcher's name: the titles below the root down to `path`, as a problem is named."""
    return problem_name(draft, path)


# -- delegation ----------------------------------------------------------------------------------


def delegate(draft: Draft, args: Args) -> Result:
    arg = args["title"]
    child = _subproblem(draft, arg)
    holder = draft.state.held_by_other(child.path)
    if holder is not None:
        raise CommandError(
            f"{quote(child.title)} is already delegated: the researcher {quote(holder.name)} is working on it. "
            "Each subproblem has one researcher; delegate another one, or wait for its report.",
            arg.span,
        )
    if child.status is not Status.OPEN:
        raise CommandError(
            f"{quote(child.title)} is {child.status.value}: only open subproblems are delegated. "
            + ("Its report is under Child Reports. " if child.report else "")
            + "To work on it again, focus down into it yourself with `///focus_down`.",
            arg.span,
        )
    name = researcher_name(draft, child.path)
    state = draft.state
    draft.state = state.with_seat(Seat(name, child.path, child.path, state.highest_session() + 1, started=now()))
    return Result(
        f"Delegated {quote(child.title)} to a researcher of its own, {quote(name)}: it works on it at the same "
        "time as you, in a session of its own, and its report will come under Child Reports when it ends."
    )


# -- the report ----------------------------------------------------------------------------------


def write_report(draft: Draft, args: Args) -> Result:
    arg = args["content"]
    problem = draft.focus
    _within_limit(draft, arg, "report")
    warnings = [Warning_(finding.message, _line_span(arg, finding.line)) for finding in report_checks.check(arg.value)]
    open_criteria = [n for n, c in enumerate(problem.criteria, 1) if not c.done]
    if open_criteria:
        numbers = ", ".join(str(n) for n in open_criteria)
        warnings.insert(0, Warning_(
            f"Not every criterion is done (open: {numbers}). Resolve and mark them done with "
            "`///mark_criteria_as_done` before the report, so it covers everything the problem asks.",
            arg.span,
        ))
    running = draft.state.delegations(problem.path)
    if running:
        one = len(running) == 1
        warnings.append(Warning_(
            f"{_listing(running)} {'is' if one else 'are'} still being researched by {'its' if one else 'their'} "
            f"researcher{'' if one else 's'}: this report cannot use {'its' if one else 'their'} findings yet. "
            "Write it again once they are under Child Reports.",
            arg.span, "delegations-running"))
    replaced = problem.report is not None
    problem.report = arg.value
    problem.report_basis = staleness.basis_of(draft, problem)
    draft.mark(problem.path, REPORT_ASPECT)
    words = report_checks.word_count(arg.value)
    return Result(
        f"{'Replaced' if replaced else 'Wrote'} the report of {quote(problem.title)} ({words:,} words).", warnings,
        replaced=replaced,
    )


def _within_limit(draft: Draft, arg: Arg, what: str) -> None:
    """Refuse a report (or a failure's reason, which becomes one) over the word limit."""
    words = report_checks.word_count(arg.value)
    limit = draft.rules.report_max_words
    if words > limit:
        raise CommandError(
            f"The {what} has {words:,} words, over the limit of {limit:,} words"
            + (" (about three pages)" if limit == DEFAULT_REPORT_MAX_WORDS else "") + ": cut at "
            f"least {words - limit:,} words and send it again. Keep what the parent problem needs: the "
            "answers, the evidence behind them and the conclusion.",
            arg.span,
        )


def citation_review(draft: Draft, path: tuple[str, ...], arg: Arg) -> tuple[list[Warning_], str]:
    """A warning for each `[[Name]]` in `arg` that names no attachment of the problem at `path`
    or of its parents, or a part it lacks, and for each quote or number that the cited part does
    not hold (engine/quotes.py); and a sentence of the quotes' figures for the reply ("" with no
    quote): what `analysis` checks for every argument that `cites`."""
    found = citations.find(arg.value)
    if not found:
        return [], ""
    scope = [(a.name, a) for depth in range(len(path), -1, -1) for a in draft.attachments(path[:depth])]
    names = list(dict.fromkeys(name for name, _ in scope))
    problem = draft.problem(path)
    title = quote(problem.title) if problem is not None else "the problem"
    warnings = []
    resolved = []
    for citation in found:
        span = _offset_span(arg, citation.name_start, citation.name_end)
        cited = citations.resolve_part(citation.name, scope)
        if cited is not None:
            missing = citations.missing_part(citation.name, *cited, draft.rules.part_chars)
            if missing is not None:
                warnings.append(Warning_(missing + ".", span, "unknown-citation"))
            else:
                resolved.append(quotes.Cited(citation, *cited))
            continue
        near = citations.suggestion(citation.name, names)
        listing = ("Its attachments and its parents' are: " + "; ".join(quote(n, 60) for n in names[:12])
                   + ("; …" if len(names) > 12 else "") + ".") if names else (
                  "Neither it nor its parents have attachments yet: save the source first, e.g. with `///attach_url`.")
        fixes = (Fix(f"Change to [[{near}]]", (Edit(span, near),)),) if near and span is not None else ()
        warnings.append(Warning_(
            f"[[{citation.name}]] cites no attachment of {title} or of its parents"
            + (f"; did you mean [[{near}]]? " if near else ". ") + listing,
            span, "unknown-citation", fixes))
    checked = quotes.review(arg.value, resolved, [a for _, a in scope], draft.rules.part_chars)
    for flag in checked.flags:
        span = _offset_span(arg, flag.citation.name_start, flag.citation.name_end)
        fixes = (Fix(f"Cite [[{flag.moves_to}]]", (Edit(span, flag.moves_to),)),) \
            if flag.moves_to and span is not None else ()
        warnings.append(Warning_(flag.message, span, f"quote-{flag.kind}", fixes))
    return warnings, checked.note()


def _offset_span(arg: Arg, start: int, end: int) -> Span | None:
    """The span of `arg.value[start:end]` (on one line) in the message."""
    if arg.span is None:
        return None
    line, col = citations.position(arg.value, start)
    first_col = (arg.span.start.col if line == 0 else 0) + col
    return Span.on_line(arg.span.start.line + line, first_col, first_col + end - start)


def _line_span(arg: Arg, line: int | None) -> Span | None:
    """The span of line `line` (0-based, within the content) of a block argument."""
    if arg.span is None or line is None:
        return arg.span
    target = arg.span.start.line + line
    if target > arg.span.end.line:
        return arg.span
    start = arg.span.start.col if line == 0 else 0
    return Span.on_line(target, start, start + len(arg.value.split("\n")[line]))


# -- focus changes -----------------------------------------------------------------------------


def focus_down(draft: Draft, args: Args) -> Result:
    child = _subproblem(draft, args["title"])
    _not_held(draft, child, args["title"], "focus into it")
    note = ""
    if child.status is not Status.OPEN:
        note = f" It was {child.status.value}; it is open again."
        draft.set_status(child.path, Status.OPEN)
    _new_session(draft, focus=child.path)
    return Result(f"Focus moved down to {quote(child.title)}; a new session starts there.{note}")


def focus_up(draft: Draft, args: Args) -> Result:
    return _leave(draft, Status.DONE)


def fail_task_and_focus_up(draft: Draft, args: Args) -> Result:
    reason = args.get("reason")
    if reason is not None:
        _within_limit(draft, reason, "reason")
    return _leave(draft, Status.FAILED, reason.value.strip() if reason is not None else None)


FAILED_HEADING = "Failed: this problem could not be solved."
NO_REASON = "No reason was given."


def failure_report(reason: str, previous: str | None) -> str:
    """The report of a problem that failed with a reason: what its parent reads of it."""
    text = f"{FAILED_HEADING}\n\nReason: {reason}"
    if previous:
        text += f"\n\nThe report written before it failed:\n\n{previous}"
    return text


def _leave(draft: Draft, status: Status, reason: str | None = None) -> Result:
    problem = draft.focus
    running = draft.state.delegations(problem.path)
    if running:
        one = len(running) == 1
        raise CommandError(
            f"{_listing(running)} {'is' if one else 'are'} still being researched by {'its' if one else 'their'} "
            f"own researcher{'' if one else 's'}, so {quote(problem.title)} cannot be left yet: its report would "
            f"miss {'that one' if one else 'theirs'}. Work meanwhile on what does not depend on "
            f"{'it' if one else 'them'}, or end your message here: your next turn comes when "
            f"{'it has' if one else 'they have'} ended, with {'its report' if one else 'their reports'} under "
            "Child Reports.")
    warnings = []
    if status is Status.FAILED:
        if reason:
            problem.report = failure_report(reason, problem.report)
            problem.report_basis = staleness.basis_of(draft, problem)
            draft.mark(problem.path, REPORT_ASPECT)
        else:
            warnings.append(Warning_(
                f"No reason was given: the parent of {quote(problem.title)} will only see that it failed. "
                "Next time write the reason after the command: `///fail_task_and_focus_up <reason>`."))
    if status is Status.DONE:
        if problem.report is None:
            warnings.append(Warning_(
                f"{quote(problem.title)} has no report: its parent will see none of its findings. "
                "Write one with `<<< write_report` before focusing up."
            ))
        open_criteria = [str(n) for n, c in enumerate(problem.criteria, 1) if not c.done]
        if open_criteria:
            warnings.append(Warning_(f"Criteria {', '.join(open_criteria)} of {quote(problem.title)} are not done."))
        still_open = _open_subproblems(draft, problem.path)
        if still_open:
            warnings.append(Warning_(still_open))
    draft.set_status(problem.path, status)
    verb = "done" if status is Status.DONE else "failed"
    if problem.path == ROOT:
        draft.state = draft.state.evolve(phase=Phase.FINISHED)
        return Result(f"Marked the root problem {quote(problem.title)} {verb}; the research is finished.", warnings)
    parent = draft.problem(problem.path[:-1])
    assert parent is not None
    if problem.path == draft.state.root:  # a delegated researcher's root: its work ends here
        draft.state = draft.state.evolve(phase=Phase.FINISHED)
        delegator = draft.state.holder(parent.path).name
        return Result(
            f"Marked {quote(problem.title)} {verb}; your part of the research is finished: its report goes to "
            f"{quote(parent.title)}, which the researcher {quote(delegator)} works on.",
            warnings,
        )
    _new_session(draft, focus=parent.path)
    return Result(
        f"Marked {quote(problem.title)} {verb}; focus moved up to {quote(parent.title)} in a new session.",
        warnings,
    )


def _open_subproblems(draft: Draft, path: tuple[str, ...]) -> str:
    """The warning for a problem closed while some of its subproblems are still open (their
    findings are missing from its report), naming them; "" when none is open."""
    titles = [child.title for child in draft.children(path) if child.status is Status.OPEN]
    if not titles:
        return ""
    named = ", ".join(quote(t, 60) for t in titles[:10])
    if len(titles) > 10:
        named += f" and {len(titles) - 10:,} more"
    problem = draft.problem(path)
    title = quote(problem.title) if problem is not None else "this problem"
    if path == ROOT:
        return (f"The research is finished while {len(titles):,} subproblem(s) of {title} are still open: {named}. "
                "Their findings are not in its report; if that was not intended, the user can reopen the research.")
    return (f"{len(titles):,} subproblem(s) of {title} are still open: {named}. Their findings are not in its "
            "report: focus down into them, or fail them, before focusing up.")
