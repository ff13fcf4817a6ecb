"""The tools of SPEC §11 as an agent sees them: names, descriptions, input schemas, and the
check of the arguments a call brings.

An agent that has only the tool list must learn from it how to work, so the descriptions
say what each tool is for and when to call it, and `execute_message`'s holds a short
reference of the message language made from the command table (`engine.commands`, the
only list of commands); `get_prompt` holds the full one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..engine.core.text import control_sentence
from ..engine.language.commands import COMMANDS, Form
from ..engine.tree_view import PAGE

MAX_TEXT_BYTES = 1_000_000  # a message (or any other text argument) larger than this is refused
MAX_LIST_ITEMS = 50  # context texts or attachments per call
MAX_PATH_DEPTH = 200  # names in a problem's path


class BadArguments(ValueError):
    """A call's arguments do not fit the tool: one sentence for the agent."""


class ToolFailure(Exception):
    """The tool could not do what it was asked: one sentence; nothing was half-done."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    schema: dict[str, Any]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


RESEARCH = {
    "type": "string",
    "minLength": 1,
    "description": (
        "The research's folder: relative to the server's root folder (\".\" is the root itself), or an "
        "absolute path inside it. Anything outside the root is refused."
    ),
}

RESEARCHER = {
    "type": "string",
    "minLength": 1,
    "description": (
        "Whose turn it is: a researcher's name as list_researchers gives it (\"main\", or the titles from below "
        "the root down to the delegated problem joined by \" / \", e.g. \"Cache sizes / L1\"). Default: main."
    ),
}

PARALLEL = (
    "Parallel research: a message may delegate open subproblems (///delegate TITLE); each then gets a researcher of "
    "its own that works on it at the same time as the others, with its own prompt and messages, until it focuses up "
    "from its problem. If you can start sub-agents, give each delegated researcher to one: a sub-agent per "
    "researcher, each calling get_prompt and execute_message with its `researcher` name (list_researchers names "
    "them), while you go on as main; calls for different researchers may run at once. Otherwise work through "
    "them yourself, one researcher's turn at a time. A problem whose delegations are still running cannot be "
    "focused up from: its prompt says which it waits for."
)


def _command_reference() -> str:
    """One line per command of the command table: how it is written and what it does."""
    lines = []
    for spec in COMMANDS.values():
        if spec.form is Form.BLOCK:
            written = f"<<< {spec.name} " + " ".join(f"///{a.name}" for a in spec.arguments) + " >>>"
        else:
            written = spec.usage()
            if spec.accepts_block:
                written += " (or a block: <<< " + spec.name + " " + " ".join(f"///{a.name}" for a in spec.arguments) + " >>>)"
        lines.append(f"- {written} ({spec.kind.label}): {spec.summary}")
    return "\n".join(lines)


MESSAGE_LANGUAGE = f"""\
A message is free text (your thinking, drafts) with commands in it; only the commands do something. \
A command starts at the beginning of a line:
- no argument: ///focus_up
- a one-line argument: ///add_criteria The answer cites at least three sources
- a block, for arguments of several lines; each section starts with ///name on its own line, and the \
closing >>> line is mandatory:
<<< add_subproblem
///title
Compare tiling strategies
///content
Which tile sizes fit the L1 cache on common CPUs?
>>>

Commands (kind in brackets; get_prompt explains each with its rules):
{_command_reference()}

