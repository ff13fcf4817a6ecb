"""A research from someone else on the command line (issue 25): with a link out of the research
in every position the engine reads (and FIFOs among its files), no command shows a file from
outside it, writes one into it, sends one to a model or blocks; `check` names each link."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.hostile import OUT_LINKS, SENTINEL, build, leaked, leaks_in_files, make_outside, plant
from tests.scripted_model import Say, ScriptedModel

pytestmark = pytest.mark.timeout(300)

ALL_OUT = sorted(p for p in OUT_LINKS if p not in ("undo record", "state", "definition"))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("hostile-cli") / "research")


@pytest.fixture
def hostile(template: Path, tmp_path: Path) -> Path:
    """The research with every link out planted (but those that stop it running: the state and
    the root's definition, which have tests of their own), and FIFOs."""
    outside = make_outside(tmp_path / "outside")
    root = tmp_path / "research"
    shutil.copytree(template, root, symlinks=True)
    for position in ALL_OUT + ["fifo attachment", "fifo report", "device attachment"]:
        plant(root, outside, position)
    (root / "next.dr").write_text("", encoding="utf-8")
    return root


def test_no_command_reads_outside(run, hostile: Path, tmp_path: Path) -> None:
    outputs = {}
    outputs["prompt"] = run("prompt", hostile)
    outputs["tree"] = run("tree", hostile)
    outputs["tree --stats"] = run("tree", hostile, "--stats")
    outputs["check"] = run("check", hostile, code=1)
    outputs["export"] = run("export", hostile, "-o", tmp_path / "dossier.html")
    (hostile / "next.dr").write_text("///add_criteria Cites a benchmark\n", encoding="utf-8")
    outputs["execute"] = run("execute", hostile / "next.dr", code=None)
    outputs["undo"] = run("undo", hostile, code=None)
    outputs["message document"] = run("execute", hostile / "message.dr", code=2)
    outputs["repl"] = run("repl", hostile, input="", code=None)
    leaks = [name for name, result in outputs.items() if leaked(result.stdout + result.stderr)]
    assert leaks == []
    assert not leaked((tmp_path / "dossier.html").read_text(encoding="utf-8"))
    assert leaks_in_files(hostile) == []
    assert "is a link to a file outside its folder" in outputs["message document"].stderr
    assert "Tiles" in outputs["tree"].stdout and "Linked" not in outputs["tree"].stdout


def test_check_names_every_link_out(run, hostile: Path) -> None:
    result = run("check", hostile, code=1)
    flagged = {line.split(":", 1)[0] for line in result.stdout.splitlines() if "outside the research" in line}
    expected = {str(Path(str(hostile)) / rel) for rel in (
        "Attachments/Leak.md", "Subproblems/A/Attachments", "Subproblems/Linked", "Subproblems/B/Subproblems",
        "Subproblems/B/Problem Definition.md", "Subproblems/A/Criteria of Definition of Done.md",
        "Subproblems/A/Report 3 Pager.md", "Subproblems/A/Attachments/Leak.md", "Report 3 Pager.md",
        "Breakdown Structure.md", "Criteria of Definition of Done.md", "deep-research.toml", "message.dr",
        ".deep-research/instruction.md", ".deep-research/context", ".deep-research/sessions/0002.jsonl",
        ".deep-research/journal.jsonl", "Attachments/Zero.md",
    )}
    # The child attachment sits in the linked Attachments folder: the folder is what is reported.
    expected.discard(str(hostile / "Subproblems/A/Attachments/Leak.md"))
    assert flagged == expected
    pipes = [line for line in result.stdout.splitlines() if "not a regular file" in line]
    assert len(pipes) == 2, result.stdout


def test_run_sends_nothing_from_outside_to_the_model(hostile: Path, tmp_path: Path) -> None:
    """The autopilot's prompt goes to a model provider: the leak that matters most."""
    from tests.autopilot.test_run_cli import deep_research

    # The message document links out; the run must not take its text as a waiting message.
    with ScriptedModel([Say("///add_criteria Cites a benchmark\n"), Say("///focus_down A\n")]) as model:
        result = deep_research("run", hostile, "--base-url", model.base_url, "--max-rounds", "2", "--grammar", "off")
        sent = json.dumps(model.requests)
    assert SENTINEL not in sent and model.requests, result.stdout + result.stderr
    assert not leaked(result.stdout + result.stderr)
    assert leaks_in_files(hostile) == []


@pytest.mark.parametrize("position", ["state", "definition", "undo record"])
def test_the_positions_that_stop_a_research(run, template: Path, tmp_path: Path, position: str) -> None:
    outside = make_outside(tmp_path / "outside")
    root = tmp_path / "research"
    shutil.copytree(template, root, symlinks=True)
    plant(root, outside, position)
    results = [run("prompt", root, code=None), run("tree", root, code=None), run("check", root, code=None),
               run("undo", root, code=None)]
    assert not [r.args for r in results if leaked(r.stdout + r.stderr)]
    assert leaks_in_files(root) == []
