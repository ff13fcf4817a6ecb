"""Checking a parsed command against the command table, and binding its arguments.

These checks need no research state: unknown names ("did you mean…"), the wrong form
(a block command written on one line and the reverse), missing, unknown, duplicate
and empty sections, arguments where none are taken. Each finding is a diagnostic with
a precise range and, where the fix is mechanical, a quick fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import get_close_matches

from ..core.names import look_alike, one_line
from ..core.text import Diagnostic, Edit, Fix, Pos, Severity, Span, control_characters, describe_character
from ..execution.protocol import Arg, Args
from . import commands
from .commands import ArgType, CommandSpec, Form
from .parser import BLOCK_CLOSE, Command


@dataclass
class Binding:
    command: Command
    spec: CommandSpec | None
    args: Args | None  # None when the command cannot run as written
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def error(self) -> Diagnostic | None:
        return next((d for d in self.diagnostics if d.is_error), None)


def bind(command: Command) -> Binding:
    spec = commands.get(command.name)
    if spec is None:
        return Binding(command, None, None, [_unknown(command)] if command.name else [])
    binding = Binding(command, spec, None)
    if spec.form is Form.BLOCK:
        if command.is_block:
            binding.args = _bind_block(command, spec, binding.diagnostics)
        else:
            binding.diagnostics.append(_block_written_as_line(command, spec))
    elif command.is_block:
        if spec.also_block:
            binding.args = _bind_block(command, spec, binding.diagnostics)
        else:
            binding.diagnostics.append(_line_written_as_block(command, spec))
    elif spec.form is Form.NONE:
        binding.args = {}
        if command.argument is not None and command.argument_span is not None:
            binding.diagnostics.append(_error(
                command.argument_span, "unexpected-argument",
                f"`{spec.name}` takes no argument: write `///{spec.name}` alone on its line.",
                Fix("Remove the argument", (Edit(Span(command.name_span.end, command.argument_span.end), ""),)),
            ))
    else:
        argument = spec.arguments[0]
        if command.argument is None and argument.optional:
            binding.args = {}
        elif command.argument is None:
            binding.diagnostics.append(_error(
                command.name_span, "missing-argument",
                f"`{spec.name}` needs its {argument.type.value} on the same line: `{spec.usage()}`.",
            ))
        else:
            binding.args = {argument.name: Arg(command.argument, command.argument_span)}
    if binding.args:
        binding.diagnostics.extend(_control_characters(command, binding.args))
    if binding.error is not None:
        binding.args = None
    return binding


def _control_characters(command: Command, args: Args) -> list[Diagnostic]:
    """Arguments holding control characters (engine/core/text.py): refused, whatever the command,
    with the first one's place and a fix that removes them all (docs/decisions.md, issue 25)."""
    raw: list[tuple[str, str, Span | None]] = []  # (what, text as written, where it starts)
    if command.is_block:
        raw = [(f"`///{s.name}` section", s.content, s.content_span) for s in command.sections if s.name in args]
    elif command.argument is not None:
        raw = [("argument", command.argument, command.argument_span)]
    found = []
    for what, text, span in raw:
        places = control_characters(text)
        if not places or span is None:
            continue
        positions = [_position_in(text, span.start, index) for index in places]
        edits = tuple(Edit(Span(at, Pos(at.line, at.col + 1)), "") for at in positions)
        first = positions[0]
        count = f"{len(places)} control characters, the first" if len(places) > 1 else "a control character,"
        found.append(_error(
            Span(first, Pos(first.line, first.col + 1)), "control-character",
            f"The {what} of `{command.name}` holds {count} {describe_character(text[places[0]])} (line "
            f"{first.line + 1}, column {first.col + 1}). Control characters (other than tabs and line breaks) and "
            "bidirectional overrides are not taken: they could drive a terminal or make text read in another "
            "order than it is stored. Remove them.",
            Fix("Remove the control characters", edits),
        ))
    return found


def _position_in(text: str, start: Pos, index: int) -> Pos:
    """The document position of `text[index]`, for text that begins at `start` and continues on
    the following lines from their first column (a line argument, a section's content)."""
    line = text.count("\n", 0, index)
    column = index - (text.rfind("\n", 0, index) + 1)
    return Pos(start.line + line, (start.col if line == 0 else 0) + column)


def _bind_block(command: Command, spec: CommandSpec, out: list[Diagnostic]) -> Args | None:
    args: Args = {}
    for section in command.sections:
        argument = spec.section(section.name)
        if argument is None:
            if section.name:
                out.append(_unknown_section(command, spec, section.name, section.name_span))
            continue
        if section.name in args:
            out.append(_error(
                section.header, "duplicate-section",
                f"`///{section.name}` appears twice in `{spec.name}`; only the first is used. Merge them into one.",
            ))
            continue
        if not section.content.strip():
            out.append(_error(
                section.header, "empty-section",
                f"The `///{section.name}` section of `{spec.name}` is empty: write the {argument.doc.split(';')[0]} "
                f"on the lines after `///{section.name}`.",
            ))
            continue
        value = section.content
        if argument.type in (ArgType.LINE, ArgType.SUBPROBLEM):
            value = one_line(section.content)
            if "\n" in section.content.strip() and section.content_span is not None:
                out.append(Diagnostic(
                    section.content_span, Severity.WARNING, "multi-line-title",
                    f"`///{section.name}` is one line: these lines will be joined into {value!r}.",
                ))
        args[section.name] = Arg(value, section.content_span)
    for argument in spec.arguments:
        if argument.name not in args and command.section(argument.name) is None and not argument.optional:
            out.append(_missing_section(command, spec, argument.name))
    return args