Rules: at most one focus change (focus_down, focus_up, fail_task_and_focus_up) per message, and it must be \
the last command. A failed command changes nothing and is reported with how to fix it. Write SHUT_DOWN_DEEP_RESEARCHER \
anywhere in a message only to stop the whole research."""


TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in (
    ToolSpec(
        "new_research", "Start a new research",
        "Create a new research in a folder inside the server's root (made if missing; it must not hold a research "
        "already). The user's instruction is shown at the top of every prompt. Then call get_prompt and follow it: "
        "the first message defines the problem (define_problem). To continue an existing research, do not call this: "
        "call get_prompt.",
        {
            "type": "object",
            "properties": {
                "research": RESEARCH,
                "instruction": {"type": "string", "minLength": 1,
                                "description": "The user's question or task for the research, in their words."},
                "context": {
                    "type": "array", "items": {"type": "string"}, "maxItems": MAX_LIST_ITEMS,
                    "description": "Texts the researcher must always see (background, constraints, what the user "
                                   "already knows); each becomes one context item of every prompt.",
                },
                "attachments": {
                    "type": "array", "items": {"type": "string"}, "maxItems": MAX_LIST_ITEMS,
                    "description": "Material to research: http(s) URLs (fetched and turned into text) or files "
                                   "(relative to the server's root, or absolute inside it). They become attachments "
                                   "of the problem once it is defined. If one cannot be read, nothing is created.",
                },
            },
            "required": ["research", "instruction"],
            "additionalProperties": False,
        },
        open_world=True,
    ),
    ToolSpec(
        "get_prompt", "Read the prompt",
        "The prompt: everything the researcher (you) sees now. It explains the message language and every command "
        "valid now, shows the user's instruction and context, the problem in focus (its definition, criteria of done, "
        "subproblems, attachments, reports) with its parents, and this session's earlier messages with the system's "
        "replies. Read it before each message: it changes after every executed message. The same text as "
        "`deep-research prompt`. With `researcher`: that delegated researcher's prompt (each researcher sees its own "
        "problem).\n\n" + PARALLEL,
        {
            "type": "object",
            "properties": {"research": RESEARCH, "researcher": RESEARCHER},
            "required": ["research"],
            "additionalProperties": False,
        },
        read_only=True, idempotent=True,
    ),
    ToolSpec(
        "execute_message", "Execute a message",
        "Send your next message to the research and get the system's reply: an Execution Status Report (one entry "
        "per command), an Errors Report (what failed and how to fix it) and, unless the message ended the session, "
        "a request to continue. A failed command is reported in the reply, not as a tool error; it changed "
        "nothing, so send it again corrected. The message runs all or nothing on disk. Commands above the research's "
        "approval mode run only if the user approves them. After a focus change, call get_prompt: a new session "
        "starts and the prompt shows the new problem. With `researcher`: the message of that delegated researcher "
        "(see list_researchers); messages of different researchers may be sent at once.\n\n" + MESSAGE_LANGUAGE,
        {
            "type": "object",
            "properties": {
                "research": RESEARCH,
                "message": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_BYTES,
                            "description": "The message: free text with commands (at most 1 MB)."},
                "researcher": RESEARCHER,
            },
            "required": ["research", "message"],
            "additionalProperties": False,
        },
        open_world=True,
    ),
    ToolSpec(
        "list_researchers", "List the researchers",
        "Every researcher working on the research, main first, as JSON: `name` (what get_prompt and "
        "execute_message take as `researcher`), `document` (its message document on disk), `focus` (the titles "
        "from below the root down to its current problem, joined by \" / \"; empty at the root) and `state` "
        "(`working`, or `waiting` for its own delegations to end: it cannot focus up until they do). Call it after "
        "a message that delegates, and whenever you need to know who is still at work.\n\n" + PARALLEL,
        {
            "type": "object",
            "properties": {"research": RESEARCH},
            "required": ["research"],
            "additionalProperties": False,
        },
        read_only=True, idempotent=True,
    ),
    ToolSpec(
        "research_tree", "Read the problem tree",
        "The problem tree as JSON, a page at a time, whatever its size. Without `path`: the root with the path to "
        "the problem in focus expanded and every other problem collapsed (`children` null, `hasChildren` says if it "
        "has some). With `path` (a problem's `path` from an earlier answer: its folder names from the root, [] for "
        f"the root): that problem's children, {PAGE} at a time from `offset`. Each problem has its title, status "
        "(open, done, failed), criteria met and total, and the URI of its definition resource; a delegated problem "
        "also its `researcher` (name, state) while that researcher works. With `researcher` (see list_researchers): "
        "that researcher's view, its own subtree (the problem delegated to it at the top) with the path to its focus "
        "expanded and `focused` on its focus; with `path` too, any problem's children with its focus marked. "
        "Default: main, whose subtree is the whole tree. The answer names whose view it is (`researcher`).",
        {
            "type": "object",
            "properties": {
                "research": RESEARCH,
                "researcher": {**RESEARCHER, "description": (
                    "Whose view: a researcher's name as list_researchers gives it (\"main\", or e.g. \"Cache sizes / "
                    "L1\"). Default: main.")},
                "path": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_PATH_DEPTH,
                         "description": "A problem's path as given in an earlier answer ([] for the root)."},
                "offset": {"type": "integer", "minimum": 0,
                           "description": f"With `path`: the first child to list (0, {PAGE}, {2 * PAGE} …)."},
            },
            "required": ["research"],
            "additionalProperties": False,
        },
        read_only=True, idempotent=True,
    ),
    ToolSpec(
        "undo_message", "Undo the last message",
        "Take back the research's last executed message, whichever researcher sent it (the reply names the "
        "researcher if it was not main): the tree, every researcher's focus, the session and the prompts return to "
        "what they were before it, all or nothing, and the reply shows the message's text. Refused (nothing changes) "
        "if a file it wrote was edited since. Call it again to take back the one before. A message that was not "
        "executed (it waited for approval, or the user declined it) is not taken back: nothing of it was written; "
        "the reply says which message was. Then call get_prompt.",
        {
            "type": "object",
            "properties": {"research": RESEARCH},
            "required": ["research"],
            "additionalProperties": False,
        },
        destructive=True,
    ),
    ToolSpec(
        "export_dossier", "Export the dossier",
        "Write the whole research (every problem, criterion, attachment and report, and the timeline) as one "
        "self-contained HTML file, dossier.html in the research's folder, for people to read; says where it is.",
        {
            "type": "object",
            "properties": {"research": RESEARCH},
            "required": ["research"],
            "additionalProperties": False,
        },
        idempotent=True,
    ),
    ToolSpec(
        "compile_report", "Compile the report",
        "Compile the whole research into one report to read and pass on, written as report.<ext> in the research's "
        "folder: the title and instruction, the root's report as the summary, contents, every problem depth first "
        "(definition, criteria, report and its state), References numbered by first citation (each [[NAME#N]] "
        "becomes [k, part N]), the sources consulted but not cited, and the Citation check (each quote looked for in "
        "the part it cites, numbers of citing sentences the part lacks, lengths, repeated paragraphs). Needs no "
        "model. Says where it is and what the Citation check found.",
        {
            "type": "object",
            "properties": {
                "research": RESEARCH,
                "format": {"type": "string", "enum": ["md", "html", "docx", "odt", "pdf", "csl-json", "bibtex"],
                           "description": "md (the default), html, docx, odt, pdf, csl-json or bibtex (the "
                                          "references alone)."},
            },
            "required": ["research"],
            "additionalProperties": False,
        },
        idempotent=True,
    ),
)}


def check_arguments(spec: ToolSpec, arguments: Any) -> dict[str, Any]:
    """The call's arguments if they fit the tool's schema; BadArguments with a sentence if not."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise BadArguments(f"{spec.name} takes an object of named arguments, not {_kind(arguments)}.")
    properties: dict[str, Any] = spec.schema["properties"]
    unknown = sorted(str(k) for k in arguments if k not in properties)
    if unknown:
        raise BadArguments(f"{spec.name} has no argument {', '.join(map(repr, unknown))[:200]}; "
                           f"its arguments are {', '.join(properties)}.")
    for name in spec.schema["required"]:
        if name not in arguments:
            raise BadArguments(f"{spec.name} needs the argument `{name}`: {properties[name]['description']}")
    for name, value in arguments.items():
        _check_value(spec.name, name, properties[name], value)
    return arguments


