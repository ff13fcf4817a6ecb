"""The compiled report in a real headless Chromium (Debian's, driven by playwright-core from the
VS Code test environment: scripts/setup-vscode-test-env), scripts off and the network blocked: a
click on a citation lands on its entry, the entry leads back; and the PDF's pages as pictures
(pypdfium2), with the links that lead from citations to entries.

Skipped only when DEEP_RESEARCH_SKIP_VSCODE=1 (the same environment as the VS Code tests;
the `browser_env` fixture of tests/conftest.py).
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from deep_research.compiled import build, render

from dr_compiled_support import TITLE, sample

pytestmark = pytest.mark.browser
HOSTILE_TITLE = "<script>window.__pwned = 1</script> Hostile"


def test_a_click_on_a_citation_lands_on_its_entry_and_back(browser_env: dict, tmp_path: Path) -> None:
    research = sample(tmp_path / "r")
    (research.root / "deep-research.toml").write_text("max_breadth = 4\n", encoding="utf-8")
    assert research.execute("<<< add_subproblem\n///title\n" + HOSTILE_TITLE + "\n///content\nx\n>>>\n").executed
    page = tmp_path / "report.html"
    page.write_bytes(render(build(research.root), "html"))
    proc = subprocess.run([browser_env["node24"], str(Path(__file__).with_name("browse_report.mjs")),
                           browser_env["json"], str(page), str(tmp_path / "shot")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"screenshots: {tmp_path}/shot-*.png")
    assert seen["blocked"] == [] and seen["dialogs"] == [] and seen["errors"] == [], seen
    assert seen["scripts"] == 0 and seen["images"] == 0 and seen["title"] == TITLE
    assert f"H3 4 {HOSTILE_TITLE}" in seen["headings"], "a hostile title is text"
    assert seen["cite"]["text"] == "[3, part 1]" and seen["cite"]["href"] == "#ref-3"
    assert seen["cite"]["title"] == "“32 KiB L1 data cache” — found in the part cited"
    assert seen["afterCite"] == {**seen["afterCite"], "hash": "#ref-3", "inView": True}
    assert seen["afterCite"]["entry"].startswith("[3] AMD notes") and "File: amd-notes.md" in seen["afterCite"]["entry"]
    assert seen["backLinks"] == 2, "AMD notes is cited from § 1 and § 1.1"
    assert seen["afterBack"] == {"hash": f"#{seen['cite']['id']}", "inView": True}
    assert any(f.startswith("Quotes: 4 of 7 resolved citations carry one") for f in seen["figures"]), seen["figures"]


def test_the_pdf_as_pictures(tmp_path: Path) -> None:
    import pypdfium2
    from pypdf import PdfReader

    data = render(build(sample(tmp_path / "r").root), "pdf")
    document = pypdfium2.PdfDocument(data)
    pictures = []
    for index in range(len(document)):
        picture = tmp_path / f"page-{index + 1}.png"
        document[index].render(scale=1.2).to_pil().save(picture)
        pictures.append(picture)
    print(f"pages: {tmp_path}/page-*.png")
    reader = PdfReader(io.BytesIO(data))
    texts = [page.extract_text() for page in reader.pages]
    assert len(pictures) == len(texts) >= 3 and all(p.stat().st_size > 5_000 for p in pictures)
    where = next(i for i, t in enumerate(texts) if "References" in t and "[3] AMD notes" in t)
    # A citation's link in the text leads to the page that holds its entry.
    destinations = []
    for number, page in enumerate(reader.pages):
        for annotation in page.get("/Annots") or []:
            link = annotation.get_object()
            if "/Dest" in link or "/D" in (link.get("/A") or {}):
                destinations.append((number, link))
    assert destinations
    named = reader.named_destinations
    assert "ref-3" in named and reader.get_destination_page_number(named["ref-3"]) == where
