"""Reading workspace files for attach_file: the root guard against hostile paths, special
files that must never be opened for reading, the size cap, the accepted types, and their text
extracted within a page's limit."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from deep_research.engine.execution.evidence import MAX_FILE_BYTES, Failed, Found, Need, NeedKind
from deep_research.engine.settings.table import Config
from deep_research.sources import SourceError, files
from deep_research.sources.fetch import Limits
from deep_research.sources.files import read_file, text_of
from deep_research.sources.gather import gather
from deep_research.sources.reader import Readers

from dr_sources_support import ARTICLE, make_pdf


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "research"
    (folder / "notes").mkdir(parents=True)
    return folder


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text("the neighbour's secret", encoding="utf-8")
    return path


def attached(target: str, root: Path, roots: tuple[Path, ...] = (), max_bytes: int = MAX_FILE_BYTES) -> Found:
    return asyncio.run(text_of(read_file(target, root, roots, max_bytes), timeout=20.0))


def refused(target: str | Path, root: Path, roots: tuple[Path, ...] = ()) -> str:
    with pytest.raises(SourceError) as caught:
        attached(str(target), root, roots)
    return caught.value.message


def test_text_and_code_are_read_as_they_are(root: Path) -> None:
    (root / "notes" / "kernel.c").write_text("int main(void) { return 0; }\n", encoding="utf-8")
    found = attached("notes/kernel.c", root)
    assert (found.title, found.text, found.source) == ("kernel.c", "int main(void) { return 0; }\n", "notes/kernel.c")
    assert found.content_type == "text/x-csrc" and len(found.sha256) == 64


def test_pdf_html_and_legacy_encodings(root: Path) -> None:
    (root / "paper.pdf").write_bytes(make_pdf(["Tiles fit the cache."], title="A paper"))
    (root / "page.html").write_text(ARTICLE, encoding="utf-8")
    (root / "latin.txt").write_bytes("Café déjà vu".encode("cp1252"))
    (root / "wide.txt").write_bytes("Ünïcödé".encode("utf-16"))
    assert attached("paper.pdf", root).text == "[Page 1]\nTiles fit the cache."
    assert attached("paper.pdf", root).title == "paper.pdf"  # files are named after themselves
    html = attached("page.html", root).text
    assert html.startswith("# Tiling for caches") and "Log in" not in html
    assert attached("latin.txt", root).text == "Café déjà vu"
    assert attached("wide.txt", root).text == "Ünïcödé"


def test_binary_files_are_refused(root: Path) -> None:
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    assert refused("image.png", root) == (
        "image.png is a binary file; only text, code, markdown, HTML and PDF files are attached.")


@pytest.mark.parametrize("path", ["../secret.txt", "notes/../../secret.txt", "{secret}", "escape", "escape-dir/secret.txt"])
def test_paths_that_leave_the_research_are_refused(root: Path, secret: Path, path: str) -> None:
    (root / "escape").symlink_to(secret)
    (root / "escape-dir").symlink_to(secret.parent, target_is_directory=True)
    message = refused(path.format(secret=secret), root)
    assert "is outside the research folder; files elsewhere are never read" in message


def test_symlinks_inside_the_research_are_followed(root: Path) -> None:
    (root / "notes" / "real.md").write_text("# Real\n", encoding="utf-8")
    (root / "alias.md").symlink_to(root / "notes" / "real.md")
    found = attached("alias.md", root)
    assert (found.text, found.source) == ("# Real\n", "notes/real.md")


def test_allowed_roots_open_other_folders(root: Path, secret: Path) -> None:
    found = attached(str(secret), root, (secret.parent,))
    assert (found.text, found.source) == ("the neighbour's secret", str(secret))


def test_devices_fifos_and_folders_are_refused_without_opening(root: Path) -> None:
    assert "outside the research folder" in refused("/dev/zero", root)
    assert refused("/dev/zero", root, (Path("/dev"),)) == '"/dev/zero" is a character device, not a regular file: only regular files are attached.'
    os.mkfifo(root / "pipe")  # nobody writes to it: opening it for reading would block forever
    assert refused("pipe", root) == '"pipe" is a FIFO (named pipe), not a regular file: only regular files are attached.'
    assert refused("notes", root) == '"notes" is a folder: attach the files in it one by one.'
    assert refused("nothing.txt", root).startswith('There is no file "nothing.txt"')


def test_a_fifo_swapped_in_after_the_check_is_not_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check and the read are apart in time: if a FIFO replaces the checked file, the read
    opens it without blocking and refuses it from fstat."""
    os.mkfifo(root / "pipe")
    monkeypatch.setattr(files, "locate_file", lambda *args: root / "pipe")
    assert "changed while it was being opened" in refused("notes.txt", root)


def test_a_symlink_swapped_in_after_the_check_is_not_followed(root: Path, secret: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "link").symlink_to(secret)
    monkeypatch.setattr(files, "locate_file", lambda *args: root / "link")
    assert refused("notes.txt", root).startswith("link cannot be opened")


def test_files_over_the_cap_are_refused(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open(root / "big.txt", "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    assert "larger than 10 MB are not attached" in refused("big.txt", root)
    (root / "small.txt").write_bytes(b"a" * 2048)
    assert refused_with_cap(root / "small.txt", root, 1024) == "small.txt is 2 KB; files larger than 1 KB are not attached."


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux's /proc")
def test_reading_stops_at_the_cap_when_the_size_lies() -> None:
    """procfs files say they are empty; reading still stops at the cap."""
    message = refused_with_cap(Path("/proc/self/status"), Path("/proc"), 100)
    assert message == "status holds more than 100 bytes (more than its size said); nothing was attached."


def refused_with_cap(path: Path, root: Path, cap: int) -> str:
    with pytest.raises(SourceError) as caught:
        attached(str(path), root, (), max_bytes=cap)
    return caught.value.message


def test_a_file_too_slow_to_read_is_reported_and_its_reading_stopped(root: Path) -> None:
    """A hostile HTML or PDF file cannot hold a message longer than a hostile page: its text is
    read in a worker process, killed at the pages' limit (trafilatura took 15-45 s on such 10 MB
    pages; the reading here never ends)."""
    (root / "page.html").write_text(ARTICLE, encoding="utf-8")
    (root / "notes.md").write_text("# Notes\n", encoding="utf-8")  # text is decoded here, not in a worker
    readers = Readers(target="dr_sources_support:read_forever")
    needs = [Need(NeedKind.FILE, "page.html"), Need(NeedKind.FILE, "notes.md")]
    try:
        evidence = asyncio.run(gather(needs, root=root, config=Config(), limits=Limits(extract_timeout=0.5),
                                      readers=readers))
        slow, text = evidence.results[needs[0]], evidence.results[needs[1]]
        assert isinstance(slow, Failed) and slow.reason == (
            f"Reading the text of page.html ({len(ARTICLE.encode()):,} bytes of html) took longer than 0.5 seconds; "
            "nothing was attached.")
        assert isinstance(text, Found) and text.text == "# Notes\n"
        assert readers.processes() == [] and [p.returncode for p in readers.started] == [-signal.SIGKILL]
    finally:
        readers.close()