def _check_value(tool: str, name: str, schema: dict[str, Any], value: Any) -> None:
    kind = schema["type"]
    if kind == "string":
        if not isinstance(value, str):
            raise BadArguments(f"`{name}` of {tool} must be a string, not {_kind(value)}.")
        if len(value) > MAX_TEXT_BYTES or len(value.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
            raise BadArguments(f"`{name}` of {tool} is larger than 1 MB ({len(value.encode('utf-8', 'surrogatepass')):,} "
                               "bytes); nothing was done. Send less at a time.")
        if schema.get("minLength") and not value.strip():
            raise BadArguments(f"`{name}` of {tool} is empty.")
        refusal = control_sentence(f"`{name}` of {tool}", value, name=name == "research") if name != "message" else None
        if refusal:  # a NUL, an escape, an override: never in a name, an instruction or a path
            raise BadArguments(refusal)
    elif kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadArguments(f"`{name}` of {tool} must be a whole number, not {_kind(value)}.")
        if value < schema.get("minimum", value):
            raise BadArguments(f"`{name}` of {tool} must be at least {schema['minimum']}, not {value}.")
    elif kind == "array":
        if not isinstance(value, list):
            raise BadArguments(f"`{name}` of {tool} must be a list of strings, not {_kind(value)}.")
        if len(value) > schema.get("maxItems", len(value)):
            raise BadArguments(f"`{name}` of {tool} holds {len(value)} items; at most {schema['maxItems']}.")
        for number, item in enumerate(value, 1):
            if not isinstance(item, str):
                raise BadArguments(f"`{name}` of {tool} must hold only strings, not {_kind(item)}.")
            refusal = control_sentence(f"Item {number} of `{name}` of {tool}", item, name=name == "path")
            if refusal:
                raise BadArguments(refusal)
        if sum(len(item.encode("utf-8", "surrogatepass")) for item in value) > MAX_TEXT_BYTES:
            raise BadArguments(f"`{name}` of {tool} is larger than 1 MB in all; nothing was done.")


def _kind(value: Any) -> str:
    names = {bool: "true or false", int: "a number", float: "a number", str: "a string", list: "a list",
             dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)
