"""Markdown to HTML for the dossier, safe for a page that must never run or fetch anything.

markdown-it-py (CommonMark plus tables) with raw HTML off, so `<script>` in a report is
text. On top of its defaults:
- links only to `http:`, `https:`, `mailto:` and anchors (`#…`); anything else
  (`javascript:`, `file:`, `data:`, relative paths that lead nowhere in one file) stays
  literal text;
- images are never loaded: an image becomes a link to it (or its alt text);
- table alignment becomes a class, not a `style` attribute (the page's Content Security
  Policy allows only its own style sheet);
- headings move down two levels (or as many as the caller says), below the problem's own headings;
- a citation `[[Attachment name]]` (`[[Name|text]]`) becomes a link to the attachment on the
  page and, for a fetched one, to its source; the caller says what each name cites (`Cited`).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Callable
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline

from ..engine.tree import citations


@dataclass(frozen=True)
class Cited:
    """What a citation links to: the attachment's place on the page and its source URL."""

    name: str
    anchor: str
    source: str = ""  # a safe http(s) URL, or ""
    # The compiled report's mark (compiled/page.py): the link shows `mark` instead of the
    # citation's text, after `before` (a citation's shown text), with `id` for links back to it.
    mark: str = ""
    before: str = ""
    id: str = ""
    title: str = ""


Resolve = Callable[[str], "Cited | None"]

SAFE_SCHEMES = {"http", "https", "mailto"}
_ALIGN = {"text-align:left": "al-left", "text-align:right": "al-right", "text-align:center": "al-center"}


def safe_url(url: str) -> bool:
    """Whether the dossier may link to `url`."""
    url = url.strip()
    if url.startswith("#"):
        return True
    if any(ord(c) < 32 or c in "\\" for c in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.scheme.lower() not in SAFE_SCHEMES:
        return False
    return parts.scheme.lower() == "mailto" or bool(parts.netloc)


def _renderer() -> MarkdownIt:
    # breaks: a line break in a report is one, as the assistant and a reader of the .md file expect.
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "breaks": True}).enable("table")
    md.validateLink = safe_url  # type: ignore[method-assign]
    rules = md.renderer.rules

    def image(tokens, idx, options, env):  # noqa: ANN001 - markdown-it's rule signature
        token = tokens[idx]
        alt = escape(token.content or "image")
        src = str(token.attrGet("src") or "")
        if not safe_url(src):
            return f'<span class="image-alt">{alt}</span>'
        return f'<a class="image-link" href="{escape(src)}" rel="noopener noreferrer">{alt} (image)</a>'

    def link_open(self, tokens, idx, options, env):  # noqa: ANN001
        token = tokens[idx]
        href = str(token.attrGet("href") or "")
        if not safe_url(href):  # markdown-it checks no empty destination: `[text]()`
            token.attrs.pop("href", None)
        elif not href.startswith("#"):
            token.attrSet("rel", "noopener noreferrer")
        return self.renderToken(tokens, idx, options, env)

    def cell_open(self, tokens, idx, options, env):  # noqa: ANN001
        token = tokens[idx]
        style = token.attrGet("style")
        if style is not None:
            token.attrs.pop("style", None)
            if style in _ALIGN:
                token.attrSet("class", _ALIGN[style])
        return self.renderToken(tokens, idx, options, env)

    def heading(self, tokens, idx, options, env):  # noqa: ANN001
        token = tokens[idx]
        shift = env.get("shift", 2) if isinstance(env, dict) else 2
        token.tag = f"h{min(6, int(token.tag[1]) + shift)}"
        return self.renderToken(tokens, idx, options, env)

    def citation(self, tokens, idx, options, env):  # noqa: ANN001
        token = tokens[idx]
        name, shown = token.meta["name"], token.meta["shown"]
        resolve = env.get("cite") if isinstance(env, dict) else None
        cited = resolve(name) if resolve is not None else None
        if cited is None:
            return f'<span class="cite missing" title="not an attachment (or a part of one) of this problem or its parents">[[{escape(name)}]]</span>'
        env.setdefault("cited", {}).setdefault(cited.anchor, cited)
        if cited.mark:
            ident = f' id="{escape(cited.id)}"' if cited.id else ""
            title = f' title="{escape(cited.title)}"' if cited.title else ""
            before = f"{escape(cited.before)} " if cited.before else ""
            return f'{before}<a class="cite"{ident} href="#{escape(cited.anchor)}"{title}>{escape(cited.mark)}</a>'
        out = f'<a class="cite" href="#{escape(cited.anchor)}">{escape(shown)}</a>'
        if cited.source:
            out += (f' <a class="cite-source" href="{escape(cited.source)}" rel="noopener noreferrer" '
                    f'title="{escape(cited.source)}">↗</a>')
        return out

    rules["image"] = image
    md.add_render_rule("citation", citation)
    md.inline.ruler.before("link", "citation", _citation_rule)
    md.add_render_rule("link_open", link_open)
    md.add_render_rule("th_open", cell_open)
    md.add_render_rule("td_open", cell_open)
    md.add_render_rule("heading_open", heading)
    md.add_render_rule("heading_close", heading)
    return md


def _citation_rule(state: StateInline, silent: bool) -> bool:
    """`[[name]]` or `[[name|text]]` at the current position (engine/tree/citations.py's syntax)."""
    if not state.src.startswith("[[", state.pos):
        return False
    cited = citations.match_at(state.src, state.pos)
    if cited is None or cited.end > state.posMax:
        return False
    if not silent:
        token = state.push("citation", "", 0)
        token.meta = {"name": cited.name, "shown": cited.shown}
    state.pos = cited.end
    return True


class Markdown:
    """One renderer, reused for every text of a dossier (building it costs ~1 ms)."""

    def __init__(self) -> None:
        self._md = _renderer()

    def render(self, text: str, cite: Resolve | None = None, cited: dict[str, Cited] | None = None,
               shift: int = 2) -> str:
        """`cite` says what a citation's name links to (None: not an attachment in scope);
        the citations that resolved are added to `cited`, by anchor, in order. Headings move
        down `shift` levels (at most to 6)."""
        if not text.strip():
            return ""
        env: dict = {"cite": cite, "cited": cited if cited is not None else {}, "shift": shift}
        try:
            return self._md.render(self._pipes_escaped_in_tables(text), env)
        except Exception:  # markdown-it never should; a dossier must still be written
            return f"<pre>{escape(text)}</pre>"

    def _pipes_escaped_in_tables(self, text: str) -> str:
        """`text` with the `|` of each citation in a table row escaped (`[[Name\\|text]]`): a
        table's row is cut into cells at every pipe before a citation is read, so
        `[[Name#2|"a quote"]]` in a cell split it and shifted the row's cells. markdown-it gives
        each cell its text with `\\|` unescaped, so the citation reads as written."""
        if "|" not in text or "[[" not in text:
            return text
        rows: set[int] = set()
        for token in self._md.parse(text):
            if token.type == "table_open" and token.map:
                rows.update(range(*token.map))
        if not rows:
            return text
        lines = text.split("\n")
        for row in rows:
            line, pieces, at = lines[row], [], 0
            for cited in citations.find(line):
                whole = line[cited.start:cited.end]
                if "|" in whole:
                    pieces += [line[at:cited.start], whole.replace("\\|", "|").replace("|", "\\|")]
                    at = cited.end
            lines[row] = "".join(pieces) + line[at:]
        return "\n".join(lines)
