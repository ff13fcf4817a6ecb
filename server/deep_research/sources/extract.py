"""Bytes to text an assistant can read: the content types attachments accept.

- HTML (and XHTML): readable markdown of the main content, with trafilatura (navigation,
  boilerplate and ads left out). trafilatura needs lxml, a compiled library the VS Code
  extension's pure-Python bundle leaves out: without it, a plain HTML-to-text fallback
  (the standard library's parser) keeps all the page's text, and the attachment says how
  to install trafilatura.
- PDF: its text layer, page by page, with pypdf; each page after a `[Page N]` line, which is
  where the attachment's parts follow its pages (engine/retrieval/parts.py reads them back).
- Plain text, markdown, JSON, CSV: as they are.
- Anything else is refused with a sentence that lists what is accepted.

Text is decoded with the charset the server declared, else a byte-order mark, else (HTML)
a `<meta charset>`, else UTF-8, else Windows-1252, so nothing fails on legacy pages.
"""

from __future__ import annotations

import codecs
import io
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from ..engine.retrieval.parts import page_line
from ..engine.retrieval.structure import glued_fences
from . import SourceError

log = logging.getLogger("deep_research.sources")

HTML, PDF, TEXT = "html", "pdf", "text"
MEDIA_TYPES = {
    "text/html": HTML, "application/xhtml+xml": HTML,
    "application/pdf": PDF, "application/x-pdf": PDF,
    "text/plain": TEXT, "text/markdown": TEXT, "text/x-markdown": TEXT,
    "application/json": TEXT, "text/json": TEXT, "text/csv": TEXT,
}
MEDIA_OF = {HTML: "text/html", PDF: "application/pdf", TEXT: "text/plain"}  # for a sniffed body
ACCEPTED = "web pages (HTML), PDF, plain text, markdown, JSON and CSV"
MAX_PDF_PAGES = 2_000  # a 10 MB PDF rarely has more; the reading's time limit bounds it anyway
TRAFILATURA_MISSING = (
    "trafilatura is not installed, so the page was turned into text by a simple fallback that keeps "
    "navigation and other boilerplate. Install it into the Python that runs deep-research "
    "(`python -m pip install trafilatura`) for the main content only."
)


@dataclass(frozen=True)
class Extracted:
    title: str
    text: str
    notes: tuple[str, ...] = ()


def kind_of(media_type: str) -> str | None:
    if media_type in MEDIA_TYPES:
        return MEDIA_TYPES[media_type]
    if media_type.startswith("application/") and media_type.endswith("+json"):
        return TEXT
    return None


# Types that say nothing of the content (servers send PDFs as these): the body decides.
UNDECLARED = {"", "application/octet-stream", "binary/octet-stream", "application/download",
              "application/x-download", "application/force-download", "application/unknown"}


def refusal(media_type: str) -> str | None:
    """Why a fetched content type cannot be attached (None: it can; an undeclared one is sniffed later)."""
    if media_type in UNDECLARED or kind_of(media_type):
        return None
    return f"The page is {media_type}, which cannot be attached: only {ACCEPTED} can."


def kind_for(media_type: str, body: bytes) -> str:
    """The kind to read a fetched body as: a PDF by its bytes whatever the server called it
    (arXiv mirrors, file servers and misconfigured CMSs send PDFs as text/html or octet-stream),
    else by its declared type, else sniffed."""
    if body[:1024].lstrip().startswith(b"%PDF-"):
        return PDF
    return kind_of(media_type) or sniff(body)


def sniff(body: bytes) -> str:
    """The kind of a body that came without a content type."""
    head = body[:1024].lstrip()
    if head.startswith(b"%PDF-"):
        return PDF
    lowered = head[:512].lower()
    if lowered.startswith((b"<!doctype html", b"<html")) or b"<body" in lowered or b"<head" in lowered:
        return HTML
    if b"\x00" in body[:8192]:
        raise SourceError(f"The content is binary and of no declared type; only {ACCEPTED} can be attached.")
    return TEXT


def extract(body: bytes, kind: str, *, charset: str | None = None, url: str = "", fallback_title: str = "") -> Extracted:
    if kind == HTML:
        return extract_html(decode(body, charset, html=True), url, fallback_title)
    if kind == PDF:
        return extract_pdf(body, fallback_title)
    return Extracted(_text_title(decode(body, charset), fallback_title), decode(body, charset))


