"""The compiled report's content (SPEC §14, issue 45): assembled from the tree, depth first;
references numbered by first citation, one per source; consulted, not cited; the Citation
check; each problem's state said plainly. And bad input: a sentence, nothing written."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from deep_research.compiled import NothingToCompile, build, render
from deep_research.compiled.md import shift_headings
from deep_research.engine.research import Research
from deep_research.engine.retrieval.parts import forget_all

from dr_compiled_support import REPEATED, TITLE, sample


@pytest.fixture(scope="module")
def research(tmp_path_factory: pytest.TempPathFactory) -> Research:
    return sample(tmp_path_factory.mktemp("compiled") / "research")


@pytest.fixture(scope="module")
def text(research: Research) -> str:
    return render(build(research.root), "md").decode("utf-8")


def headings(text: str) -> list[str]:
    return re.findall(r"^(#{1,6} .*)$", text, flags=re.MULTILINE)


def test_the_parts_come_in_order_with_heading_levels_from_depth(text: str) -> None:
    assert headings(text)[:4] == [f"# {TITLE}", "## Summary", "## Contents", f"## {TITLE}"]
    sections = [h for h in headings(text) if re.match(r"#+ (\d|How)", h)]
    assert sections == [f"# {TITLE}", f"## {TITLE}", "### 1 AMD", "#### 1.1 Zen 5", "### 2 Apple", "### 3 ARM"]
    assert headings(text)[-3:] == ["## References", "## Consulted, not cited", "## Citation check"] or \
        "## Citation check" in headings(text)
    assert text.index("Compare the L1 data caches") < text.index("## Summary"), "the instruction comes first"


def test_each_state_is_said_plainly(text: str) -> None:
    amd = text[text.index("### 1 AMD"):text.index("#### 1.1 Zen 5")]
    assert "> Out of date: Since this report was written, “Zen 5” has a report now." in amd
    apple = text[text.index("### 2 Apple"):text.index("### 3 ARM")]
    assert "This problem failed: what follows is the reason given." in apple
    assert "Reason: Apple publishes no cache sizes." in apple
    arm = text[text.index("### 3 ARM"):text.index("## References")]
    assert "No report yet: this problem was not finished." in arm
    assert "- [x] Intel's size is known" in text


def test_references_are_numbered_by_first_citation_one_per_source(text: str) -> None:
    summary = text[text.index("## Summary"):text.index("## Contents")]
    assert "48 KiB [\\[1, part 1\\]](#ref-1)" in summary, "the root's report is read first"
    assert "128 KiB [\\[2\\]](#ref-2), by the notes our own notes [\\[2\\]](#ref-2)" in summary
    amd = text[text.index("### 1 AMD"):text.index("#### 1.1 Zen 5")]
    assert "[\\[3, part 1\\]](#ref-3)" in amd and "against 48 KiB on Intel [\\[1, part 1\\]](#ref-1)" in amd, (
        "the Intel manual attached again (same address after redirects) is reference 1")
    references = text[text.index("## References"):text.index("## Consulted, not cited")]
    assert references.count('<a id="ref-') == 3
    intel = references[references.index('id="ref-1"'):references.index('id="ref-2"')]
    assert "Attached as: “Intel manual”; “Intel again”" in intel
    assert "Address: <https://example.org/intel>" in intel and "Final address (after redirects): " \
        "<https://www.example.org/intel/>" in intel
    assert "Fetched: 2026-01-01 09:30 UTC" in intel and "Type: web page" in intel
    assert "part 1 (under “Caches”): “L1 data cache is 48 KiB”; “is 48 KiB per core”" in intel
    notes = references[references.index('id="ref-2"'):references.index('id="ref-3"')]
    assert "Attached as: “Field notes”; “Notes copy”" in notes, "the same text attached twice is one source"
    amd = references[references.index('id="ref-3"'):]
    assert "File: amd-notes.md" in amd and "/home/someone" not in text, "a file by its name, not its path"
    assert "“32 KiB L1 data cache”; “Zen 5 has 48 KiB” (not in this part)" in amd, "a misquote is not shown as the source's"


def test_consulted_not_cited_lists_the_rest(text: str) -> None:
    consulted = text[text.index("## Consulted, not cited"):text.index("## Citation check")]
    assert "Unused page" in consulted and "<https://example.org/unused>" in consulted
    assert "Intel" not in consulted and "Field notes" not in consulted


def test_the_citation_check_gives_figures_with_their_coverage(text: str) -> None:
    check = text[text.index("## Citation check"):]
    assert "Citations: 7; 7 name a source in scope (100%)." in check
    assert "Quotes: 4 of 7 resolved citations carry one (57%); of those, 3 are found in the part they cite (75%), " \
        "0 in another part of the same source, 0 in another source, 1 nowhere." in check
    assert "### Errors" in check and "“Zen 5 has 48 KiB” of \\[\\[AMD notes#1\\]\\] is found nowhere" in check
    assert "Numbers:" in check and "Length: 4 of 5 problems have a report" in check
    assert "### Repeated paragraphs" in check and "[§ How big are L1 caches?](#s-root) and [§ 1 AMD](#s-1) (100% alike)" in check
    assert REPEATED[:40] in check


def test_a_research_with_no_problem_is_refused_with_a_sentence(tmp_path: Path) -> None:
    research = Research.create(tmp_path / "empty", "Nothing yet.")
    with pytest.raises(NothingToCompile, match="has no problem defined yet: there is nothing to compile"):
        build(research.root)


HOSTILE = ("Summarized problem definition: hostile.\n<script>alert(1)</script> <img src=x onerror=alert(2)>\n"
           + "x" * 1_000_000 + "\n"
           '[[Intel manual#9|"part nine"]] and [[Intel manual#1|"' + "q" * 10_000 + '"]] and [[never closed\n'
           "Conclusion: none.")


def test_hostile_reports_compile_and_are_listed(tmp_path: Path) -> None:
    research = sample(tmp_path / "r", root_report=HOSTILE)
    compilation = build(research.root)
    messages = [f.message for f in compilation.check.flagged]
    assert any("names a part “Intel manual” does not have" in m for m in messages)
    assert any("10,000 characters" in m for m in messages)
    for fmt in ("md", "html", "csl-json", "bibtex"):
        data = render(compilation, fmt)
        assert data
    html = render(compilation, "html").decode("utf-8")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in html


def test_a_title_of_punctuation_only(tmp_path: Path) -> None:
    research = Research.create(tmp_path / "r", "")
    research.execute("<<< define_problem\n///title\n?!…\n///content\nWhat?\n>>>\n")
    text = render(build(research.root), "md").decode("utf-8")
    assert text.startswith("# ?!…\n") and "[?!…](#s-root)" in text


def test_report_headings_move_below_their_section() -> None:
    text = "# Top\nSetext\n======\n```\n# not a heading\n```\n###### deep"
    assert shift_headings(text, 3) == "#### Top\n#### Setext\n```\n# not a heading\n```\n###### deep"


def test_a_compile_reads_the_research_and_writes_nothing_in_it(research: Research) -> None:
    """Not even the parts' layouts it had to divide (derived data the prompt keeps): a compile
    may run beside a message, or over someone else's research."""
    shutil.rmtree(research.root / ".deep-research" / "parts", ignore_errors=True)
    forget_all()  # as a fresh process: every source divided again

    def files() -> dict[str, bytes]:
        return {str(p.relative_to(research.root)): p.read_bytes() for p in sorted(research.root.rglob("*")) if p.is_file()}

    before = files()
    render(build(research.root), "md")
    assert files() == before


