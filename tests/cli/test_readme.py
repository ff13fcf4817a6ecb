"""The README's quick start runs as written (issue 26): every `sh` block of its "Quick start"
section, in order, in an empty folder, with `deep-research` on the PATH, by a real shell
that stops at the first failing command. The one thing changed is where a URL points: a
page on loopback takes its place (and the research allows loopback), so the test never
leaves the machine. If this test fails, the README misleads a newcomer: fix the README."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from dr_cli_support import REPO, cli_env

from tests.pages import CACHE_BLOCKING

URL = re.compile(r"https://[^\s\"')]+")


def quick_start_blocks() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```sh\n(.*?)^```$", section, flags=re.S | re.M)


@pytest.mark.skipif(shutil.which("bash") is None, reason="the README's blocks are for a POSIX shell")
def test_every_shell_block_of_the_quick_start_runs_as_it_stands(tmp_path: Path, web: HTTPServer) -> None:
    blocks = quick_start_blocks()
    assert len(blocks) >= 4, "the quick start has its shell blocks"
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    command = bin_folder / "deep-research"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m deep_research "$@"\n', encoding="utf-8")
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    work = tmp_path / "work"
    (work / "my-research").mkdir(parents=True)  # a folder holding only its settings can be made a research
    (work / "my-research" / "deep-research.toml").write_text("[fetch]\nallow_private_networks = true\n",
                                                             encoding="utf-8")
    urls = sorted({url for block in blocks for url in URL.findall(block)})
    for url in urls:
        web.expect_request(re.sub(r"^https://[^/]+", "", url)).respond_with_data(
            CACHE_BLOCKING, content_type="text/html")
    env = {**cli_env(), "PATH": f"{bin_folder}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path)}
    outputs = []
    for block in blocks:
        for url in urls:
            block = block.replace(url, web.url_for(re.sub(r"^https://[^/]+", "", url)))
        result = subprocess.run(["bash", "-e", "-c", block], cwd=work, env=env, capture_output=True, text=True,
                                encoding="utf-8", timeout=180)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (block, result.stdout, result.stderr)
        assert "Broken pipe" not in result.stderr  # `commands | head`: cut short quietly
        outputs.append(result.stdout)
    research = work / "my-research"
    printed = "".join(outputs)
    # What a newcomer sees along the way, and what is left on disk.
    assert "Created a research in" in printed
    assert printed.count("No errors.") >= 4 and "Warning" not in printed  # every message runs whole and clean
    assert "Summarized problem definition: the clearest tiled matrix multiplication in C for teaching." in printed
    assert (research / "Attachments").is_dir() and any((research / "Attachments").iterdir())
    assert (research / "dossier.html").is_file()
    compiled = (work / "report.md").read_text(encoding="utf-8")
    assert "## References" in compiled and "in cache [\\[1, part 1\\]](#ref-1)" in compiled
    assert "Quotes: 1 of 1 resolved citations carry one (100%); of those, 1 are found" in compiled
    assert (work / "report.html").read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert "Focus: the root problem" in printed  # the piped REPL's :status
    assert '<passage part="paper.md#1" rank="1">' in printed and '<part name="paper.md#1" of="1">' in printed
    assert "Also cover GPUs" in (research / ".deep-research" / "instruction.md").read_text(encoding="utf-8")
    if urls:
        assert len(web.log) == len(urls), "each page was fetched, from loopback"
