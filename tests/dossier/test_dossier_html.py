"""The dossier's HTML: one self-contained file, every text escaped, nothing fetched."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from deep_research.dossier import export
from deep_research.dossier.markdown import Markdown, safe_url
from deep_research.engine.research import Research

from dr_dossier_support import NESTED, ROOT_TITLE, all_titles, block, sample_research

REPO = Path(__file__).resolve().parents[2]
# Every tag the dossier may contain: ours, and what safe markdown makes.
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "link", "body", "header", "h1", "h2", "h3", "h4", "h5", "h6", "p",
    "button", "div", "nav", "input", "ul", "ol", "li", "details", "summary", "a", "span", "main", "section", "footer",
    "script", "code", "pre", "table", "thead", "tbody", "tr", "th", "td", "em", "strong", "blockquote", "hr", "br",
}


class Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):  # noqa: ANN001
        self._in_script = False

    def handle_data(self, data):  # noqa: ANN001
        if self._in_script:
            self.scripts.append(data)
        else:
            self.text.append(data)


def parse(html: str) -> Collect:
    collected = Collect()
    collected.feed(html)
    return collected


def check_safe(html: str) -> Collect:
    """Only our tags; no event handlers; links only to safe places; nothing to load."""
    page = parse(html)
    for tag, attrs in page.tags:
        assert tag in ALLOWED_TAGS, tag
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        assert "src" not in attrs and "srcset" not in attrs, (tag, attrs)
        assert "style" not in attrs, (tag, attrs)
        if "href" in attrs:
            href = attrs["href"] or ""
            if tag == "link":
                assert attrs.get("rel") == "icon" and href == "data:,", attrs
            else:
                assert href.startswith("#") or re.match(r"(https?://[^/\s]|mailto:)", href), href
    return page


@pytest.fixture(scope="module")
def dossier(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("dossier") / "research"
    sample_research(root)
    result = export(root, root / "dossier.html")
    assert result.problems == len(all_titles())
    return root, result.path.read_text(encoding="utf-8")


def test_one_file_that_loads_nothing(dossier: tuple[Path, str]) -> None:
    _, html = dossier
    page = check_safe(html)
    assert [t for t, _ in page.tags].count("script") == 1
    assert [t for t, _ in page.tags].count("style") == 1
    assert page.scripts == [resources.files("deep_research.dossier").joinpath("assets/dossier.js").read_text()]
    policy = next(a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert policy.startswith("default-src 'none'") and "unsafe-inline" not in policy
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+'", policy)
    assert "@import" not in html and "url(" not in html  # the style sheet fetches nothing either


def test_every_text_is_escaped(dossier: tuple[Path, str]) -> None:
    _, html = dossier
    assert "<script>window.__pwned" not in html
    assert "&lt;script&gt;window.__pwned = 1; alert(&quot;x&quot;)&lt;/script&gt; Hostile" in html
    assert "onerror" not in [a for _, attrs in parse(html).tags for a in attrs]
    text = "".join(parse(html).text)
    for title in all_titles():
        assert title in text
    assert "Find the best <b>tiled</b> matmul" in text  # the instruction, as text
    assert "Plain notes, <b>not bold</b>." in text  # an attachment, as text
    assert "Evil <script>source</script>" in text  # a hostile attachment name from front matter


def test_markdown_reports(dossier: tuple[Path, str]) -> None:
    _, html = dossier
    assert '<th class="al-right">tile</th>' in html and "<td class=\"al-right\">19.0</td>" in html
    assert '<pre><code class="language-c">for (int i = 0; i &lt; n; i += T) { kernel(i); }' in html
    assert '<a href="https://example.org/paper" rel="noopener noreferrer">the paper</a>' in html
    assert "[bad](javascript:alert(1))" in html  # not a link
    assert '<a class="image-link" href="https://example.org/chart.png" rel="noopener noreferrer">chart (image)</a>' in html
    assert "Q1: What limits speed?<br />" in html  # a line break is one


def test_attachments_are_folded_with_their_sources(dossier: tuple[Path, str]) -> None:
    _, html = dossier
    assert html.count('<details class="attachment" id="p0-a') == 3 + 0  # root: Notes, Cache paper, Evil source
    # once in the attachment (source and final URL are the same), once in each of the two Sources lists citing it
    assert html.count('<a href="https://example.org/cache?a=1&amp;b=2" rel="noopener noreferrer">') == 3
    assert "content_type: text/html" in html and "fetched: 2026-01-01T00:00:01+00:00" in html
    assert 'href="javascript' not in html and "url: javascript:alert(1)" in html  # shown, not linked


def test_navigation_tree_and_timeline(dossier: tuple[Path, str]) -> None:
    root, html = dossier
    nav = html[html.index('<nav id="nav"'):html.index("</nav>")]
    assert f'{ROOT_TITLE}</a> <span class="st open">open</span> <span class="crit">[1/2]</span>' in nav
    assert 'L1 cache sizes</a> <span class="st done">done</span> <span class="crit">[1/1]</span>' in nav
    assert nav.index("L1 cache sizes") < nav.index(NESTED) < nav.index("Compiler flags")
    timeline = html[html.index('<ol class="timeline">'):]
    assert timeline.count('<li id="m-') == 9
    assert '<li id="m-9" class="undone">' in timeline and "Undo of <a href=\"#m-9\">message 9</a>" in timeline
    assert '<li class="cmd failed"><code>mark_criteria_as_done</code> (line 2) — failed: There is no criterion 9' in timeline
    assert "Round 2 · test-model · ~2,400 prompt + ~300 completion tokens · 1.5 s" in timeline
    # Per-problem effort, rolled up: the root counts the child's rounds too.
    assert "2 model rounds, ~4,750 tokens" in html


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(list("<>&\"'`*_[]()!#|-:/\\ \nabcjsvrpt=.;") + [
    "javascript:", "http://x", "<script>", "](", "![", "data:", "<img src=x onerror=y>", "    ", "```", "| a |\n|---|\n",
]), max_size=80).map("".join))
@example("[]()")  # an empty destination, which markdown-it does not validate (found by this test)
def test_markdown_output_is_always_safe(text: str) -> None:
    html = Markdown().render(text)
    check_safe(html)
    assert "<script" not in html


@pytest.mark.parametrize("url, ok", [
    ("https://example.org/a", True), ("http://x.y", True), ("mailto:a@b.c", True), ("#p3", True),
    ("javascript:alert(1)", False), ("JaVaScRiPt:alert(1)", False), ("data:text/html,x", False),
    ("file:///etc/passwd", False), ("//evil.example/x", False), ("Attachments/x.md", False),
    ("vbscript:x", False), ("http:///nohost", False), ("https://a\nb", False), ("", False),
])
def test_link_schemes(url: str, ok: bool) -> None:
    assert safe_url(url) is ok


def test_an_empty_research_and_a_deep_one(tmp_path: Path) -> None:
    fresh = Research.create(tmp_path / "fresh", "Nothing yet")
    html = export(fresh.root, tmp_path / "fresh.html").path.read_text(encoding="utf-8")
    check_safe(html)
    assert "No problem is defined yet." in html and "Nothing has been executed yet." in html
    deep = Research.create(tmp_path / "deep")
    deep.rule_overrides = {"max_depth": 100}  # past the deepest budget a research may set
    deep.execute(block("define_problem", title="Level 0", content="x"))
    for level in range(1, 60):  # deeper than any research; the writer must not recurse
        deep.execute(block("add_subproblem", title=f"Level {level}", content="x") + f"///focus_down Level {level}\n")
    html = export(deep.root, tmp_path / "deep.html").path.read_text(encoding="utf-8")
    check_safe(html)
    assert html.count('<section class="page problem"') == 60


def test_export_from_the_command_line(tmp_path: Path) -> None:
    root = tmp_path / "research"
    sample_research(root)
    env = {"PYTHONPATH": str(REPO / "server"), "PATH": "/usr/bin:/bin"}
    run = lambda *a: subprocess.run([sys.executable, "-m", "deep_research", *map(str, a)], capture_output=True,  # noqa: E731
                                    text=True, env=env, timeout=60)
    done = run("export", root)
    assert done.returncode == 0, done.stderr
    assert (root / "dossier.html").is_file() and "Wrote" in done.stdout and "5 problems" in done.stdout
    chosen = tmp_path / "elsewhere" / "report.html"
    chosen.parent.mkdir()
    assert run("export", root, "-o", chosen).returncode == 0 and chosen.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert not [p for p in chosen.parent.iterdir() if p.name != "report.html"]  # no temporary left
    for args, message in [((tmp_path / "nowhere",), "no such folder"), ((root, "-o", tmp_path / "no" / "x.html"), "no such folder"),
                          ((root, "-o", chosen.parent), "is a folder"), ((tmp_path,), "is not a research")]:
        failed = run("export", *args)
        assert failed.returncode == 2 and message in failed.stderr and "Traceback" not in failed.stderr, failed.stderr


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**12) | st.floats(allow_nan=False) | st.text(max_size=30)
    | st.sampled_from(["<script>alert(1)</script>", "javascript:alert(1)", "2026-01-01T00:00:00+00:00", "Z", "round",
                       "undo", "ok", "failed", "skipped", '" onclick="x']),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
KEYS = ["record", "message", "session", "problem", "command", "status", "result", "error", "line", "started", "ended",
        "round", "model", "prompt_tokens", "completion_tokens", "tokens_estimated", "latency_ms", "outcome",
        "commands", "files", "put_back", "text"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(st.sampled_from(KEYS), JSON_VALUES, max_size=8) | JSON_VALUES, max_size=12))
def test_a_hostile_journal_gives_a_safe_page(tmp_path: Path, records: list) -> None:
    root = tmp_path / "hostile"
    if not root.exists():
        Research.create(root).execute(block("define_problem", title="T", content="x"))
    journal = root / ".deep-research" / "journal.jsonl"
    with open(journal, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    html = export(root, tmp_path / "hostile.html").path.read_text(encoding="utf-8")
    page = check_safe(html)
    assert [t for t, _ in page.tags].count("script") == 1


def test_a_file_that_is_not_a_dossier_is_never_replaced_unless_named(tmp_path: Path) -> None:
    root = tmp_path / "research"
    Research.create(root).execute(block("define_problem", title="T", content="x"))
    mine = root / "dossier.html"
    mine.write_text("<html>my own page</html>", encoding="utf-8")
    env = {"PYTHONPATH": str(REPO / "server"), "PATH": "/usr/bin:/bin"}
    refused = subprocess.run([sys.executable, "-m", "deep_research", "export", str(root)], capture_output=True,
                             text=True, env=env, timeout=60)
    assert refused.returncode == 2 and "is not a dossier" in refused.stderr
    assert mine.read_text(encoding="utf-8") == "<html>my own page</html>"
    named = subprocess.run([sys.executable, "-m", "deep_research", "export", str(root), "-o", str(mine)],
                           capture_output=True, text=True, env=env, timeout=60)
    assert named.returncode == 0 and mine.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert export(root, mine).bytes > 0  # a dossier is replaced by the next one


def test_a_message_run_while_the_dossier_is_written_makes_it_write_again(tmp_path: Path, monkeypatch) -> None:
    """Export takes no lock: a message executed while the page is written (here, made to
    happen in the middle of the first writing) changes the state, and the page is written
    again, so the dossier shows the research as it is, not half of each moment."""
    from deep_research.dossier import page

    root = tmp_path / "research"
    research = Research.create(root)
    research.execute(block("define_problem", title="Tiling", content="Which tiles are fastest?"))
    real_write, writings = page.Page.write, []

    def write_with_a_message_in_between(self, *args, **kwargs):
        writings.append(1)
        if len(writings) == 1:
            Research.open(root).execute(block("add_subproblem", title="Cache sizes", content="x"))
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(page.Page, "write", write_with_a_message_in_between)
    result = export(root, tmp_path / "dossier.html")
    assert (result.attempts, result.settled, len(writings)) == (2, True, 2)
    assert "Cache sizes" in result.path.read_text(encoding="utf-8") and result.problems == 2

    def write_with_a_message_each_time(self, *args, **kwargs):
        writings.append(1)
        Research.open(root).execute(block("add_subproblem", title=f"Busy {len(writings)}", content="x"))
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(page.Page, "write", write_with_a_message_each_time)
    busy = export(root, tmp_path / "dossier.html")
    assert (busy.attempts, busy.settled) == (3, False)  # kept, and said: it was written as messages ran
    assert busy.path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_citations_link_to_their_attachments_and_sources(dossier: tuple[Path, str]) -> None:
    _, html = dossier
    page = html[html.index('<section class="page problem" id="p0"'):html.index('<section class="page problem" id="p1"')]
    anchors = dict(re.findall(r'<details class="attachment" id="(p0-a\d)"><summary>([^<]+?)(?: <span|</summary>)', page))
    paper = next(a for a, name in anchors.items() if name == "Cache paper")
    notes = next(a for a, name in anchors.items() if name == "Notes")
    assert (f'<a class="cite" href="#{paper}">the paper on caches</a> <a class="cite-source" '
            'href="https://example.org/cache?a=1&amp;b=2"') in page
    assert f'<a class="cite" href="#{notes}">notes</a>' in page
    assert '<span class="cite missing" title="not an attachment (or a part of one) of this problem or its parents">[[Nowhere]]</span>' in page
    sources = page[page.index('<div class="sources">'):]
    assert sources.index("Cache paper") < sources.index("Notes")  # in the order they are cited
    child = html[html.index('<section class="page problem" id="p1"'):]
    assert f'<a class="cite" href="#{paper}">Cache paper</a>' in child  # a parent's attachment


def test_a_stale_report_says_so(tmp_path: Path) -> None:
    research = sample_research(tmp_path / "research")
    research.execute("<<< append_to_problem_definition\n///content\nAlso GPUs.\n>>>\n")
    html = export(research.root, tmp_path / "dossier.html").path.read_text(encoding="utf-8")
    assert html.count('<p class="stale">') == 1
    assert "<strong>Out of date.</strong> Since this report was written, the problem&#x27;s definition changed." in html


def test_a_labelled_citation_in_a_table_keeps_its_row_whole() -> None:
    """A table's row is cut into cells at its pipes before a citation is read: the `|` of
    `[[Name#1|"a quote"]]` split its cell and shifted the row (the dossier, and the compiled report
    through it)."""
    from deep_research.dossier.markdown import Cited

    text = ('| claim | value |\n|---|---|\n| L1 [[Manual#1|"48 KiB"]] | 48 KiB |\n| L2 [[Manual#2|shown text]] | 2 MiB |\n'
            '\nOutside a table: [[Manual#1|"48 KiB"]] | a pipe.\n')
    html = Markdown().render(text, cite=lambda name: Cited(name, "att-1"))
    cells = re.findall(r"<td>(.*?)</td>", html)
    assert cells == ['L1 <a class="cite" href="#att-1">&quot;48 KiB&quot;</a>', "48 KiB",
                     'L2 <a class="cite" href="#att-1">shown text</a>', "2 MiB"], cells
    assert '<p>Outside a table: <a class="cite" href="#att-1">&quot;48 KiB&quot;</a> | a pipe.</p>' in html