def _one_problem(root: Path, report: str, *attachments) -> Research:
    """A root problem with `attachments` and `report` (a research as someone else may hand it over)."""
    from deep_research.engine.tree.model import Attachment

    from dr_compiled_support import attach, block

    research = Research.create(root, "")
    research.execute(block("define_problem", title="T", content="What?"))
    for name, text, source in attachments:
        attach(research, (), Attachment(name, text, "2026-01-01T00:00:00+00:00", source=source,
                                        fetched="2026-01-01T00:00:00+00:00" if source else ""))
    research.execute(block("write_report", content=report))
    return research


def test_an_address_with_a_bad_port_is_shown_not_a_crash(tmp_path: Path) -> None:
    research = _one_problem(tmp_path / "r", "Summarized problem definition: x.\n\nIt is 48 KiB [[S#1]].\n\nConclusion: y.",
                            ("S", "The L1 is 48 KiB.", "https://example.org:99999/a"),
                            ("U", "Unused.", "http://example.org:port/b"))
    text = render(build(research.root), "md").decode("utf-8")
    assert "Address: <https://example.org:99999/a>" in text and "http://example.org:port/b" in text


def test_a_quoted_citation_in_a_table_cell_is_its_mark_in_html(tmp_path: Path) -> None:
    """The `|` of `[[NAME#N|"words"]]` does not split the cell: the page shows the mark, and the
    entry's links back to it and the check's link to the misquote lead somewhere."""
    report = ("Summarized problem definition: x.\n\n| size | source |\n|---|---|\n"
              '| 48 KiB | [[S#1|"48 KiB per core"]] |\n| 32 KiB | [[S#1|the manual]] |\n| 9 | [[S#1|"nine"]] |\n\n'
              "Conclusion: y.")
    research = _one_problem(tmp_path / "r", report, ("S", "The L1 data cache is 48 KiB per core.", ""))
    html = render(build(research.root), "html").decode("utf-8")
    summary = html[html.index('<section id="summary">'):html.index('<nav id="contents"')]
    assert "[[S#1" not in summary and '<td>9</td>\n<td><a class="cite" id="c3"' in summary
    assert '<td><a class="cite" id="c1" href="#ref-1"' in html and "<td>the manual <a class=\"cite\" id=\"c2\"" in html
    anchors = set(re.findall(r'id="([^"]+)"', html))
    assert {"c1", "c2", "c3"} <= anchors
    assert all(target in anchors for target in re.findall(r'href="#([^"]*)"', html))


