"""Parallel research on the command line (SPEC §12): `researchers`, `prompt --researcher`,
`execute` of any researcher's document, and researchers executing truly at once from
separate processes: each message applied exactly once, the journal complete, `check` clean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dr_cli_support import BOOK, DEFINE, REPORT, cli_env
from tests.roomy import roomy

PARTS = [f"Part {n}" for n in range(7)]


def delegated(run, folder: Path, parts: list[str]) -> Path:
    run("new", folder)
    roomy(folder)  # up to seven subproblems, and many criteria each
    (folder / "message.dr").write_text(DEFINE, encoding="utf-8")
    run("execute", folder / "message.dr")
    message = "".join(f"<<< add_subproblem\n///title\n{p}\n///content\nWhat {p} must answer.\n>>>\n" for p in parts)
    message += "".join(f"///delegate {p}\n" for p in parts)
    (folder / "message.dr").write_text(message, encoding="utf-8")
    run("execute", folder / "message.dr")
    return folder


def test_researchers_lists_every_working_researcher(run, tmp_path: Path) -> None:
    folder = delegated(run, tmp_path / "research", ["Cache sizes", "Tiles"])
    listed = json.loads(run("researchers", folder, "--json").stdout)
    assert listed == [
        {"name": "main", "document": str(folder / "message.dr"), "focus": "", "state": "waiting"},
        {"name": "Cache sizes", "document": str(folder / "Subproblems" / "Cache sizes" / "message.dr"),
         "focus": "Cache sizes", "state": "working"},
        {"name": "Tiles", "document": str(folder / "Subproblems" / "Tiles" / "message.dr"), "focus": "Tiles",
         "state": "working"},
    ]
    text = run("researchers", folder).stdout
    assert "main: waiting" in text and "Cache sizes: working" in text


def test_a_delegated_researchers_document_executes_and_its_prompt_prints(run, tmp_path: Path) -> None:
    folder = delegated(run, tmp_path / "research", ["Cache sizes"])
    document = folder / "Subproblems" / "Cache sizes" / "message.dr"
    document.write_text("///add_criteria L1 and L2 sizes are known\n", encoding="utf-8")
    result = run("execute", document)
    assert 'Added criterion 1 to "Cache sizes"' in result.stdout and document.read_text() == ""
    prompt = run("prompt", folder, "--researcher", "cache  SIZES").stdout
    assert "# Current Problem: Cache sizes" in prompt and "L1 and L2 sizes are known" in prompt
    missing = run("prompt", folder, "--researcher", "Nobody", code=2)
    assert 'No researcher called "Nobody"' in missing.stderr and '"Cache sizes"' in missing.stderr
    document.write_text(REPORT + "///focus_up\n", encoding="utf-8")
    assert "your part of the research is finished" in run("execute", document).stdout
    document.write_text("///add_criteria too late\n", encoding="utf-8")
    late = run("execute", document, code=2)
    assert "No researcher works from" in late.stderr and document.read_text() == "///add_criteria too late\n"
    assert "#### Cache sizes (done)" in run("prompt", folder).stdout


# -- truly at once ---------------------------------------------------------------------------------

WORKER = r"""
import sys
from pathlib import Path
from deep_research.cli import main

document, count, tag = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sys.stdin.readline()  # the start signal: every worker is running and waiting
for n in range(count):
    document.write_text(f"///add_criteria {tag} criterion {n}\n", encoding="utf-8")
    code = main(["execute", "--quiet", str(document)])
    if code != 0:
        sys.exit(f"message {n} of {tag} exited {code}")
"""


def start(document: Path, count: int, tag: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WORKER, str(document), str(count), tag], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env(), text=True)


@pytest.mark.parametrize("count", [5])
def test_eight_researchers_execute_at_once_each_message_exactly_once(run, tmp_path: Path, count: int) -> None:
    folder = delegated(run, tmp_path / "research", PARTS)
    documents = {"main": folder / "message.dr", **{p: folder / "Subproblems" / p / "message.dr" for p in PARTS}}
    workers = [start(document, count, name.replace(" ", "-")) for name, document in documents.items()]
    for worker in workers:  # all started; now let them go together
        worker.stdin.write("go\n")
        worker.stdin.flush()
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
    journal = [json.loads(line) for line in (folder / BOOK / "journal.jsonl").read_text().splitlines()]
    added = [(r["researcher"], r["arguments"]["criteria"]) for r in journal if r.get("command") == "add_criteria"]
    expected = [(name, f"{name.replace(' ', '-')} criterion {n}") for name in documents for n in range(count)]
    assert sorted(added) == sorted(expected)  # each exactly once
    assert len({r["message"] for r in journal if r.get("command") == "add_criteria"}) == len(expected)
    for name in PARTS:
        criteria = (folder / "Subproblems" / name / "Criteria of Definition of Done.md").read_text()
        assert all(f"criterion {n}" in criteria for n in range(count)) and criteria.count("criterion") == count
    state = json.loads((folder / BOOK / "state.json").read_text())
    assert state["messages"] == 2 + len(expected)
    assert len({seat["session"] for seat in state["researchers"]} | {state["session"]}) == len(documents)
    run("check", folder)  # exit 0: nothing found


def test_two_processes_executing_one_document_at_once_run_it_once(run, tmp_path: Path) -> None:
    folder = delegated(run, tmp_path / "research", ["Cache sizes"])
    document = folder / "Subproblems" / "Cache sizes" / "message.dr"
    text = "///add_criteria Written once, executed twice at once\n"
    document.write_text(text, encoding="utf-8")
    script = ("import sys\nfrom deep_research.cli import main\nsys.stdin.readline()\n"
              f"sys.exit(main(['execute', {str(document)!r}]))\n")
    workers = [subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=cli_env(), text=True) for _ in range(2)]
    for worker in workers:
        worker.stdin.write("go\n")
        worker.stdin.flush()
    outputs = [worker.communicate(timeout=120)[0] for worker in workers]
    assert all(worker.returncode == 0 for worker in workers)
    criteria = (folder / "Subproblems" / "Cache sizes" / "Criteria of Definition of Done.md").read_text()
    assert criteria.count("Written once, executed twice at once") == 1
    assert sum("Added criterion 1" in out for out in outputs) == 1
