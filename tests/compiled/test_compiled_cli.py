"""`deep-research compile DIR [-o PATH] [--format F]` from the shell: markdown to standard output
by default, the format from the file name, a sentence for every refusal and nothing written;
two compiles at once while messages run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from deep_research.engine.research import Research

from dr_compiled_support import TITLE, sample

SERVER = Path(__file__).resolve().parents[2] / "server"


def run(*args: object, code: int | None = 0, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SERVER), "PYTHONIOENCODING": "utf-8"}
    env.pop("DEEP_RESEARCH_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "deep_research", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    assert code is None or done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return done


@pytest.fixture(scope="module")
def research(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample(tmp_path_factory.mktemp("cli") / "research").root


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
            and p.name != "lock"}


def test_markdown_goes_to_standard_output_and_nothing_is_written(research: Path) -> None:
    before = files(research)
    done = run("compile", research)
    assert done.stdout.startswith(f"# {TITLE}\n") and "## Citation check" in done.stdout
    assert files(research) == before


def test_the_format_comes_from_the_file_name_or_is_named(research: Path, tmp_path: Path) -> None:
    done = run("compile", research, "-o", tmp_path / "out.html")
    assert f"Wrote {tmp_path / 'out.html'} (html, 5 problems, 3 references, " in done.stdout
    assert "The Citation check found 1 error: see its section." in done.stdout
    assert (tmp_path / "out.html").read_text(encoding="utf-8").rstrip().endswith("</html>")
    run("compile", research, "--format", "bibtex", "-o", tmp_path / "refs.txt")
    assert (tmp_path / "refs.txt").read_text(encoding="utf-8").count("@misc{") == 3


REFUSED = {
    "unknown format": (("--format", "rtf"), "Unknown format “rtf”: choose one of md, html, docx, odt, pdf, csl-json, bibtex"),
    "no format in the name": (("-o", "{tmp}/out.xyz"), "out.xyz does not say a format by its extension"),
    "no such folder": (("-o", "{tmp}/nowhere/out.md"), "nowhere: no such folder"),
}


@pytest.mark.parametrize("args, said", REFUSED.values(), ids=REFUSED.keys())
def test_bad_requests_get_a_sentence_and_write_nothing(research: Path, tmp_path: Path, args, said: str) -> None:
    before = files(tmp_path)
    done = run("compile", research, *(a.format(tmp=tmp_path) for a in args), code=2)
    assert said in done.stderr and done.stderr.count("\n") == 1
    assert files(tmp_path) == before


def test_someones_file_is_not_replaced_and_ours_is(tmp_path: Path) -> None:
    research = sample(tmp_path / "r").root
    (research / "report.html").write_text("<p>my own notes</p>", encoding="utf-8")
    done = run("compile", research, "--format", "html", code=2)
    assert "report.html exists and was not written by a compile; it was left alone" in done.stderr
    assert (research / "report.html").read_text(encoding="utf-8") == "<p>my own notes</p>"
    (research / "report.html").unlink()
    run("compile", research, "--format", "html")
    run("compile", research, "--format", "html")  # its own file: replaced
    assert TITLE in (research / "report.html").read_text(encoding="utf-8")


def test_not_a_research_and_no_problem_yet(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    assert "is not a research" in run("compile", tmp_path / "plain", code=2).stderr
    Research.create(tmp_path / "empty", "")
    assert "has no problem defined yet: there is nothing to compile" in run("compile", tmp_path / "empty", code=2).stderr


def test_two_compiles_at_once_while_messages_run(tmp_path: Path) -> None:
    root = sample(tmp_path / "r").root
    research = Research.open(root)
    stop = threading.Event()

    def messages() -> None:
        number = 0
        while not stop.is_set() and number < 200:
            number += 1
            research.execute(f"///add_criteria Criterion added meanwhile {number}\n")

    writer = threading.Thread(target=messages)
    writer.start()
    try:
        outputs = [tmp_path / "a.md", tmp_path / "b.html"]
        procs = [subprocess.Popen([sys.executable, "-m", "deep_research", "compile", str(root), "-o", str(out)],
                                  env={**os.environ, "PYTHONPATH": str(SERVER)}, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for out in outputs]
        results = [p.communicate(timeout=120) for p in procs]
    finally:
        stop.set()
        writer.join()
    for proc, (out, err) in zip(procs, results):
        assert proc.returncode == 0 and "Traceback" not in err, err
    markdown = outputs[0].read_text(encoding="utf-8")
    assert "## Citation check" in markdown and "Criterion added meanwhile" in markdown, "whole, and of a moment"
    assert outputs[1].read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert not list(root.rglob("*.tmp")) and run("check", root, code=None).returncode in (0, 1)


def test_a_file_that_only_mentions_deep_research_is_not_taken_for_a_compiled_one(tmp_path: Path) -> None:
    research = sample(tmp_path / "r").root
    (research / "report.md").write_text("# My notes on deep-research\n", encoding="utf-8")
    from deep_research.app.compile import Refused, choose_format, compile_report

    with pytest.raises(Refused, match="report.md exists and was not written by a compile"):
        compile_report(research, choose_format("md"))
    assert (research / "report.md").read_text(encoding="utf-8") == "# My notes on deep-research\n"