def test_a_compile_replaces_its_own_markdown_whatever_the_titles_length(tmp_path: Path) -> None:
    """`<research>/report.md` (what the editor, MCP and the REPL write) is the compile's own even
    when the title's line fills the first 4 kB."""
    from deep_research.app.compile import choose_format, compile_report

    research = Research.create(tmp_path / "r", "")
    research.execute("<<< define_problem\n///title\n" + "長い題名" * 400 + "\n///content\nWhat?\n>>>\n")
    first = compile_report(research.root, choose_format("md"))
    again = compile_report(research.root, choose_format("md"))
    assert first.path == again.path == research.root / "report.md"


def test_search_results_for_a_query_with_a_slash_are_search_results_not_a_file(tmp_path: Path) -> None:
    from deep_research.engine.tree.model import Attachment

    from dr_compiled_support import attach

    research = _one_problem(tmp_path / "r", "Summarized problem definition: x.\n\nConclusion: y.")
    attach(research, (), Attachment("Search TCP-IP latency", "1. A result\nhttps://example.org/a\n",
                                    "2026-01-01T00:00:00+00:00", source="TCP/IP latency",
                                    content_type="search results (duckduckgo)"))
    text = render(build(research.root), "md").decode("utf-8")
    consulted = text[text.index("## Consulted, not cited"):text.index("## Citation check")]
    assert "Type: web search results" in consulted and "File:" not in consulted


def test_a_time_that_has_no_utc_form_is_shown_as_written(tmp_path: Path) -> None:
    from deep_research.engine.tree.model import Attachment

    from dr_compiled_support import attach

    research = _one_problem(tmp_path / "r", "Summarized problem definition: x.\n\nIt is 48 KiB [[S#1]].\n\nConclusion: y.")
    attach(research, (), Attachment("S", "The L1 is 48 KiB.", "0001-01-01T00:00:00+05:00", source="https://example.org/a",
                                    fetched="0001-01-01T00:00:00+05:00"))
    compilation = build(research.root)
    assert "Fetched: 0001-01-01T00:00:00+05:00" in render(compilation, "md").decode("utf-8")
    assert render(compilation, "csl-json") and render(compilation, "bibtex")


def test_a_file_attached_on_windows_is_a_file_by_its_name(tmp_path: Path) -> None:
    """A research made on Windows, compiled elsewhere: the entry names the file, not the path."""
    research = _one_problem(tmp_path / "r", "Summarized problem definition: x.\n\nIt is 48 KiB [[S#1]].\n\nConclusion: y.",
                            ("S", "The L1 is 48 KiB.", "C:\\Users\\someone\\papers\\amd-notes.md"))
    text = render(build(research.root), "md").decode("utf-8")
    assert "File: amd-notes.md" in text and "Type: file" in text and "someone" not in text
