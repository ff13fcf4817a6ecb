"""Every format of the compiled report made by the real tools (pandoc for Word and OpenDocument,
WeasyPrint for PDF), and a research from someone else that must not make any of them read or
fetch anything: images and links to a local file, `file://`, `http://` on loopback and a data
URL, in markdown and as raw HTML (SPEC §14, issue 45)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from pypdf import PdfReader

from deep_research.compiled import build, convert, render

from dr_compiled_support import TITLE, sample

MARKER = "SECRET-7f3a9c"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A local file outside the research whose bytes must never reach a compiled file."""
    path = tmp_path / "secret.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + MARKER.encode() * 50)
    (tmp_path / "secret.css").write_text(f"body {{ background: red; }} /* {MARKER} */", encoding="utf-8")
    return path


def hostile_report(secret: Path, url: str) -> str:
    return (
        "Summarized problem definition: hostile.\n"
        f"Q1: Images?\nA1: ![a]({secret}) ![b](file://{secret}) ![c]({url}/image.png) "
        "![d](data:image/png;base64,iVBORw0KGgo=)\n"
        f'Q2: Raw?\nA2: <img src="{url}/raw.png"> <img src="file://{secret}"> <link rel="stylesheet" href="{url}/s.css"> '
        f'<iframe src="file://{secret}"></iframe> <script src="{url}/x.js"></script>\n'
        f"Q3: Links?\nA3: [here]({url}/page) [local](file://{secret}) <{url}/auto>\n"
        "Conclusion: nothing fetched.")


def texts_of(fmt: str, data: bytes) -> str:
    """Everything a file holds that a reader (or a fetch) could see, as text."""
    if fmt == "pdf":
        return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return "\n".join(archive.read(name).decode("utf-8", "replace") for name in archive.namelist())


@pytest.mark.parametrize("fmt", ["docx", "odt", "pdf"])
def test_a_hostile_research_makes_no_tool_read_or_fetch(fmt: str, tmp_path: Path, secret: Path, httpserver) -> None:
    url = httpserver.url_for("").rstrip("/")
    research = sample(tmp_path / "r", root_report=hostile_report(secret, url))
    data = render(build(research.root), fmt)
    assert httpserver.log == [], "a request reached the loopback server"
    assert MARKER.encode() not in data
    shown = texts_of(fmt, data)
    assert MARKER not in shown
    assert TITLE in shown and "References" in shown and "Citation check" in shown


def test_the_tools_refuse_even_markup_that_the_page_never_holds(tmp_path: Path, secret: Path, httpserver) -> None:
    """The second wall: pandoc's --sandbox and WeasyPrint's refusing fetcher, given raw HTML."""
    url = httpserver.url_for("").rstrip("/")
    page = (f'<html><head><link rel="stylesheet" href="file://{tmp_path / "secret.css"}">'
            f'<link rel="stylesheet" href="{url}/s.css"></head><body><p>Visible text</p>'
            f'<img src="file://{secret}"><img src="{secret}"><img src="{url}/i.png">'
            f'<object data="file://{secret}"></object></body></html>')
    for fmt in ("docx", "odt"):
        data = convert.office(page, fmt)
        assert MARKER.encode() not in data and "Visible text" in texts_of(fmt, data)
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            assert not [n for n in archive.namelist() if n.startswith(("word/media", "Pictures/"))], "no image embedded"
    data = convert.pdf(page)
    assert MARKER.encode() not in data and "Visible text" in texts_of("pdf", data)
    assert httpserver.log == []


def test_the_pdf_links_citations_to_their_entries(tmp_path: Path) -> None:
    research = sample(tmp_path / "r")
    reader = PdfReader(io.BytesIO(render(build(research.root), "pdf")))
    internal = external = 0
    for page in reader.pages:
        for annotation in page.get("/Annots") or []:
            action = annotation.get_object().get("/A") or {}
            internal += "/D" in action or "/Dest" in annotation.get_object()
            external += "/URI" in action
    assert internal >= 10 and external >= 1, (internal, external)
    assert str(reader.metadata.get("/Creator", "")).startswith("deep-research")


def test_references_alone_for_reference_managers(tmp_path: Path) -> None:
    compilation = build(sample(tmp_path / "r").root)
    items = json.loads(render(compilation, "csl-json"))
    assert [i["id"] for i in items] == ["ref1", "ref2", "ref3"]
    assert items[0]["URL"] == "https://www.example.org/intel/" and items[0]["accessed"] == {"date-parts": [[2026, 1, 1]]}
    bib = render(compilation, "bibtex").decode("utf-8")
    assert bib.count("@misc{ref") == 3 and "url = {https://www.example.org/intel/}" in bib


def test_without_the_tool_a_sentence_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(convert, "pandoc", lambda: None)
    with pytest.raises(convert.ToolMissing, match=r"pip install 'deep-research\[export\]'"):
        convert.office("<p>x</p>", "docx")
    import builtins

    real = builtins.__import__

    def no_weasyprint(name, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        if name == "weasyprint":
            raise ImportError("No module named 'weasyprint'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_weasyprint)
    with pytest.raises(convert.ToolMissing, match=r"A PDF is made by WeasyPrint, which is not installed: install it"):
        convert.pdf("<p>x</p>")
