"""Resources: a research's prompt, each problem's definition, criteria and report, and one part
of an attachment or context item (what `///read NAME#N` shows: engine/retrieval/parts.py).

    deep-research://research/{research}/prompt
    deep-research://research/{research}/problem{/path*}/definition     (criteria, report)
    deep-research://research/{research}/problem{/path*}/attachment/{name}/{part}
    deep-research://research/{research}/context/{name}/{part}

`research` is the research's folder relative to the server's root ("." for the root
itself), percent-encoded as one segment; `path` is the problem's folder names from the
root problem, one segment each (none for the root problem), as `research_tree` gives them;
`name` an attachment's name (of that problem itself) or a context item's, percent-encoded, and
`part` its part's number.

Any problem can be read through the templates; the list names only a bounded
neighbourhood, never the whole tree: for each research used lately (and the root's own),
its prompt, the problems from the root down to the focus, and the focus's first
subproblems. Reading never writes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import quote, unquote

import mcp_types as types

from ..engine.core.state import Phase, ProblemPath
from ..engine.research import Research
from ..engine.retrieval.parts import layout
from ..engine.store import CRITERIA, DEFINITION, REPORT
from ..engine.tree import citations
from ..engine.tree_view import is_folder_name
from .workspace import Refusal, Workspace

PREFIX = "deep-research://research/"
ASPECTS = {"definition": DEFINITION, "criteria": CRITERIA, "report": REPORT}
CHILDREN_LISTED = 20  # subproblems of the focus named in the list
MAX_URI = 16_384
NO_REPORT = "No report has been written for this problem yet.\n"
MARKDOWN = "text/markdown"

TEMPLATES = [
    types.ResourceTemplate(
        uri_template=PREFIX + "{research}/prompt", name="prompt", title="Prompt of a research",
        description="What the researcher sees now (the same text as the get_prompt tool). `research`: the folder "
                    "relative to the server's root, percent-encoded, \".\" for the root itself.",
        mime_type=MARKDOWN,
    ),
    *(
        types.ResourceTemplate(
            uri_template=PREFIX + "{research}/problem{/path*}/" + aspect, name=f"problem {aspect}",
            title=f"A problem's {label}",
            description=f"The {label} of the problem at `path` (its folder names from the root problem, as "
                        "research_tree gives them; none for the root problem).",
            mime_type=MARKDOWN,
        )
        for aspect, label in (("definition", "definition"), ("criteria", "criteria of done"),
                              ("report", "report (3 pages at most)"))
    ),
    types.ResourceTemplate(
        uri_template=PREFIX + "{research}/problem{/path*}/attachment/{name}/{part}", name="attachment part",
        title="One part of an attachment",
        description="Part `part` (from 1) of the attachment `name` (percent-encoded) of the problem at `path`: the "
                    "text `///read NAME#N` shows. A long source is divided into parts; the prompt shows its outline.",
        mime_type=MARKDOWN,
    ),
    types.ResourceTemplate(
        uri_template=PREFIX + "{research}/context/{name}/{part}", name="context part",
        title="One part of a context item", description="Part `part` (from 1) of the context item `name`.",
        mime_type=MARKDOWN,
    ),
]


class ResourceMissing(Exception):
    """A URI that names nothing this server can read: one sentence."""


@dataclass(frozen=True)
class Address:
    research: str  # as the tools name it
    aspect: str  # "prompt", one of ASPECTS, or PART (of an attachment of `path`, or with `context`, of a context item)
    path: ProblemPath = ()
    name: str = ""  # the attachment's or context item's name (PART)
    part: int = 0
    context: bool = False


PART = "part"


def prompt_uri(research: str) -> str:
    return f"{PREFIX}{_segment(research)}/prompt"


def problem_uri(research: str, path: ProblemPath, aspect: str) -> str:
    return f"{PREFIX}{_segment(research)}/problem" + "".join(f"/{_segment(n)}" for n in path) + f"/{aspect}"


def _segment(text: str) -> str:
    return quote(text, safe="")


def parse(uri: str) -> Address:
    if not isinstance(uri, str) or not uri.startswith(PREFIX) or len(uri) > MAX_URI:
        raise ResourceMissing(f"Not a Deep Research resource: {str(uri)[:200]!r} (they start with {PREFIX}).")
    parts = uri[len(PREFIX):].split("/")
    research = unquote(parts[0])
    if not research:
        raise ResourceMissing(f"{uri[:200]!r} names no research.")
    if parts[1:] == ["prompt"]:
        return Address(research, "prompt")
    if len(parts) == 4 and parts[1] == "context" and parts[3].isdigit():
        return Address(research, PART, name=unquote(parts[2]), part=int(parts[3]), context=True)
    if len(parts) >= 5 and parts[1] == "problem" and parts[-3] == "attachment" and parts[-1].isdigit():
        names = tuple(unquote(p) for p in parts[2:-3])
        if all(is_folder_name(n) for n in names):
            return Address(research, PART, names, unquote(parts[-2]), int(parts[-1]))
    if len(parts) >= 3 and parts[1] == "problem" and parts[-1] in ASPECTS:
        names = tuple(unquote(p) for p in parts[2:-1])
        if all(is_folder_name(n) for n in names):
            return Address(research, parts[-1], names)
    raise ResourceMissing(f"{uri[:200]!r} is not a resource of this server; see the resource templates.")


def read(workspace: Workspace, address: Address) -> str:
    """The resource's text; ResourceMissing if there is no such research or problem."""
    try:
        research = workspace.open(address.research)
    except Refusal as refusal:
        raise ResourceMissing(str(refusal)) from None
    if address.aspect == "prompt":
        return research.prompt(research.config().max_prompt_tokens)
    tree = research.tree
    if address.aspect == PART:
        return _part(research, address)
    if research.state().phase is Phase.NO_PROBLEM or not tree.exists(address.path):
        raise ResourceMissing(f"The research {address.research!r} has no problem at {list(address.path)!r}.")
    target = tree.folder(address.path) / ASPECTS[address.aspect]
    text = research.guard.read_text(target)  # nothing outside the research, nothing that blocks
    if text is None:
        why = research.guard.why_not(target)
        if address.aspect == "report" and why is None:
            return NO_REPORT
        raise ResourceMissing(f"The {address.aspect} of the problem at {list(address.path)!r} is not read: "
                              f"{why or 'it cannot be read'}.")
    return text


