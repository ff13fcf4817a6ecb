"""A GBNF grammar for the next message, generated from the command table and the state.

llama.cpp (`llama-server`'s `grammar` field) then lets a model write only messages that
parse, and only commands that can run now:

- free text lines, and only the commands valid in the current phase (`engine.commands`,
  the one list of commands; nothing here names a command);
- blocks with exactly their sections, in the table's order, each non-empty, closed by `>>>`;
- `focus_down` and subproblem titles limited to the current subproblems, criterion
  numbers to the open criteria; a command that has nothing to act on is left out;
- what would surely fail, or is surely wrong, is ruled out: a new subproblem or attachment
  named like an existing one, and the sample texts of the prompt's examples as arguments
  (a small model copies them);
- at least one command per message, at most one focus change, and it ends the message
  (defining the problem ends it too: a new session starts after it).

Free text may not start a line with `/`, `<` or `>`, so it can never be mistaken for a
command. `SHUT_DOWN_DEEP_RESEARCHER` is not ruled out (GBNF cannot exclude a substring
cheaply); the prompt explains it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..engine import commands
from ..engine.commands import ArgType, CommandSpec, Form
from ..engine.prompt import example_texts
from ..engine.state import Phase

PROSE_LINES = 6  # free-text lines allowed between two commands: enough to think, not to ramble
REPORT_START = "Summarized problem definition:"


@dataclass(frozen=True)
class GrammarInputs:
    """The parts of the state a grammar depends on (plain values)."""

    phase: Phase
    subproblems: tuple[str, ...] = ()
    open_criteria: tuple[int, ...] = ()
    attachments: tuple[str, ...] = ()
    examples: frozenset[str] = field(default_factory=lambda: frozenset(example_texts()))

    @classmethod
    def of(cls, research) -> GrammarInputs:  # research: engine.research.Research
        state = research.state()
        if state.phase is not Phase.IN_FOCUS:
            return cls(state.phase)
        focus = research.tree.problem(state.focus)
        return cls(
            state.phase,
            tuple(child.title for child in research.tree.children(state.focus)),
            tuple(n for n, c in enumerate(focus.criteria, 1) if not c.done) if focus else (),
            tuple(a.name for a in research.tree.attachments(state.focus)),
        )


def build_grammar(inputs: GrammarInputs, *, exclude_examples: bool = True) -> str:
    """The GBNF grammar (root rule `root`) of every message the model may write now."""
    return _Builder(inputs, exclude_examples).build()


class _Builder:
    def __init__(self, inputs: GrammarInputs, exclude_examples: bool) -> None:
        self.inputs = inputs
        self.examples = set(inputs.examples) if exclude_examples else set()
        self.rules: dict[str, str] = {}
        self._line_rules: dict[frozenset[str], str] = {}

    def build(self) -> str:
        steps, focus = [], []
        for spec in commands.valid_in(self.inputs.phase):
            rule = self._command(spec)
            if rule is not None:
                (focus if spec.changes_focus or spec.name == "define_problem" else steps).append(rule)
        self.rules["any"] = "[^\\n]*"
        self.rules["text-line"] = '([^\\n/<>] [^\\n]*)? "\\n"'
        self.rules["prose"] = f"text-line{{0,{PROSE_LINES}}}"
        ends = " | ".join(focus) if focus else None
        if steps:
            self.rules["step"] = " | ".join(steps)
            root = f"prose ((step prose)+ ({ends})? | {ends})" if ends else "prose (step prose)+"
        elif ends:
            root = f"prose ({ends})"
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
            value = self._value(spec, spec.arguments[0])
            if value is None:
                return None
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
            titles = self.inputs.subproblems
            return "(" + " | ".join(_literal(t) for t in titles) + ")" if titles else None
        if argument.type is ArgType.CRITERION:
            numbers = self.inputs.open_criteria
            return "(" + " | ".join(_literal(str(n)) for n in numbers) + ")" if numbers else None
        excluded = set(self.examples)
        if spec.name == "add_subproblem" and argument.name == "title":
            excluded |= set(self.inputs.subproblems)
        if spec.name == "add_attachment" and argument.name == "name":
            excluded |= set(self.inputs.attachments)
        first = self._line_except(excluded)
        if argument.type is ArgType.LINE:
            return first
        if spec.name == "write_report":  # the structure the report check looks for
            return f'{_literal(REPORT_START)} any "\\n" text-line*'
        return f'{first} "\\n" text-line*'

    def _line_except(self, words: set[str]) -> str:
        """A rule for one non-empty line that is none of `words` and does not start with
        whitespace or a command character: the complement of a trie of the words."""
        words = {w for w in words if w and "\n" not in w}
        key = frozenset(words)
        if key in self._line_rules:
            return self._line_rules[key]
        prefix = f"line{len(self._line_rules)}"
        self._line_rules[key] = prefix
        trie: dict = {}
        for word in sorted(words):
            node = trie
            for char in word:
                node = node.setdefault(char, {})
            node[None] = {}  # the end of a word
        counter = [0]

        def emit(node: dict, name: str, depth: int) -> None:
            alternatives = []
            if depth > 0 and None not in node:
                alternatives.append('""')
            banned = {c for c in node if c is not None} | {"\n"}
            if depth == 0:
                banned |= {" ", "\t", "/", "<", ">"}
            alternatives.append(f"{_char_class(banned)} any")
            for char in sorted(c for c in node if c is not None):
                if depth == 0 and char in " \t/<>":
                    continue
                counter[0] += 1
                child = f"{prefix}-{counter[0]}"
                emit(node[char], child, depth + 1)
                alternatives.append(f"{_literal(char)} {child}")
            self.rules[name] = " | ".join(alternatives)

        emit(trie, prefix, 0)
        return prefix


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
