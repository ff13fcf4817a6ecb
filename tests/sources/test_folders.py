"""A folder given as an attachment (`new`/`continue --attach FOLDER`, the editors' pickers): every
text, markdown, code, HTML and PDF file below it, named by its path below it; everything else
skipped with why; links out not followed; a folder too large refused after bounded work."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from deep_research.engine.settings.table import Config
from deep_research.sources import inputs as inputs_module
from deep_research.sources.inputs import MAX_FOLDER_ENTRIES, InputError, Inputs, given_timeout, prepare_sync

from dr_sources_support import ARTICLE, make_pdf


def prepare(folder: Path, research: Path, limit: int = 100, may_read=None):
    from dataclasses import replace

    config = replace(Config(), max_folder_files=limit)
    return prepare_sync(Inputs(attachments=[folder]), root=research, config=config, may_read=may_read)


@pytest.fixture
def papers(tmp_path: Path) -> Path:
    folder = tmp_path / "papers"
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "summary.md").write_text("# Summary\n\nTiles of 32 fit L1.\n", encoding="utf-8")
    (folder / "kernel.c").write_text("for (i = 0; i < n; i += 32) {}\n", encoding="utf-8")
    (folder / "tiling.pdf").write_bytes(make_pdf(["Blocked GEMM.", "Results."], title="Tiling paper"))
    (folder / "blog.html").write_text(ARTICLE, encoding="utf-8")
    (folder / "README").write_text("Papers on tiling.\n", encoding="utf-8")
    (folder / "figure.png").write_bytes(b"\x89PNG\r\n" + b"\0" * 64)
    (folder / "data.bin.txt").write_bytes(b"\0\1\2\3" * 100)  # a text name, binary bytes
    (folder / "empty.md").write_text("", encoding="utf-8")
    with open(folder / "huge.txt", "wb") as out:
        out.truncate(11 * 1024 * 1024)  # over the 10 MB limit (sparse: cheap)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (folder / "node_modules" / "x").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("not yours", encoding="utf-8")
    os.symlink(tmp_path / "secret.txt", folder / "outside.txt")
    os.symlink(folder / "notes", folder / "loop")
    os.symlink(folder / "kernel.c", folder / "same-kernel.c")  # a link that stays inside: read
    os.mkfifo(folder / "pipe.md")
    return folder


def test_a_folder_brings_its_documents_named_by_their_paths_and_says_what_it_skipped(papers: Path,
                                                                                     tmp_path: Path) -> None:
    prepared = prepare(papers, tmp_path / "research")
    names = [a.name for a in prepared.attachments]
    assert names == ["README", "blog.html", "kernel.c", "notes/summary.md", "same-kernel.c", "tiling.pdf"]
    by_name = {a.name: a.content for a in prepared.attachments}
    assert by_name["notes/summary.md"].startswith("# Summary") and "Tiles of 32" in by_name["notes/summary.md"]
    assert "Blocked GEMM." in by_name["tiling.pdf"] and "Results." in by_name["tiling.pdf"]
    assert "Choosing the tile size" in by_name["blog.html"] and "<article>" not in by_name["blog.html"]
    kinds = {a.name: (a.content_type, a.sha256, a.source) for a in prepared.attachments}  # as ///attach_file keeps them
    digest = hashlib.sha256((papers / "tiling.pdf").read_bytes()).hexdigest()
    assert kinds["tiling.pdf"] == ("application/pdf", digest, "") and kinds["kernel.c"][0].startswith("text/")
    [folder] = prepared.folders
    assert folder.attached == names
    skipped = dict(folder.skipped)
    assert skipped == {
        ".git/": "a folder that is hidden: not looked into",
        "data.bin.txt": "it is a binary file; only text, code, markdown, HTML and PDF files are attached.",
        "empty.md": "no readable text",
        "figure.png": "not one of the text, markdown, code, HTML and PDF files (.png)",
        "huge.txt": "it is 11 MB; files larger than 10 MB are not read.",
        "loop/": "a folder that is a link: not followed",
        "node_modules/": "a folder of generated files: not looked into",
        "outside.txt": "a link out of the folder: not followed",
        "pipe.md": "not a regular file (a pipe, a device or a socket)",
    }
    lines = folder.lines()
    assert lines[0] == f"{papers}: 6 files attached, 9 skipped"
    assert "  attached notes/summary.md" in lines and "  skipped figure.png: not one of the text, markdown, code, " \
                                                      "HTML and PDF files (.png)" in lines
    assert folder.summary(shown=2).startswith(f"{papers}: 6 files attached; skipped .git/ (a folder that is hidden: "
                                              "not looked into); data.bin.txt (")
    assert folder.summary(shown=2).endswith("; and 7 more.")


def test_a_folder_that_is_the_research_or_holds_it_is_refused(tmp_path: Path) -> None:
    research = tmp_path / "work" / "research"
    research.mkdir(parents=True)
    with pytest.raises(InputError, match="is the research itself: attaching it would attach the research's own"):
        prepare(research, research)
    with pytest.raises(InputError, match=f"holds the research \\({research}\\)"):
        prepare(tmp_path / "work", research)
    with pytest.raises(InputError, match="holds the research"):
        prepare(tmp_path / "work" / ".." / "work", research / "." )  # however it is written


def test_more_files_than_the_limit_are_refused_before_any_is_read(papers: Path, tmp_path: Path, monkeypatch) -> None:
    read = []
    monkeypatch.setattr(inputs_module, "_read_below", lambda *args: read.append(args))
    with pytest.raises(InputError) as caught:
        prepare(papers, tmp_path / "research", limit=3)
    assert caught.value.message == (
        f"The folder {papers} holds more than 3 text, markdown, code, HTML and PDF files (max_folder_files = 3 in "
        "deep-research.toml, or the setting deepResearch.maxFolderFiles): nothing was attached. Give a smaller "
        "folder, or raise the limit.")
    assert read == []


def test_a_folder_of_100000_files_is_refused_after_bounded_work(tmp_path: Path, monkeypatch) -> None:
    """Not every entry is listed, none is stat'ed or read: the listing stops past MAX_FOLDER_ENTRIES.
    (The 100,000 entries are a lazy listing: making them on disk takes half a minute here.)"""
    folder = tmp_path / "huge"
    folder.mkdir()
    listed = []
    real_scandir = os.scandir

    class Entry:
        def __init__(self, number: int) -> None:
            self.name, self.path = f"f{number:06d}.md", str(folder / f"f{number:06d}.md")

        def __getattr__(self, name):  # is_file, stat, is_symlink …: looking closer is not allowed here
            raise AssertionError(f"{name} was asked of an entry before the refusal")

    class Listing:
        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            pass

        def __iter__(self):
            for number in range(100_000):
                listed.append(number)
                yield Entry(number)

    monkeypatch.setattr(os, "scandir", lambda path: Listing() if Path(path) == folder else real_scandir(path))
    with pytest.raises(InputError, match=f"holds more than {MAX_FOLDER_ENTRIES:,} files and folders: too many"):
        prepare(folder, tmp_path / "research", limit=10_000)
    assert len(listed) == MAX_FOLDER_ENTRIES + 1


def test_two_folders_with_the_same_names_and_a_folder_outside_the_editors_reach(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "notes.md").write_text(f"From {name}.", encoding="utf-8")
    prepared = prepare_sync(Inputs(attachments=[tmp_path / "a", tmp_path / "b"]), root=tmp_path / "r", config=Config())
    assert [(a.name, a.content) for a in prepared.attachments] == [("notes.md", "From a."), ("notes.md (2)", "From b.")]
    with pytest.raises(InputError, match="outside the workspace"):
        prepare(tmp_path / "a", tmp_path / "r", may_read=lambda real: f"{real} is outside the workspace")


def test_a_file_given_has_more_time_to_be_read_the_longer_it_is() -> None:
    """A page's 20 s for a small file; a book of 1.9 MB (which took over 20 s on a loaded machine)
    about 48 s; a hostile 10 MB file no more than two minutes; a page limit set higher is kept."""
    assert given_timeout(20.0, 10_000) == pytest.approx(20.1, abs=0.1)
    assert 45 < given_timeout(20.0, 1_900_000) < 50
    assert given_timeout(20.0, 10 * 1024 * 1024) == 120.0
    assert given_timeout(300.0, 10 * 1024 * 1024) == 300.0