# -- charsets --------------------------------------------------------------------------------------

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def decode(body: bytes, charset: str | None = None, *, html: bool = False) -> str:
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return body.decode(codec, errors="replace")
    declared = _codec(charset)
    if declared is None and html:
        match = _META_CHARSET.search(body[:4096])
        declared = _codec(match.group(1).decode("ascii", "ignore")) if match else None
    if declared is not None:
        return body.decode(declared, errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace")


def _codec(name: str | None) -> str | None:
    if not name:
        return None
    name = name.strip().lower()
    if name in ("iso-8859-1", "latin1", "latin-1", "us-ascii", "ascii"):
        return "cp1252"  # what browsers do: these labels mean windows-1252 on the web
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


# -- HTML -------------------------------------------------------------------------------------------


def extract_html(html: str, url: str = "", fallback_title: str = "") -> Extracted:
    try:
        import trafilatura
    except ImportError:
        page = _PlainText.convert(html)
        return Extracted(page.title or fallback_title, page.text, (TRAFILATURA_MISSING,))
    text = trafilatura.extract(html, url=url or None, output_format="markdown", include_tables=True,
                               include_links=True, include_comments=False, favor_recall=True) or ""
    metadata = trafilatura.extract_metadata(html, default_url=url or None)
    title = (metadata.title if metadata is not None else None) or _PlainText.convert(html).title
    if not text.strip():  # no main content found (a page of forms, a tiny page): keep its text
        text = _PlainText.convert(html).text
    return Extracted(title or fallback_title, fences_on_own_lines(text))


def fences_on_own_lines(text: str) -> str:
    """`text` with each code fence glued to the end of a line of text, and closed further down by a
    fence line of its own, moved to a line of its own. trafilatura writes a code block inside a
    list item after the item's text (`by commenting: ```` `), where markdown sees no fence: its
    closing line then opens one, and every code block after it is read inside out (comments
    taken for headings, prose for code) by any reader. engine/retrieval/structure.py reads a
    markdown file's glued fences so too, without rewriting it (`glued_fences`, the one rule)."""
    if "```" not in text and "~~~" not in text:
        return text
    lines = text.split("\n")
    glued = glued_fences(lines)
    if not glued:
        return text
    out: list[str] = []
    for n, line in enumerate(lines):
        out += list(glued[n]) if n in glued else [line]
    return "\n".join(out)


class _PlainText(HTMLParser):
    """HTML to plain text with the standard library: every visible text, blocks on their
    own lines, headings and list items marked as markdown. The fallback when trafilatura
    is missing, and for search snippets."""

    SKIP = {"script", "style", "noscript", "template", "svg", "head", "iframe", "object", "select", "button"}
    BLOCKS = {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "br", "tr",
              "table", "ul", "ol", "dl", "dt", "dd", "pre", "blockquote", "hr", "form", "figure", "figcaption"}
    HEADINGS = {f"h{n}": "#" * n for n in range(1, 7)}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.current: list[str] = []
        self.skipping = 0
        self.in_title = False
        self.title = ""

    @classmethod
    def convert(cls, html: str) -> _PlainText:
        parser = cls()
        try:
            parser.feed(html)
            parser.close()
        except Exception as error:  # html.parser is tolerant; be safe with hostile pages anyway
            log.warning("HTML fallback parser: %s", error)
        parser._flush()
        return parser

    @property
    def text(self) -> str:
        return "\n\n".join(line for line in self.lines if line)

    def _flush(self, prefix: str = "") -> None:
        line = " ".join("".join(self.current).split())
        if line:
            self.lines.append(prefix + line)
        self.current = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "title":
            self.in_title = True
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCKS or tag in self.HEADINGS:
            self._flush()
        elif tag == "li":
            self._flush()
            self.current.append("- ")
        elif tag in ("td", "th"):
            self.current.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.HEADINGS:
            self._flush(self.HEADINGS[tag] + " ")
        elif tag in self.BLOCKS or tag == "li":
            self._flush()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title = " ".join((self.title + " " + data).split())
        elif not self.skipping:
            self.current.append(data)


def html_to_text(html: str) -> str:
    return _PlainText.convert(html).text


# -- PDF --------------------------------------------------------------------------------------------


def extract_pdf(body: bytes, fallback_title: str = "") -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed-but-readable PDFs warn a lot
    try:
        reader = PdfReader(io.BytesIO(body))
        if reader.is_encrypted and not reader.decrypt(""):
            raise SourceError("The PDF is protected by a password; nothing was attached.")
        pages = reader.pages
        count = len(pages)
        texts = []
        for number in range(min(count, MAX_PDF_PAGES)):
            text = (pages[number].extract_text() or "").strip()
            if text:
                texts.append(f"{page_line(number + 1)}\n{text}")
        title = ""
        try:
            title = str(reader.metadata.title or "") if reader.metadata else ""
        except Exception:  # broken metadata is no reason to lose the text
            title = ""
    except SourceError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError, OSError) as error:
        raise SourceError(f"The PDF cannot be read ({type(error).__name__}: {str(error)[:120]}); nothing was attached.") from None
    if not texts:
        raise SourceError("The PDF has no text layer (scanned pages?); nothing was attached.")
    notes = ()
    if count > MAX_PDF_PAGES:
        notes = (f"Only the first {MAX_PDF_PAGES} of its {count} pages were read.",)
    return Extracted(title.strip() or fallback_title, "\n\n".join(texts), notes)


# -- text -------------------------------------------------------------------------------------------


def _text_title(text: str, fallback: str) -> str:
    """A markdown document's first heading, else the fallback (the file or URL's name)."""
    for line in text.split("\n")[:40]:
        if line.startswith("# ") and line[2:].strip():
            return line[2:].strip()
    return fallback


def name_from_url(url: str) -> str:
    """A readable name for a page without a title: the last segment of its path, or its host."""
    parts = urlsplit(url)
    segment = unquote(PurePosixPath(parts.path).name) if parts.path not in ("", "/") else ""
    return segment or parts.hostname or url
