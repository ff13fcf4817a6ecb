"""Markdown to HTML for the dossier, safe for a page that must never run or fetch anything.

markdown-it-py (CommonMark plus tables) with raw HTML off, so `<script>` in a report is
text. On top of its defaults:
- links only to `http:`, `https:`, `mailto:` and anchors (`#…`); anything else
  (`javascript:`, `file:`, `data:`, relative paths that lead nowhere in one file) stays
  literal text;
- images are never loaded: an image becomes a link to it (or its alt text);
- table alignment becomes a class, not a `style` attribute (the page's Content Security
  Policy allows only its own style sheet);
- headings move down two levels, below the problem's own headings.
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlsplit

from markdown_it import MarkdownIt

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
        if not str(token.attrGet("href") or "").startswith("#"):
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
        token.tag = f"h{min(6, int(token.tag[1]) + 2)}"
        return self.renderToken(tokens, idx, options, env)

    rules["image"] = image
    md.add_render_rule("link_open", link_open)
    md.add_render_rule("th_open", cell_open)
    md.add_render_rule("td_open", cell_open)
    md.add_render_rule("heading_open", heading)
    md.add_render_rule("heading_close", heading)
    return md


class Markdown:
    """One renderer, reused for every text of a dossier (building it costs ~1 ms)."""

    def __init__(self) -> None:
        self._md = _renderer()

    def render(self, text: str) -> str:
        if not text.strip():
            return ""
        try:
            return self._md.render(text)
        except Exception:  # markdown-it never should; a dossier must still be written
            return f"<pre>{escape(text)}</pre>"
