"""Turning bytes into attachment text: the fallback without trafilatura, charsets, and PDFs
that cannot give text."""

from __future__ import annotations

import io
import sys

import pytest

from deep_research.engine.retrieval.parts import layout
from deep_research.sources import SourceError
from deep_research.sources.extract import (
    HTML, PDF, TEXT, TRAFILATURA_MISSING, decode, extract, fences_on_own_lines, kind_for, refusal, sniff,
)

from dr_sources_support import ARTICLE, make_pdf


def test_without_trafilatura_html_falls_back_and_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # `import trafilatura` now raises ImportError
    page = extract(ARTICLE.encode(), HTML)
    assert page.title == "Tiling for caches | Example Blog"
    assert "# Tiling for caches" in page.text and "## Choosing the tile size" in page.text
    assert "- Measure before tuning." in page.text
    assert "<" not in page.text and "charset" not in page.text  # no markup, no head
    assert page.notes == (TRAFILATURA_MISSING,)
    assert "python -m pip install trafilatura" in TRAFILATURA_MISSING


def test_a_page_without_main_content_keeps_its_text() -> None:
    page = extract(b"<html><head><title>Tiny</title></head><body><p>Just one line.</p></body></html>", HTML)
    assert (page.title, page.text.strip()) == ("Tiny", "Just one line.")


# As the rustc book's print.html has it (a code block in a list item), then a later code block.
LIST_CODE = """<html><head><title>Targets</title></head><body><article>
<h1>Adding a target</h1><p>Steps to follow before a pull request is merged, in order.</p>
<ul><li>Ensure the pull request is assigned to the <a href="https://example.org/compiler">compiler team</a> by commenting:
<pre><code class="language-text">r? compiler
</code></pre>
</li></ul>
<p>Then build the library as a cdylib, with link-time optimisation on.</p>
<pre><code># Cargo.toml
[lib]
crate-type = ["cdylib"]</code></pre>
<h2 id="testing"><a class="header" href="#testing">Testing <code>RefCell&lt;T&gt;</code></a></h2><p>Binaries are tested on real hardware only, never in an emulator.</p>
</article></body></html>"""


def test_a_code_block_in_a_list_item_does_not_turn_the_page_inside_out() -> None:
    """trafilatura glues the fence of a code block in a list item to the item's text; its closing
    line then opened a fence, and the later block's comment became a heading of the outline. And
    an mdBook heading is a link to itself: the outline shows its text, not `[…](#testing)`."""
    page = extract(LIST_CODE.encode(), HTML)
    assert "commenting:\n```\nr? compiler\n```" in page.text
    titles = [h.title for h in layout(page.text, 4_000).headings]
    assert "[Testing" in page.text and titles == ["Adding a target", "Testing `RefCell<T>`"]


def test_glued_fences_are_moved_only_when_closed_and_in_one_pass() -> None:
    assert fences_on_own_lines("Use ``` to open a fence.\nno close") == "Use ``` to open a fence.\nno close"
    assert fences_on_own_lines("```\ncode ```\n```\n") == "```\ncode ```\n```\n"  # inside a block: code
    assert fences_on_own_lines("a ```\n" * 100_000 + "```\n").startswith("a\n```\na ```\n")  # hostile: linear


@pytest.mark.parametrize("body, charset, text", [
    ("Grüße".encode("utf-8"), None, "Grüße"),
    ("Grüße".encode("utf-8-sig"), "iso-8859-1", "Grüße"),  # a byte-order mark wins over the header
    ("Grüße".encode("utf-16-le"), "utf-16-le", "Grüße"),
    ("Grüße".encode("cp1252"), "latin1", "Grüße"),
    ("Grüße".encode("cp1252"), "no-such-charset", "Grüße"),  # unknown label: guessed
    ("Привет".encode("koi8-r"), "koi8-r", "Привет"),
    (b"\xff\xfeG\x00r\x00", None, "Gr"),  # UTF-16 BOM without a declaration
])
def test_charsets(body: bytes, charset: str | None, text: str) -> None:
    assert decode(body, charset) == text


def test_types_refused_and_sniffed() -> None:
    assert refusal("text/html") is None and refusal("application/ld+json") is None and refusal("") is None
    assert "video/mp4, which cannot be attached" in refusal("video/mp4")
    assert sniff(make_pdf(["x"])) == PDF
    assert sniff(b"  <!DOCTYPE html><html>") == HTML
    assert sniff(b"plain words") == TEXT
    with pytest.raises(SourceError, match="binary"):
        sniff(b"\x00\x01\x02")
    # a PDF by its bytes, whatever the server called it; a type that says nothing is left to the bytes
    assert refusal("application/octet-stream") is None and "image/png" in refusal("image/png")
    assert kind_for("text/html", b"\n%PDF-1.7 ...") == PDF and kind_for("application/x-pdf", b"") == PDF
    assert kind_for("application/octet-stream", b"# Notes") == TEXT and kind_for("text/html", b"<p>") == HTML


def test_pdfs_that_give_no_text_are_refused_plainly() -> None:
    from pypdf import PdfWriter

    blank = PdfWriter()
    blank.add_blank_page(200, 200)
    data = io.BytesIO()
    blank.write(data)
    with pytest.raises(SourceError, match="no text layer"):
        extract(data.getvalue(), PDF)
    locked = PdfWriter(clone_from=io.BytesIO(make_pdf(["secret"])))
    locked.encrypt("password")
    data = io.BytesIO()
    locked.write(data)
    with pytest.raises(SourceError, match="protected by a password"):
        extract(data.getvalue(), PDF)
    with pytest.raises(SourceError, match="The PDF cannot be read"):
        extract(b"%PDF-1.4\n garbage", PDF)