def _unknown(command: Command) -> Diagnostic:
    owners = [s.name for s in commands.COMMANDS.values() if command.name in s.section_names]
    if owners and not command.is_block:
        blocks = ", ".join(f"`<<< {name}`" for name in owners)
        return Diagnostic(
            command.name_span, Severity.ERROR, "section-outside-block",
            f"`///{command.name}` is a section, not a command: it belongs inside a block such as {blocks}, "
            "after the `<<< name` line and before the closing `>>>`.",
        )
    suggestion = commands.suggest(command.name)
    if suggestion:
        message = f"Unknown command `{command.name}`. Did you mean `{suggestion}`?{look_alike(command.name, suggestion)}"
        fixes = (Fix(f"Change to `{suggestion}`", (Edit(command.name_span, suggestion),)),)
    else:
        message = f"Unknown command `{command.name}`. Commands are: " + ", ".join(
            f"`{name}`" for name in commands.COMMANDS
        ) + "."
        fixes = ()
    return Diagnostic(command.name_span, Severity.ERROR, "unknown-command", message, fixes)


def _unknown_section(command: Command, spec: CommandSpec, name: str, span: Span) -> Diagnostic:
    sections = " and ".join(f"`///{n}`" for n in spec.section_names)
    if commands.get(name) is not None:
        return _error(
            span, "command-inside-block",
            f"`///{name}` is a command, but it is inside the `{spec.name}` block, whose sections are "
            f"{sections}. Close the block with a `>>>` line before it.",
            Fix("Close the block before this line", (Edit(Span(Pos(span.start.line, 0), Pos(span.start.line, 0)), BLOCK_CLOSE + "\n"),)),
        )
    near = get_close_matches(name, list(spec.section_names), n=1, cutoff=0.5)
    fixes = (Fix(f"Change to `///{near[0]}`", (Edit(span, near[0]),)),) if near else ()
    hint = f" Did you mean `///{near[0]}`?" if near else ""
    return _error(span, "unknown-section", f"`{spec.name}` has no section `///{name}`; its sections are {sections}.{hint}", *fixes)


def _missing_section(command: Command, spec: CommandSpec, name: str) -> Diagnostic:
    argument = spec.section(name)
    assert argument is not None
    fixes: tuple[Fix, ...] = ()
    if command.closed:
        at = Pos(command.span.end.line, 0)
        fixes = (Fix(f"Add the `///{name}` section", (Edit(Span(at, at), f"///{name}\n{argument.placeholder}\n"),)),)
    return Diagnostic(
        command.header, Severity.ERROR, "missing-section",
        f"`{spec.name}` is missing its `///{name}` section ({argument.doc}).", fixes,
    )


def _block_written_as_line(command: Command, spec: CommandSpec) -> Diagnostic:
    first = spec.arguments[0]
    lines = [f"<<< {spec.name}"]
    for argument in spec.arguments:
        value = command.argument if argument is first and command.argument else argument.placeholder
        lines += [f"///{argument.name}", value]
    lines.append(BLOCK_CLOSE)
    usage = "\n".join(lines)
    return _error(
        command.name_span, "block-command-on-one-line",
        f"`{spec.name}` is a block command: write it as `<<< {spec.name}` with the sections "
        + " and ".join(f"`///{n}`" for n in spec.section_names) + ", closed by `>>>`.",
        Fix(f"Rewrite as a `<<< {spec.name}` block", (Edit(command.header, usage),)),
    )


def _line_written_as_block(command: Command, spec: CommandSpec) -> Diagnostic:
    if spec.form is Form.NONE:
        replacement, usage = f"///{spec.name}", f"`///{spec.name}` alone on its line"
    else:
        content = next((one_line(s.content) for s in command.sections if s.content.strip()), spec.arguments[0].placeholder)
        replacement, usage = f"///{spec.name} {content}", f"`///{spec.name} <{spec.arguments[0].type.value}>` on one line"
    fixes = (Fix(f"Rewrite as `///{spec.name}`", (Edit(command.span, replacement),)),) if command.closed else ()
    return _error(command.name_span, "line-command-as-block", f"`{spec.name}` is not a block command: write {usage}.", *fixes)


def _error(span: Span, code: str, message: str, *fixes: Fix) -> Diagnostic:
    return Diagnostic(span, Severity.ERROR, code, message, tuple(fixes))
