"""The evidence commands in the engine, offline: what analysis asks for, how results become
attachments, and how a failure fails only its command. Results are plain values here; the
real fetching is tested in tests/sources against servers on loopback."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from deep_research.engine.execution.evidence import (
    MAX_FILE_BYTES, MAX_SOURCE_BYTES, NOT_GATHERED, Evidence, Failed, Found, Need, NeedKind,
)
from deep_research.engine.language.analysis import Status
from deep_research.engine.research import Research

from dr_engine_support import ROOT_TITLE, apply_edits, files, line, read, statuses

URL = "https://example.org/articles/tiling"


def page(title: str = "Tiling explained", text: str = "Tiles fit the cache.", **more: str) -> Found:
    fields = dict(source=URL, final_url=URL + "?from=redirect", content_type="text/html", sha256="ab" * 32,
                  fetched="2025-01-02T03:04:05+00:00")
    fields.update(more)
    return Found(title=title, text=text, **fields)


def errors(research: Research, text: str) -> list[tuple[str, str]]:
    analysis = research.analyze(text)
    return [(d.code, d.message) for d in analysis.diagnostics if d.is_error]


# -- analysis: checks while typing, and the needs -------------------------------------------------------


def test_analysis_lists_the_needs_without_fetching(research: Research) -> None:
    (research.root / "notes.md").write_text("# Notes\n", encoding="utf-8")
    text = line("attach_url", URL) + line("attach_file", "notes.md") + line("search", "  tiled   matmul ") \
        + line("attach_url", URL)
    analysis = research.analyze(text)
    assert [o.status for o in analysis.outcomes] == [Status.OK] * 4
    assert analysis.diagnostics == []
    assert analysis.needs == [  # once each, in message order, tied to their lines
        Need(NeedKind.URL, URL), Need(NeedKind.FILE, str((research.root / "notes.md").resolve())),
        Need(NeedKind.SEARCH, "tiled matmul"),
    ]
    assert [n.line for n in analysis.needs] == [1, 2, 3]
    assert "Will attach the page at" in analysis.outcomes[0].summary
    assert files(research.root) == files(research.root)  # nothing written
    assert not (research.root / "Attachments").exists()


@pytest.mark.parametrize("url, fragment", [
    ("not a url", "has no spaces"),
    ("ftp://example.org/file.txt", "not `ftp:`"),
    ("file:///etc/passwd", "not `file:`"),
    ("javascript:alert(1)", "not `javascript:`"),
    ("https://", "no host name"),
    ("https://user:secret@example.org/", "user name or password"),
    ("http://example.org:99999/", "not a valid URL"),
    ("http://[::1/", "not a valid URL"),
    ("tiling", "is not a URL"),
])
def test_malformed_urls_are_errors_while_typing(research: Research, url: str, fragment: str) -> None:
    [(code, message)] = errors(research, line("attach_url", url))
    assert code == "command-failed"
    assert fragment in message


def test_a_missing_scheme_gets_a_quick_fix(research: Research) -> None:
    text = line("attach_url", "example.org/page")
    [diagnostic] = [d for d in research.analyze(text).diagnostics if d.is_error]
    assert "https://example.org/page" in diagnostic.message
    [fix] = diagnostic.fixes
    assert apply_edits(text, fix.edits) == line("attach_url", "https://example.org/page")


def test_wrapped_urls_and_paths_are_accepted(research: Research) -> None:
    (research.root / "a b.txt").write_text("x", encoding="utf-8")
    analysis = research.analyze(line("attach_url", f"<{URL}>") + line("attach_file", '"a b.txt"'))
    assert [o.status for o in analysis.outcomes] == [Status.OK, Status.OK]
    assert analysis.needs[0].target == URL


def test_search_queries_are_one_line_and_bounded(research: Research) -> None:
    assert errors(research, line("search", "x" * 400)) == []
    [(_, message)] = errors(research, line("search", "x" * 401))
    assert "keep it under 400" in message
    [(code, _)] = errors(research, "///search\n")
    assert code == "missing-argument"
    [(_, message)] = errors(research, line("search", '?! "…" -- ***'))  # nothing a search engine could look for
    assert message == 'The query "?! "…" -- ***" has no words: write what to search for, e.g. `///search tiled matrix ' \
                      'multiplication`.'


# -- attach_file: the root guard, by stat only ------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside", encoding="utf-8")
    return secret


def test_paths_outside_the_research_are_refused(research: Research, outside: Path) -> None:
    (research.root / "escape").symlink_to(outside)
    (research.root / "linked-dir").symlink_to(outside.parent, target_is_directory=True)
    for path in ("../secret.txt", str(outside), "escape", "linked-dir/secret.txt", "Subproblems/../../secret.txt",
                 "~/../../../../../../etc/passwd"):
        [(_, message)] = errors(research, line("attach_file", path))
        assert "outside the research folder" in message, path
        assert "allowed_roots" in message


def test_allowed_roots_open_other_folders(research: Research, outside: Path) -> None:
    text = line("attach_file", str(outside))
    analysis = research.analyze(text, roots=(outside.parent,))
    assert [o.status for o in analysis.outcomes] == [Status.OK]
    assert analysis.needs == [Need(NeedKind.FILE, str(outside.resolve()))]


def test_special_and_missing_files_are_refused_before_any_read(research: Research) -> None:
    fifo = research.root / "pipe"
    os.mkfifo(fifo)  # analysing must not open it: opening a FIFO for reading would block
    (research.root / "folder").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(research.root / "sock"))
    try:
        cases = {
            "pipe": "a FIFO (named pipe)", "folder": "is a folder", "sock": "a socket",
            "missing.txt": "There is no file", "": "needs its file path",
        }
        for path, fragment in cases.items():
            [(_, message)] = errors(research, line("attach_file", path) if path else "///attach_file\n")
            assert fragment in message, (path, message)
        [(_, message)] = [(c, m) for c, m in errors(research, line("attach_file", "/dev/zero"))]
        assert "outside the research folder" in message
        analysis = research.analyze(line("attach_file", "/dev/zero"), roots=(Path("/dev"),))
        assert "a character device" in analysis.outcomes[0].summary
    finally:
        sock.close()


def test_files_over_the_cap_are_refused_by_their_size(research: Research) -> None:
    big = research.root / "big.log"
    with open(big, "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: no data written
    [(_, message)] = errors(research, line("attach_file", "big.log"))
    assert "larger than 10 MB" in message


# -- execution with evidence ------------------------------------------------------------------------------


def test_a_fetched_page_becomes_an_attachment_with_its_source(research: Research) -> None:
    text = line("attach_url", URL)
    need = research.analyze(text).needs[0]
    result = research.execute(text, evidence=Evidence({need: page()}))
    assert statuses(result) == [("attach_url", "ok")]
    on_disk = read(research.root, "Attachments", "Tiling explained.md")
    assert on_disk.startswith("---\nname: Tiling explained\n")
    for field in (f'source: "{URL}"', f'final_url: "{URL}?from=redirect"', 'content_type: "text/html"',
                  "sha256: " + "ab" * 32, 'fetched: "2025-01-02T03:04:05+00:00"'):
        assert field in on_disk
    assert on_disk.endswith("\nTiles fit the cache.\n")
    prompt = research.prompt()
    assert f'<attachment name="Tiling explained" source="{URL}" problem="{ROOT_TITLE}">\nTiles fit the cache.' in prompt
    assert "Attached \"Tiling explained\" (20 characters, text/html) from " + URL in result.reply


def test_a_failed_fetch_fails_only_its_command(research: Research) -> None:
    text = line("add_criteria", "Uses a source") + line("attach_url", URL) + line("focus_down", "Sub A")
    need = research.analyze(text).needs[0]
    result = research.execute(text, evidence=Evidence({need: Failed("The server answered 404 Not Found.")}))
    assert statuses(result) == [("add_criteria", "ok"), ("attach_url", "failed"), ("focus_down", "skipped")]
    assert "Command 2 (Line 2, `attach_url`): The server answered 404 Not Found." in result.reply
    assert "Uses a source" in read(research.root, "Criteria of Definition of Done.md")
    assert not (research.root / "Attachments").exists()


def test_without_gathering_the_commands_fail_plainly(research: Research) -> None:
    result = research.execute(line("attach_url", URL) + line("add_criteria", "Still runs"))
    assert statuses(result) == [("attach_url", "failed"), ("add_criteria", "ok")]
    assert NOT_GATHERED in result.reply


def test_same_content_twice_adds_nothing_and_same_title_gets_a_number(research: Research) -> None:
    text = line("attach_url", URL)
    need = research.analyze(text).needs[0]
    research.execute(text, evidence=Evidence({need: page()}))
    again = research.execute(text, evidence=Evidence({need: page()}))
    assert statuses(again) == [("attach_url", "ok")]
    assert "already holds this content" in again.reply
    changed = research.execute(text, evidence=Evidence({need: page(text="New text.", sha256="cd" * 32)}))
    assert "Attached \"Tiling explained (2)\"" in changed.reply
    names = sorted(p.name for p in (research.root / "Attachments").iterdir())
    assert names == ["Tiling explained (2).md", "Tiling explained.md"]


def test_titles_are_made_safe_and_short(research: Research) -> None:
    text = line("attach_url", URL)
    need = research.analyze(text).needs[0]
    research.execute(text, evidence=Evidence({need: page(title="../../etc/passwd\n<script>" + "x" * 300)}))
    [attachment] = research.tree.attachments(())
    assert attachment.name.startswith("../../etc/passwd <script>") and len(attachment.name) == 150
    [entry] = (research.root / "Attachments").iterdir()
    assert entry.name.startswith("_.._etc_passwd _script_xxx") and entry.name.endswith(".md")  # names.py's safe form
    empty_title = research.execute(text, evidence=Evidence({need: page(title="", sha256="ef" * 32)}))
    assert f"Attached \"{URL}?from=redirect\"" in empty_title.reply


def test_results_are_checked_like_arguments(research: Research) -> None:
    text = line("attach_url", URL)
    need = research.analyze(text).needs[0]
    empty = research.execute(text, evidence=Evidence({need: page(text="  \n ")}))
    assert statuses(empty) == [("attach_url", "failed")]
    assert "has no readable text" in empty.reply
    bogus = research.execute(text, evidence=Evidence({need: "not a result"}))  # type: ignore[dict-item]
    assert statuses(bogus) == [("attach_url", "failed")]
    noted = research.execute(text, evidence=Evidence({need: page(text="y" * 1_500_000, notes=("Fallback used.",))}))
    assert "Warning: Fallback used." in noted.reply
    [attachment] = research.tree.attachments(())
    assert attachment.content == "y" * 1_500_000  # a source is kept whole (the 1,000,000-character cut went)


def test_a_source_over_what_a_file_may_hold_is_cut_where_it_can_still_be_read(research: Research) -> None:
    text = line("attach_url", URL)
    need = research.analyze(text).needs[0]
    huge = "é" * (MAX_SOURCE_BYTES // 2 + 10)  # two bytes each: 20 over
    result = research.execute(text, evidence=Evidence({need: page(text=huge)}))
    assert f"Only the first {MAX_SOURCE_BYTES // 2:,} of {len(huge):,} characters were kept" in result.reply
    [attachment] = research.tree.attachments(())
    assert attachment.content.endswith("[… cut: 10 more characters were not kept …]")
    assert attachment.content.startswith("é" * 1000)


def test_search_results_become_one_attachment(research: Research) -> None:
    text = line("search", "tiled matmul")
    need = research.analyze(text).needs[0]
    found = Found(title="Search: tiled matmul", text="1. A\n   https://a.example/\n   about A", source="tiled matmul",
                  content_type="search results (searxng)", sha256="12" * 32)
    result = research.execute(text, evidence=Evidence({need: found}))
    assert statuses(result) == [("search", "ok")]
    assert (research.root / "Attachments" / "Search_ tiled matmul.md").is_file()
    assert '<attachment name="Search: tiled matmul" source="tiled matmul"' in research.prompt()


def test_the_commands_run_only_in_focus(fresh: Research) -> None:
    [(code, _)] = errors(fresh, line("attach_url", URL))
    assert code == "invalid-in-phase"
    assert fresh.analyze(line("attach_url", URL)).needs == []


def test_a_home_folder_that_does_not_exist_is_a_refusal_not_a_failure(research) -> None:
    """`~nosuchuser/x`: Path.expanduser raises for an unknown user (found by fuzz_analysis)."""
    from deep_research.engine.core.state import Phase
    from deep_research.engine.core.text import Pos
    from deep_research.engine.language.parser import parse
    from deep_research.engine.views import assist
    from deep_research.engine.views.assist import Snapshot

    text = "///attach_file ~no-such-user-here/notes.md\n"
    analysis = research.analyze(text)
    assert analysis.outcomes[0].status.value == "failed"
    assert "There is no file" in analysis.outcomes[0].summary
    snap = Snapshot(Phase.IN_FOCUS, root=research.root)
    assert assist.complete(parse(text), Pos(0, len("///attach_file ~no-such-user-here/")), snap) == []


def test_completion_and_the_grammar_offer_attach_file_the_same_files(research) -> None:
    """The research's own files (its tree, settings, message documents) are never offered, by
    the editor's completion or the autopilot's grammar: one list (`store.is_own_entry`)."""
    from deep_research.autopilot.grammar import attachable
    from deep_research.engine.core.state import Phase
    from deep_research.engine.core.text import Pos
    from deep_research.engine.language.parser import parse
    from deep_research.engine.views import assist
    from deep_research.engine.views.assist import Snapshot

    for name in ("notes.md", "deep-research.toml", "message.dr", "Other.DR"):
        (research.root / name).write_text("text\n", encoding="utf-8")
    text = "///attach_file \n"
    offered = assist.complete(parse(text), Pos(0, len(text) - 1), Snapshot(Phase.IN_FOCUS, root=research.root))
    files = [c.label for c in offered if not c.label.endswith("/")]
    assert files == ["notes.md"] and list(attachable(research.root)) == files
