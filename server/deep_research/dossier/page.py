"""The dossier page, written as a stream: head, navigation tree, one section per problem,
the journal's timeline.

Every text from the research (titles, definitions, criteria, names, front matter, journal
fields) goes through `html.escape` or the safe markdown renderer; the only markup is
ours. The page's Content Security Policy allows nothing but its own inline style sheet
and script (by their hashes): no network, and no other script even if some text ever
slipped through unescaped.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from importlib import resources
from pathlib import Path
from typing import TextIO

from .. import __version__
from ..engine.core.state import ProblemPath, Status
from ..engine.retrieval.parts import layout, part_name
from ..engine.settings.rules import rules_of
from ..engine.settings.table import read as read_settings
from ..engine.store import ATTACHMENTS, CONTEXT, INSTRUCTION, JOURNAL, bookkeeping
from ..engine.tree import citations, formats, staleness
from ..engine.tree.accounting import Ledger, summary
from ..engine.tree.model import Attachment, Problem
from ..engine.tree.reader import Tree, read_attachments
from .journal import Event, Message, timeline, undone_messages
from .markdown import Cited, Markdown, safe_url

# Front-matter keys that may hold an attachment's source: the evidence commands write
# `source` (the URL, path or query as asked) and `final_url` (after redirects); people and
# other tools use the rest.
SOURCE_KEYS = ("source", "final_url", "url", "source_url", "sourceUrl", "href", "link", "origin", "uri")
_SKIP_META = {"name", "added"}
_STATUS = {Status.OPEN: "open", Status.DONE: "done", Status.FAILED: "failed"}


@dataclass
class Node:
    """A problem as the navigation needs it (its content is read again when written)."""

    id: str
    path: ProblemPath
    title: str
    status: Status
    met: int
    total: int
    children: list[Node] = field(default_factory=list)


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def _anchor(node: Node, index: int) -> str:
    """The id of a problem's attachment on the page (what citations link to)."""
    return f"{node.id}-a{index}"


def _part_anchor(anchor: str, number: int) -> str:
    """The id of one part of an attachment on the page (what `[[NAME#N]]` links to)."""
    return f"{anchor}-p{number}"


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


