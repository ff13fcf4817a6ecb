"""Turning bytes into attachment text: the fallback without trafilatura, charsets, and PDFs
that cannot give text."""

from __future__ import annotations

import io
import sys

import pytest

from deep_research.sources import SourceError
from deep_research.sources.extract import (
    HTML, PDF, TEXT, TRAFILATURA_MISSING, decode, extract, kind_for, refusal, sniff,
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
