"""`deep-research new` and `continue` with everything seed 000 lets the user give: context as
files or text, attachments as files or URLs (fetched like `///attach_url`, with the
research's `[fetch]` settings), against a real HTTP server on loopback. A source that cannot
be had fails with a sentence naming it and leaves nothing half-made."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_httpserver import HTTPServer

from tests.pages import CACHE_BLOCKING as PAGE

from dr_cli_support import BOOK, DEFINE, snapshot

ALLOW_LOOPBACK = "[fetch]\nallow_private_networks = true\n"


def test_new_in_a_folder_with_only_its_settings_takes_text_files_and_a_page(run, tmp_path: Path, web: HTTPServer) -> None:
    web.expect_request("/blocking").respond_with_data(PAGE, content_type="text/html; charset=utf-8")
    folder = tmp_path / "research"
    folder.mkdir()
    (folder / "deep-research.toml").write_text(ALLOW_LOOPBACK, encoding="utf-8")  # its [fetch] settings apply
    (tmp_path / "background.md").write_text("Caches are 32 KiB.", encoding="utf-8")
    (tmp_path / "bench.csv").write_text("tile,gflops\n32,19\n", encoding="utf-8")
    url = web.url_for("/blocking")
    result = run("new", folder, "--instruction", "Focus on x86.", "--context", tmp_path / "background.md",
                 "--context-text", "The budget is one week.\nNo GPUs.", "--attach", url,
                 "--attach", tmp_path / "bench.csv")
    assert "Created a research in" in result.stdout
    assert f"[1/1] fetch {url}: done" in result.stderr
    prompt = (folder / BOOK / "prompt.md").read_text(encoding="utf-8")
    context = prompt.split("# Context", 1)[1]
    assert '<contextAttachment name="background.md">\nCaches are 32 KiB.' in context
    assert '<contextAttachment name="The budget is one week.">\nThe budget is one week.\nNo GPUs.' in context
    attachments = prompt.split("# Attachments", 1)[1].split("# Context", 1)[0]
    assert f'source="{url}"' in attachments and "Blocking a loop nest keeps a working set" in attachments
    assert "tile,gflops" in attachments
    assert (folder / "deep-research.toml").read_text(encoding="utf-8") == ALLOW_LOOPBACK  # left as it was

    # Defining the problem copies the page to the root problem, its source kept.
    (folder / "message.dr").write_text(DEFINE, encoding="utf-8")
    assert "2 attachment(s) were copied" in run("execute", folder / "message.dr").stdout
    page = (folder / "Attachments" / "Cache blocking.md").read_text(encoding="utf-8")
    assert f'source: "{url}"' in page and "sha256:" in page


def test_a_private_address_fails_new_naming_it_and_makes_nothing(run, tmp_path: Path, web: HTTPServer) -> None:
    web.expect_request("/page").respond_with_data("never read", content_type="text/plain")
    folder = tmp_path / "settings only"
    folder.mkdir()
    (folder / "deep-research.toml").write_text("model = 'm'\n", encoding="utf-8")  # no allow_private_networks
    (tmp_path / "notes.txt").write_text("Read first.", encoding="utf-8")
    url = web.url_for("/page")
    result = run("new", folder, "--context", tmp_path / "notes.txt", "--attach", url, code=2)
    assert f"deep-research: {url} cannot be attached: " in result.stderr
    assert "loopback address" in result.stderr and result.stderr.rstrip().endswith("Nothing was created.")
    assert web.log == []  # never asked
    assert sorted(p.name for p in folder.iterdir()) == ["deep-research.toml"]


def test_unreadable_sources_fail_before_any_fetch(run, tmp_path: Path, web: HTTPServer) -> None:
    web.expect_request("/page").respond_with_data("text", content_type="text/plain")
    big = tmp_path / "huge.log"
    with open(big, "wb") as out:
        out.truncate(50 * 1024 * 1024)  # a 50 MB context file (sparse: cheap to make)
    folder = tmp_path / "r"
    for args, said in [
        (("--context", big), f"{big} is 50 MB; files larger than 10 MB are not read. Nothing was created."),
        (("--attach", tmp_path), f"The folder {tmp_path} holds the research ({folder}): attaching it would attach"),
        (("--attach", tmp_path / "nope.pdf"), f"{tmp_path / 'nope.pdf'}: no such file."),
        (("--attach", "ftp://example.org/x"), "ftp://example.org/x cannot be attached: Only http and https"),
        (("--attach", "https://user:secret@example.org/"), "holds a user name or password"),
        (("--context-text", " \n "), "Context text 1 is empty"),
    ]:
        result = run("new", folder, "--attach", web.url_for("/page"), *args, code=2)
        assert said in result.stderr
        assert not folder.exists()
    assert web.log == []  # files are checked first: nothing went to the network


def test_continue_attaches_a_page_to_the_root_problem_in_one_step(run, research: Path, web: HTTPServer) -> None:
    web.expect_request("/blocking").respond_with_data(PAGE, content_type="text/html")
    web.expect_request("/missing").respond_with_data("gone", status=404, content_type="text/plain")
    (research / "deep-research.toml").write_text(ALLOW_LOOPBACK, encoding="utf-8")
    before = snapshot(research)
    result = run("continue", research, "--instruction", "New", "--attach", web.url_for("/blocking"),
                 "--attach", web.url_for("/missing"), code=2)
    assert f"{web.url_for('/missing')} cannot be attached: " in result.stderr and "404" in result.stderr
    assert result.stderr.rstrip().endswith("Nothing was changed.")
    assert snapshot(research) == before

    result = run("continue", research, "--context-text", "Prefer primary sources.", "--attach", web.url_for("/blocking"))
    assert "Continuing the research" in result.stdout
    page = (research / "Attachments" / "Cache blocking.md").read_text(encoding="utf-8")
    assert f'source: "{web.url_for("/blocking")}"' in page
    prompt = (research / BOOK / "prompt.md").read_text(encoding="utf-8")
    assert "Prefer primary sources." in prompt.split("# Context", 1)[1]
    assert not (research / BOOK / "pending.json").exists()
    assert os.listdir(research / "Attachments") == ["Cache blocking.md"]


def test_new_and_continue_take_folders_of_sources(run, tmp_path: Path) -> None:
    """Every text, markdown, code, HTML and PDF file below the folder, named by its path below it;
    what each became and what was skipped (and why) is printed."""
    from tests.sources.dr_sources_support import make_pdf

    papers = tmp_path / "papers"
    (papers / "2024").mkdir(parents=True)
    (papers / "2024" / "tiling.pdf").write_bytes(make_pdf(["Tiles follow the caches."], title="Tiling"))
    (papers / "reading-list.md").write_text("# Reading list\n\n- Goto and van de Geijn\n", encoding="utf-8")
    (papers / "cover.jpg").write_bytes(b"\xff\xd8\xff" + b"\0" * 32)
    folder = tmp_path / "research"
    result = run("new", folder, "--instruction", "Tiling.", "--attach", papers)
    assert (f"{papers}: 2 files attached, 1 skipped\n  attached 2024/tiling.pdf\n  attached reading-list.md\n"
            "  skipped cover.jpg: not one of the text, markdown, code, HTML and PDF files (.jpg)\n") in result.stdout
    prompt = (folder / BOOK / "prompt.md").read_text(encoding="utf-8")
    assert '<attachment name="2024/tiling.pdf">' in prompt and "Tiles follow the caches." in prompt
    assert '<attachment name="reading-list.md">\n# Reading list' in prompt

    (folder / "message.dr").write_text(DEFINE, encoding="utf-8")
    run("execute", folder / "message.dr")
    more = tmp_path / "more"
    more.mkdir()
    (more / "bench.py").write_text("print('gflops')\n", encoding="utf-8")
    result = run("continue", folder, "--attach", more)
    assert f"{more}: 1 file attached\n  attached bench.py\n" in result.stdout
    assert "print('gflops')" in (folder / "Attachments" / "bench.py.md").read_text(encoding="utf-8")
    assert run("continue", folder, "--attach", tmp_path, code=2).stderr.rstrip().endswith(
        f"The folder {tmp_path} holds the research ({folder}): attaching it would attach the research's own files. "
        "Give a folder of sources beside the research, or one inside it that holds only sources. Nothing was changed.")


def test_files_sharing_a_name_are_each_named_and_each_read(run, tmp_path: Path) -> None:
    """Two books both called print.html (as rustup ships them) were both attached as "print.html":
    the prompt showed the name twice and `read` reached only one of them."""
    for book, words in (("book", "ownership and borrowing"), ("rustc", "codegen options")):
        (tmp_path / book).mkdir()
        (tmp_path / book / "print.html").write_text(f"<h1>{book}</h1><p>All about {words}.</p>", encoding="utf-8")
    folder = tmp_path / "research"
    made = run("new", folder, "--instruction", "Borrows.", "--attach", tmp_path / "book" / "print.html",
               "--attach", tmp_path / "rustc" / "print.html", "--attach", tmp_path / "book" / "print.html")
    assert ("deep-research: note: 2 files are named print.html: each is named by as much of its path as tells them "
            "apart (book/print.html, rustc/print.html).") in made.stderr
    prompt = (folder / BOOK / "prompt.md").read_text(encoding="utf-8")
    assert prompt.count('<attachment name="book/print.html"') == 1  # the same file twice is kept once
    assert prompt.count('<attachment name="rustc/print.html"') == 1
    (folder / "message.dr").write_text(DEFINE + "\n///read rustc/print.html\n///read book/print.html#1\n", encoding="utf-8")
    reply = run("execute", folder / "message.dr").stdout
    assert "2 attachment(s) were copied" in reply
    assert 'name="rustc/print.html#1"' in reply and "All about codegen options." in reply
    assert 'name="book/print.html#1"' in reply and "All about ownership and borrowing." in reply

    # Given again later: the same text is not attached twice, whatever its name now; another text
    # under a name the research has gets a name of its own (it used to be dropped without a word).
    run("continue", folder, "--attach", tmp_path / "rustc" / "print.html")
    notes = tmp_path / "print.html"
    notes.write_text("<p>Release notes.</p>", encoding="utf-8")
    run("continue", folder, "--attach", notes)
    notes.write_text("<p>Release notes, second edition.</p>", encoding="utf-8")
    run("continue", folder, "--attach", notes)
    (folder / "message.dr").write_text("///read print.html\n///read print.html (2)\n", encoding="utf-8")
    reply = run("execute", folder / "message.dr").stdout
    assert 'name="print.html#1"' in reply and "Release notes." in reply
    assert 'name="print.html (2)#1"' in reply and "Release notes, second edition." in reply
    names = sorted(p.name for p in (folder / "Attachments").iterdir())
    assert names == ["book_print.html.md", "print.html (2).md", "print.html.md", "rustc_print.html.md"]