class Page:
    def __init__(self, root: Path, tree: Tree, out: TextIO) -> None:
        self.root = root
        self.tree = tree
        self.out = out
        self.md = Markdown()
        self.ledger = Ledger(root)
        self.ids: dict[ProblemPath, Node] = {}
        self.problems = 0
        self.rules = rules_of(read_settings(root, tree.cache)[0])  # part_chars: what `[[NAME#N]]` means

    # -- the skeleton --------------------------------------------------------------------

    def skeleton(self) -> Node | None:
        root = self.tree.problem(())
        if root is None:
            return None
        top = self._node(root)
        stack = [top]
        while stack:
            node = stack.pop()
            node.children = [self._node(child) for child in self.tree.children(node.path)]
            stack.extend(reversed(node.children))
        return top

    def _node(self, problem: Problem) -> Node:
        node = Node(f"p{len(self.ids)}", problem.path, problem.title, problem.status,
                    problem.criteria_met, len(problem.criteria))
        self.ids[problem.path] = node
        return node

    # -- writing -----------------------------------------------------------------------------

    def write(self, phase: str) -> int:
        w = self.out.write
        top = self.skeleton()
        css, js = _asset("dossier.css"), _asset("dossier.js")
        assert "</style" not in css and "</script" not in js
        title = top.title if top else self.root.name
        policy = (f"default-src 'none'; style-src '{_hash(css)}'; script-src '{_hash(js)}'; img-src data:; "
                  "base-uri 'none'; form-action 'none'")
        generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        w("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
        w(f'<meta http-equiv="Content-Security-Policy" content="{escape(policy)}">\n')
        w('<meta name="viewport" content="width=device-width, initial-scale=1">\n')
        w(f'<meta name="generator" content="deep-research {escape(__version__)}">\n')
        w('<link rel="icon" href="data:,">\n')
        w(f"<title>{escape(title)} — research dossier</title>\n<style>{css}</style>\n</head>\n<body>\n")
        total = self.ledger.total(())
        w(f'<header class="top"><h1>{escape(title)}</h1>\n<p>Research dossier · {escape(phase)} · '
          f'{escape(summary(total))} · generated {generated} '
          '<button id="all" type="button" hidden>Show every page</button></p></header>\n')
        w('<div class="layout">\n<nav id="nav" aria-label="Problems">\n'
          '<input id="filter" type="search" placeholder="Filter problems by title" aria-label="Filter problems by title" hidden>\n')
        if top is not None:
            w("<ul>\n")
            self._nav(top)
            w("</ul>\n")
        else:
            w('<p class="none">No problem is defined yet.</p>\n')
        w('<p class="links"><a href="#journal">Journal</a></p>\n</nav>\n<main>\n')
        if top is None:
            w('<section class="page" id="p-none"><h2>No problem defined yet</h2>\n')
            self._instruction()
            w("</section>\n")
        else:
            stack = [(top, ())]
            while stack:
                node, parents = stack.pop()
                self._problem(node, parents)
                chain = parents + (node,)
                stack.extend((child, chain) for child in reversed(node.children))
        self._journal()
        w("</main>\n</div>\n")
        w(f'<footer>Written by deep-research {escape(__version__)} from the research folder “{escape(self.root.name)}”. '
          "This page loads nothing from the network.</footer>\n")
        w(f"<script>{js}</script>\n</body>\n</html>\n")
        return self.problems

    def _nav(self, top: Node) -> None:
        w = self.out.write
        # Iterative: a deep tree must not exhaust Python's recursion limit.
        stack: list[Node | str] = [top]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                w(item)
                continue
            label = (f'<a href="#{item.id}">{escape(item.title)}</a> <span class="st {_STATUS[item.status]}">'
                     f'{_STATUS[item.status]}</span> <span class="crit">[{item.met}/{item.total}]</span>')
            if item.children:
                opened = " open" if not item.path else ""
                w(f"<li><details{opened}><summary>{label}</summary><ul>\n")
                stack.append("</ul></details></li>\n")
                stack.extend(reversed(item.children))
            else:
                w(f'<li class="leaf">{label}</li>\n')

    def _problem(self, node: Node, parents: tuple[Node, ...]) -> None:
        w = self.out.write
        problem = self.tree.problem(node.path)
        if problem is None:  # removed while the dossier was written
            return
        self.problems += 1
        w(f'<section class="page problem" id="{node.id}">\n')
        if parents:
            w('<p class="crumbs">' + " › ".join(f'<a href="#{p.id}">{escape(p.title)}</a>' for p in parents) + "</p>\n")
        status = _STATUS[problem.status]
        w(f'<h2>{escape(problem.title)} <span class="st {status}">{status}</span> '
          f'<span class="crit">[{problem.criteria_met}/{len(problem.criteria)} criteria met]</span></h2>\n')
        self._effort(node)
        if not node.path:
            self._instruction()
        cite = self._citations(node, parents) if "[[" in problem.definition + (problem.report or "") else None
        w("<h3>Problem definition</h3>\n")
        w(self.md.render(problem.definition, cite) or '<p class="none">No definition.</p>\n')
        w("<h3>Criteria of definition of done</h3>\n")
        if problem.criteria:
            w('<ul class="criteria">\n')
            for number, criterion in enumerate(problem.criteria, 1):
                met = ' class="met"' if criterion.done else ""
                state = "met" if criterion.done else "not met"
                w(f'<li{met}>{number}. {escape(criterion.text)} <span class="meta">({state})</span></li>\n')
            w("</ul>\n")
        else:
            w('<p class="none">No criteria yet.</p>\n')
        w("<h3>Report</h3>\n")
        changed = staleness.changes(self.tree, problem)
        if changed:
            w(f'<p class="stale"><strong>Out of date.</strong> {escape(staleness.sentence(changed))}</p>\n')
        cited: dict[str, Cited] = {}
        w(self.md.render(problem.report or "", cite, cited) or '<p class="none">No report yet.</p>\n')
        if cited:
            w('<div class="sources"><h4>Sources</h4>\n<ol>\n')
            for item in cited.values():
                source = (f' · <a href="{escape(item.source)}" rel="noopener noreferrer">{escape(item.source)}</a>'
                          if item.source else "")
                w(f'<li><a href="#{escape(item.anchor)}">{escape(item.name)}</a>{source}</li>\n')
            w("</ol></div>\n")
        if node.children:
            w(f"<h3>Subproblems ({len(node.children)})</h3>\n<ol>\n")
            for child in node.children:
                status = _STATUS[child.status]
                w(f'<li><a href="#{child.id}">{escape(child.title)}</a> <span class="st {status}">{status}</span> '
                  f'<span class="crit">[{child.met}/{child.total}]</span></li>\n')
            w("</ol>\n")
        attachments = self._attachments(self.tree.folder(node.path) / ATTACHMENTS)
        if attachments:
            w(f"<h3>Attachments ({len(attachments)})</h3>\n")
            for index, (attachment, meta) in enumerate(attachments):
                self._attachment(attachment, meta, _anchor(node, index))
        w("</section>\n")

    def _effort(self, node: Node) -> None:
        total = self.ledger.total(node.path)
        line = f"Effort: {summary(total)}"
        if node.children and not total.empty:
            own = self.ledger.own(node.path)
            line += f" — with its subproblems; on this problem itself: {summary(own)}"
        self.out.write(f'<p class="effort">{escape(line)}</p>\n')

    def _instruction(self) -> None:
        w = self.out.write
        book = bookkeeping(self.root)
        instruction = (self.tree.guard.read_text(book / INSTRUCTION) or "").strip()
        if instruction:
            w("<h3>Instruction</h3>\n" + self.md.render(instruction))
        context = read_attachments(book / CONTEXT, self.tree.cache)
        if context:
            w(f"<h3>Context ({len(context)})</h3>\n")
            for item in context:
                self._attachment(item, {})

    def _attachments(self, folder: Path) -> list[tuple[Attachment, dict[str, str]]]:
        """Every attachment with its front matter (where a source may be), oldest first."""
        found = []
        for entry in self.tree.cache.list_dir(folder):
            if not (entry.is_file() and entry.name.endswith(".md")):
                continue
            text = self.tree.cache.read(Path(entry.path), str)
            if text is None:
                continue
            meta, _ = formats.split_front_matter(text)
            attachment = formats.parse_attachment(text, fallback_name=entry.name[:-3])
            found.append((attachment.added, entry.name, attachment, meta))
        found.sort(key=lambda t: (t[0], t[1]))
        return [(a, m) for _, _, a, m in found]

    def _citations(self, node: Node, parents: tuple[Node, ...]):
        """What a citation in `node`'s texts links to: the attachments of the problem and of
        its parents (nearest first), each at its place on the page."""
        scope: list[tuple[str, tuple[Attachment, Cited]]] = []
        for owner in (node, *reversed(parents)):
            for index, (attachment, meta) in enumerate(self._attachments(self.tree.folder(owner.path) / ATTACHMENTS)):
                source = next((meta[k].strip() for k in ("final_url", "source") if meta.get(k, "").strip().startswith(
                    ("http://", "https://")) and safe_url(meta[k])), "")
                scope.append((attachment.name, (attachment, Cited(attachment.name, _anchor(owner, index), source))))
        part_chars = self.rules.part_chars

        def resolve(name: str) -> Cited | None:
            found = citations.resolve_part(name, scope)
            if found is None:
                return None
            (attachment, cited), first, last = found
            if first is None:
                return cited
            if citations.missing_part(name, attachment, first, last, part_chars) is not None:
                return None
            return Cited(part_name(attachment.name, first, last), _part_anchor(cited.anchor, first), cited.source)

        return resolve

    def _attachment(self, attachment: Attachment, meta: dict[str, str], anchor: str | None = None) -> None:
        details = []
        linked = set()
        for key in SOURCE_KEYS:
            value = meta.get(key, "").strip()
            if value and safe_url(value) and not value.startswith("#") and value not in linked:
                linked.add(value)
                details.append(f'<a href="{escape(value)}" rel="noopener noreferrer">{escape(value)}</a>')
        for key, value in meta.items():
            if key in _SKIP_META or (key in SOURCE_KEYS and safe_url(value.strip())):
                continue
            details.append(f"{escape(key)}: {escape(value)}")
        if attachment.added:
            details.append(f"added {escape(_when(attachment.added))}")
        extra = f' <span class="meta">· {" · ".join(details)}</span>' if details else ""
        where = f' id="{anchor}"' if anchor else ""
        self.out.write(f'<details class="attachment"{where}><summary>{escape(attachment.name)}{extra}</summary>\n')
        shape = layout(attachment.content, self.rules.part_chars, attachment.reading)
        if anchor is None:
            self.out.write(self.md.render(attachment.content) or '<p class="none">Empty.</p>\n')
        else:  # each part where `[[NAME#N]]` links to it
            for part in shape.parts:
                label = (f'<p class="part-name">{escape(part_name(attachment.name, part.number))}</p>\n'
                         if shape.count > 1 else "")
                text = shape.text(attachment.content, part.number)
                self.out.write(f'<div class="part" id="{_part_anchor(anchor, part.number)}">\n{label}'
                               + (self.md.render(text) or '<p class="none">Empty.</p>\n') + "</div>\n")
        self.out.write("</details>\n")

    # -- the journal ------------------------------------------------------------------------

    def _journal(self) -> None:
        w = self.out.write
        path = bookkeeping(self.root) / JOURNAL
        w('<section class="page" id="journal">\n<h2>Journal</h2>\n')
        w(f'<p class="effort">{escape(summary(self.ledger.total(())))}. Every executed message with its commands '
          "(and the model rounds that wrote it), newest last; undone messages are struck through.</p>\n")
        undone = undone_messages(path, self.tree.guard)
        w('<ol class="timeline">\n')
        empty = True
        for item in timeline(path, self.tree.guard):
            empty = False
            if isinstance(item, Message):
                self._message(item, item.number in undone)
            else:
                self._event(item)
        w("</ol>\n")
        if empty:
            w('<p class="none">Nothing has been executed yet.</p>\n')
        w("</section>\n")

    def _problem_link(self, path: tuple[str, ...] | None) -> str:
        node = self.ids.get(path) if path is not None else None
        if node is not None:
            return f'<a href="#{node.id}">{escape(node.title)}</a>'
        if path:
            return escape(" › ".join(path))
        return "the research"

    def _message(self, message: Message, undone: bool) -> None:
        w = self.out.write
        ok, failed, skipped = message.count("ok"), message.count("failed"), message.count("skipped")
        classes = " ".join(c for c in ("undone" if undone else "", "has-failed" if failed else "") if c)
        counts = [f"{ok} ok"] + ([f"{failed} failed"] if failed else []) + ([f"{skipped} not run"] if skipped else [])
        if message.rounds:
            tokens = sum(_int(r.get("prompt_tokens")) + _int(r.get("completion_tokens")) for r in message.rounds)
            approx = "~" if any(r.get("tokens_estimated") is True for r in message.rounds) else ""
            counts.append(f"{len(message.rounds)} model round{'s' if len(message.rounds) != 1 else ''}, "
                          f"{approx}{tokens:,} tokens")
        mark = " (undone)" if undone else ""
        attributes = f' class="{classes}"' if classes else ""
        w(f'<li id="m-{message.number}"{attributes}><details><summary>'
          f'<span class="when">{escape(_when(message.started))}</span> <span class="what">Message {message.number}'
          f"</span>{mark} · {self._problem_link(message.problem)} · {escape(', '.join(counts))}</summary>\n")
        if message.rounds:
            w("<ul>\n")
            for r in message.rounds:
                w(f'<li class="round">{escape(_round_line(r))}</li>\n')
            w("</ul>\n")
        w("<ul>\n")
        for c in message.commands:
            status = str(c.get("status") or "")
            line = f" (line {c['line']})" if isinstance(c.get("line"), int) else ""
            said = c.get("error") if status != "ok" else c.get("result")
            said = f": {said}" if isinstance(said, str) and said else ""
            w(f'<li class="cmd {escape(status)}"><code>{escape(str(c.get("command") or "?"))}</code>{line} '
              f"— {escape(status or 'unknown')}{escape(said)}</li>\n")
        w("</ul></details></li>\n")

    def _event(self, event: Event) -> None:
        r = event.record
        when = escape(_when(str(r.get("started") or r.get("ended") or "")))
        if event.kind == "undo":
            put = " (the message was put back in its document)" if r.get("put_back") is True else ""
            text = (f'Undo of <a href="#m-{_int(r.get("message"))}">message {_int(r.get("message"))}</a>: '
                    f"{len(r['files']) if isinstance(r.get('files'), list) else 0} file(s) restored; the focus is back on "
                    f"{self._problem_link(_path(r.get('problem')))}{escape(put)}.")
        elif event.kind == "reopen":
            text = escape(str(r.get("result") or "The research was reopened."))
        elif event.kind == "round":
            text = escape(_round_line(r))
        else:
            text = f"{escape(event.kind)} record"
        self.out.write(f'<li class="event {escape(event.kind)}"><span class="when">{when}</span> {text}</li>\n')


def _round_line(r: dict) -> str:
    parts = [f"Round {_int(r.get('round'))}"]
    if isinstance(r.get("model"), str):
        parts.append(r["model"])
    approx = "~" if r.get("tokens_estimated") is True else ""
    parts.append(f"{approx}{_int(r.get('prompt_tokens')):,} prompt + {approx}{_int(r.get('completion_tokens')):,} "
                 "completion tokens")
    if isinstance(r.get("latency_ms"), (int, float)):
        parts.append(f"{r['latency_ms'] / 1000:.1f} s")
    if isinstance(r.get("outcome"), str):
        parts.append(r["outcome"])
    commands = r.get("commands")
    if isinstance(commands, dict):
        parts.append(", ".join(f"{_int(v)} {k}" for k, v in commands.items() if isinstance(k, str)))
    if isinstance(r.get("error"), str) and r["error"]:
        parts.append(f"error: {r['error']}")
    return " · ".join(p for p in parts if p)


def _when(stamp: str) -> str:
    """'2026-11-23T09:03:53.9+00:00' as '2026-11-23 09:03:53 UTC'; anything else as given."""
    try:
        parsed = datetime.fromisoformat(stamp[:-1] + "+00:00" if stamp.endswith("Z") else stamp)
    except ValueError:
        return stamp
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc)
        return parsed.strftime("%Y-%m-%d %H:%M:%S UTC")
    return parsed.strftime("%Y-%m-%d %H:%M:%S")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _path(value: object) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(p, str) for p in value):
        return tuple(value)
    return None

