"""Real files attached as a user attaches them (`///attach_file`, through the one path every
front end takes): each read as it is written, its cutting recorded (issue 46, SPEC §14)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from deep_research.engine.research import Research
from deep_research.engine.retrieval.parts import CUTS
from deep_research.engine.settings.table import Config
from deep_research.app.execute import execute_sync as gather_and_execute_sync

from dr_sources_support import make_pdf

FIXTURES = Path(__file__).parents[2] / "benchmarks" / "retrieval"
DEFINE = "<<< define_problem\n///title\nTargets\n///content\nWhich targets does the compiler build for?\n>>>\n"


@pytest.fixture
def research(tmp_path: Path) -> Research:
    research = Research.create(tmp_path / "research")
    assert research.execute(DEFINE).executed
    for name in ("glued-fences.md", "release-notes.md"):
        shutil.copy(FIXTURES / name, research.root / name)
    shutil.copy(FIXTURES / "restructuredtext.txt", research.root / "spec.rst")
    (research.root / "paper.pdf").write_bytes(make_pdf([f"Page {n} about tiles and caches." for n in range(1, 4)]))
    attach = "".join(f"///attach_file {name}\n" for name in ("glued-fences.md", "release-notes.md", "spec.rst", "paper.pdf"))
    result = gather_and_execute_sync(research, attach, Config())
    assert result.executed and "FAILED" not in result.reply, result.reply
    return research


def run(research: Research, message: str) -> str:
    result = gather_and_execute_sync(research, message, Config())
    assert result.executed
    return result.reply


def outline_of(reply: str, name: str) -> list[str]:
    body = reply.split(f'<outline name="{name}" page="1"', 1)[1].split(">\n", 1)[1].split("\n</outline>", 1)[0]
    return body.split("\n")


def test_each_file_records_its_cutting(research: Research) -> None:
    for file in (research.root / "Attachments").glob("*.md"):
        assert f"\ncuts: {CUTS}\n" in file.read_text(encoding="utf-8").split("\n---\n", 1)[0] + "\n", file.name


def test_a_markdown_files_glued_fences_give_no_heading(research: Research) -> None:
    entries = outline_of(run(research, "///outline glued-fences.md\n"), "glued-fences.md")
    assert [re.sub(r" \(#\d+\)$", "", e).strip("- ") for e in entries] == [
        "Targets and their tiers", "Building for a bare-metal target", "Checking the linker", "Why the script matters",
        "Running the tests", "Tier policy", "Tier 3 targets"]
    text = (research.root / "glued-fences.md").read_text(encoding="utf-8")
    attached = next((research.root / "Attachments").glob("glued-fences*")).read_text(encoding="utf-8")
    assert attached.endswith(text.rstrip() + "\n"), "the text is kept as written"


def test_release_notes_and_a_restructuredtext_file_are_outlined_by_their_titles(research: Research) -> None:
    reply = run(research, "///outline release-notes.md\n///outline spec.rst 1\n")
    versions = [e for e in outline_of(reply, "release-notes.md") if e.startswith("- Version ")]
    assert len(versions) == 11 and versions[0].startswith("- Version 1.95 (2026-04-16) (#")
    spec = outline_of(reply, "spec.rst")
    assert spec[0] == "- reStructuredText Markup Specification (#1)" and len(spec) == 62
    assert not any(e.lstrip("- ").startswith("#") for e in spec)


def test_a_pdf_is_outlined_by_its_pages_and_searched_alone(research: Research) -> None:
    reply = run(research, "///outline paper.pdf\n///find in:paper.pdf caches tiles\n")
    assert outline_of(reply, "paper.pdf") == ["- pages 1–3: #1–#3, a page each"]
    found = re.findall(r'<passage part="([^"]+)" rank="\d+">', reply)
    assert found and set(found) <= {"paper.pdf#1", "paper.pdf#2", "paper.pdf#3"} and len(found) == len(set(found))
