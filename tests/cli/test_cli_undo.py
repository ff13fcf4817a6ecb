"""`deep-research undo DIR` from the shell, and killed with SIGKILL part-way: like an
execution, the research is then either entirely before the undo or entirely after it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from deep_research.engine.research import Research

from dr_cli_support import BOOK, DEFINE, cli_command, cli_env
from tests.roomy import roomy
from test_cli_kill import ATTACHMENTS, SUBPROBLEMS, count, killed_at_each_point, large_message, size, snapshot


def test_undo_from_the_command_line(run, research: Path) -> None:
    prompt = (research / BOOK / "prompt.md").read_bytes()
    tree = (research / "Criteria of Definition of Done.md").read_bytes()
    (research / "message.dr").write_text("///add_criteria Third\n", encoding="utf-8")
    run("execute", research / "message.dr")
    done = run("undo", research)
    assert "Undid message 3" in done.stdout and "The message is back in" in done.stdout
    assert (research / "message.dr").read_text(encoding="utf-8") == "///add_criteria Third\n"
    assert (research / "Criteria of Definition of Done.md").read_bytes() == tree
    assert (research / BOOK / "prompt.md").read_bytes() == prompt
    tree_text = run("tree", research).stdout
    assert "[0/2]" in tree_text
    # Again: message 2 (the criteria), then 1 (the definition), then nothing.
    (research / "message.dr").write_text("", encoding="utf-8")
    assert "Undid message 2" in run("undo", research).stdout
    (research / "message.dr").write_text("", encoding="utf-8")
    assert "no problem is defined" in run("undo", research).stdout
    (research / "message.dr").write_text("", encoding="utf-8")
    nothing = run("undo", research, code=1)
    assert "Nothing to undo" in nothing.stderr


def test_undo_names_the_message_and_says_when_the_document_holds_one_never_executed(run, research: Path) -> None:
    """E.g. `run` stopped for approval: its reply waits in message.dr, never executed. Undo takes
    back the last executed message and says so, keeping the waiting one where it is."""
    (research / "message.dr").write_text("Cheap first.\n///add_criteria Third\n", encoding="utf-8")
    run("execute", research / "message.dr")
    waiting = "<<< add_subproblem\n///title\nL1\n///content\nHow big?\n>>>\n"
    (research / "message.dr").write_text(waiting, encoding="utf-8")
    done = run("undo", research).stdout
    assert done.startswith("Undid message 3 (with `add_criteria`, which begins “Cheap first.”), the last message "
                           "that was executed: 1 file(s) of the tree restored; the focus is on “Tiled matrix "
                           "multiplication”."), done
    assert (f"{research / 'message.dr'} holds another message, never executed (undo takes back only executed "
            "messages), so it was left as it is") in done
    assert "///add_criteria Third" in done  # the undone message, shown since it could not go back
    assert (research / "message.dr").read_text(encoding="utf-8") == waiting


def test_undo_refuses_over_a_hand_edit_and_names_the_file(run, research: Path) -> None:
    (research / "message.dr").write_text("///add_criteria Third\n", encoding="utf-8")
    run("execute", research / "message.dr")
    criteria = research / "Criteria of Definition of Done.md"
    criteria.write_text(criteria.read_text(encoding="utf-8").replace("[ ] 1.", "[x] 1."), encoding="utf-8")
    refused = run("undo", research, code=1)
    assert str(criteria.resolve()) in refused.stderr and "by hand" in refused.stderr
    assert "[x] 1." in criteria.read_text(encoding="utf-8")


def test_undo_of_something_that_is_not_a_research(run, tmp_path: Path) -> None:
    assert "no such folder" in run("undo", tmp_path / "missing", code=2).stderr
    assert "is not a research" in run("undo", tmp_path, code=2).stderr


# -- SIGKILL during an undo -------------------------------------------------------------------


@pytest.fixture(scope="module")
def undo_references(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A research right after the large message (60 subproblems, 60 attachments); its
    snapshots before and after undoing it."""
    base = tmp_path_factory.mktemp("undo-kill") / "base"
    research = Research.create(base, "Cover everything.")
    roomy(base)  # 60 subproblems in one message
    research.execute(DEFINE)
    (base / "message.dr").write_text(large_message(), encoding="utf-8")
    done = subprocess.run(cli_command("execute", base / "message.dr"), capture_output=True, text=True,
                          env=cli_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    before = snapshot(base)
    reference = base.parent / "after"
    shutil.copytree(base, reference)
    undone = subprocess.run(cli_command("undo", reference), capture_output=True, text=True, env=cli_env(), timeout=120)
    assert undone.returncode == 0, undone.stderr
    after = snapshot(reference)
    assert len(before) >= len(after) + SUBPROBLEMS * 3 + ATTACHMENTS
    return base, before, after


KILL_POINTS = {
    "at once": lambda f: True,
    "when the pending file appears": lambda f: (f / BOOK / "pending.json").exists(),
    "after a third of the subproblems": lambda f: count(f / "Subproblems") <= SUBPROBLEMS * 2 // 3,
    "after most subproblems": lambda f: count(f / "Subproblems") <= 5,
    "after most attachments": lambda f: count(f / "Attachments") <= 3,
    "when the journal grows": lambda f: size(f / BOOK / "journal.jsonl") > f.journal_size,
}


def test_sigkill_during_undo_leaves_the_research_before_or_after(undo_references, tmp_path: Path) -> None:
    base, before, after = undo_references
    print(killed_at_each_point(base, before, after, tmp_path, KILL_POINTS, "undo"))