def _part(research: Research, address: Address) -> str:
    """One part's text, as `///read` shows it (the attachment of that problem itself, by name)."""
    if address.context:
        items = [a for a in research.context()]
        where = "the context"
    else:
        if research.state().phase is Phase.NO_PROBLEM or not research.tree.exists(address.path):
            raise ResourceMissing(f"The research {address.research!r} has no problem at {list(address.path)!r}.")
        items = research.tree.attachments(address.path)
        where = f"the problem at {list(address.path)!r}"
    found = citations.resolve(address.name, [(a.name, a) for a in items])
    if found is None:
        raise ResourceMissing(f"{where.capitalize()} has no attachment named {address.name!r}.")
    shape = layout(found.content, research.rules().part_chars, found.reading)
    if not 1 <= address.part <= shape.count:
        raise ResourceMissing(f"{found.name!r} has {shape.count:,} part(s), #1 to #{shape.count:,}: there is no part "
                              f"{address.part:,}.")
    return shape.text(found.content, address.part) + "\n"


def digest(workspace: Workspace, uri: str) -> str:
    """What a subscribed resource holds now, as a digest ("" when it cannot be read)."""
    try:
        return hashlib.sha256(read(workspace, parse(uri)).encode("utf-8", "surrogatepass")).hexdigest()
    except (ResourceMissing, OSError):
        return ""


def listing(workspace: Workspace) -> list[types.Resource]:
    """The bounded neighbourhood of every known research (see the module docstring)."""
    found: list[types.Resource] = []
    for research in workspace.known():
        found.extend(_neighbourhood(workspace.name(research.root), research))
    return found


def _neighbourhood(name: str, research: Research) -> list[types.Resource]:
    shown = "the root folder" if name == "." else name
    out = [types.Resource(uri=prompt_uri(name), name=f"{name}: prompt", title=f"Prompt ({shown})",
                          description=f"What the researcher sees now in the research at {shown}.", mime_type=MARKDOWN)]
    state = research.state()
    tree = research.tree
    if state.phase is Phase.NO_PROBLEM:
        return out
    chain = [state.focus[:depth] for depth in range(len(state.focus) + 1)]
    children = sorted(tree.child_names(state.focus))[:CHILDREN_LISTED] if tree.exists(state.focus) else []
    for path in chain + [state.focus + (child,) for child in children]:
        problem = tree.problem(path, report=False)
        if problem is None:
            continue
        role = "focus" if path == state.focus else ("parent" if len(path) < len(state.focus) else "subproblem")
        aspects = ["definition", "criteria"]
        if research.cache.is_file(tree.folder(path) / REPORT):
            aspects.append("report")
        for aspect in aspects:
            out.append(types.Resource(
                uri=problem_uri(name, path, aspect), name=f"{name}: {problem.title}: {aspect}",
                title=f"{problem.title}: {aspect}",
                description=f"The {aspect} of “{problem.title}” ({role}; research at {shown}).", mime_type=MARKDOWN,
            ))
    return out
