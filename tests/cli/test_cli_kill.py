"""Kill `deep-research execute` with SIGKILL part-way through a large message, at several
points, and check that the research, once opened again (Research.open recovers), is
either entirely as before the message or entirely as after it, with a whole journal.

No sleeps: the test polls the filesystem for the progress of the commit (the pending
file, the number of subproblem folders and attachments written, the journal growing)
and kills the process the moment it sees it. The two references are made by running
the same message uninterrupted in a copy of the folder (after) and by not running it
(before)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from deep_research.engine.research import Research
from deep_research.engine.retrieval.layout_store import FOLDER as LAYOUTS

from tests.roomy import roomy

from dr_cli_support import cli_command, cli_env

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

BOOK = ".deep-research"
SUBPROBLEMS = 60
ATTACHMENTS = 60
TMP_MARK = ".tmp-dr-"


def large_message() -> str:
    parts = ["Planning the breakdown. Many parts follow.\n", "///add_criteria Every part is covered\n",
             "///mark_criteria_as_done 1\n"]
    for n in range(SUBPROBLEMS):
        parts.append(f"<<< add_subproblem\n///title\nPart {n:03d}\n///content\nWhat part {n} must answer.\n>>>\n")
    parts.append("<<< add_criteria_to_subproblem\n///title\nPart 000\n///criteria\nNames a number\n>>>\n")
    for n in range(ATTACHMENTS):
        parts.append(f"<<< add_attachment\n///name\nSource {n:03d}\n///content\n" + f"Excerpt {n}. " * 40 + "\n>>>\n")
    parts.append("<<< append_to_problem_definition\n///content\nScope grew.\n>>>\n")
    return "".join(parts)


_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:\+00:00|Z)?")
_DIGEST = re.compile(r'"after": "[0-9a-f]{64}"')  # undo records: digests of timestamped text


def snapshot(folder: Path) -> dict[str, str]:
    """Every file of the research, timestamps normalised. The lock, temporary files left in the
    bookkeeping folder by a kill before the commit point, the search index and the sources'
    parts (derived data, written after the commit or by whoever divides a source: tests/crash
    checks that a find answers right whatever state it is left in) are not state."""
    out = {}
    for path in folder.rglob("*"):
        rel = path.relative_to(folder).as_posix()
        if not path.is_file() or rel == f"{BOOK}/lock" or rel.startswith((f"{BOOK}/index.sqlite3", f"{BOOK}/{LAYOUTS}/")):
            continue
        if rel.startswith(f"{BOOK}/") and path.name.startswith(TMP_MARK):
            continue
        out[rel] = _DIGEST.sub("<digest>", _TIME.sub("<time>", path.read_bytes().decode("utf-8")))
    return out


def count(folder: Path) -> int:
    try:
        return sum(1 for _ in os.scandir(folder))
    except OSError:
        return 0


def names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A research holding the large message in message.dr; its snapshots before and after."""
    base = tmp_path_factory.mktemp("kill") / "base"
    research = Research.create(base, "Cover everything.", [("Background", "Context text.")])
    roomy(base)  # 60 subproblems in one message
    research.execute("<<< define_problem\n///title\nA wide problem\n///content\nMany parts.\n>>>\n")
    (base / "message.dr").write_text(large_message(), encoding="utf-8")
    before = snapshot(base)
    reference = base.parent / "after"
    shutil.copytree(base, reference)
    done = subprocess.run(cli_command("execute", reference / "message.dr"), capture_output=True, text=True,
                          env=cli_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    after = snapshot(reference)
    assert len(after) >= len(before) + SUBPROBLEMS * 3 + ATTACHMENTS
    return base, before, after


Condition = Callable[[Path], bool]

KILL_POINTS: dict[str, Condition] = {
    "at once": lambda f: True,
    "while the pending file is written": lambda f: any(n.startswith(TMP_MARK) for n in names(f / BOOK)),
    "when the pending file appears": lambda f: (f / BOOK / "pending.json").exists(),
    "after a third of the subproblems": lambda f: count(f / "Subproblems") >= SUBPROBLEMS // 3,
    "after most subproblems": lambda f: count(f / "Subproblems") >= SUBPROBLEMS - 5,
    "after most attachments": lambda f: count(f / "Attachments") >= ATTACHMENTS - 3,
    "when the journal grows": lambda f: size(f / BOOK / "journal.jsonl") > f.journal_size,  # type: ignore[attr-defined]
}


class Folder(type(Path())):  # a Path that remembers the journal's size before the run
    journal_size = 0


def kill_when(folder: Folder, condition: Condition, *command: object) -> tuple[bool, bool]:
    """Start `deep-research COMMAND…` (by default `execute` of the folder's message), poll until
    `condition` holds, SIGKILL. (killed?, pending file at the kill?)"""
    stderr = open(folder.parent / f"{folder.name}.stderr", "w")
    process = subprocess.Popen(
        cli_command(*(command or ("execute", folder / "message.dr"))), stdout=subprocess.DEVNULL, stderr=stderr,
        env=cli_env(),
    )
    try:
        while process.poll() is None:
            if condition(folder):
                process.send_signal(signal.SIGKILL)
                break
        process.wait(timeout=120)
    finally:
        stderr.close()
    killed = process.returncode == -signal.SIGKILL
    return killed, (folder / BOOK / "pending.json").exists()


def killed_at_each_point(base: Path, before: dict[str, str], after: dict[str, str], tmp_path: Path,
                         points: dict[str, Condition], *command: str) -> dict[str, tuple[bool, bool, str]]:
    """`deep-research COMMAND FOLDER` (default: execute of the folder's message) killed at each
    point, each on a fresh copy of `base`; then the research opened (recovering an interrupted
    commit) is as `before` or as `after`, never half, with no temporary file in its tree, a
    journal of whole records and no pending file. (killed?, pending at the kill?, outcome) by point."""
    results = {}
    for number, (name, condition) in enumerate(points.items()):
        folder = Folder(tmp_path / f"run{number}")
        shutil.copytree(base, folder)
        folder.journal_size = size(folder / BOOK / "journal.jsonl")
        killed, pending = kill_when(folder, condition, *((*command, folder) if command else ()))
        Research.open(folder)  # recovers an interrupted commit
        state = snapshot(folder)
        outcome = "before" if state == before else "after" if state == after else "HALF"
        if outcome == "HALF":
            differ = sorted(k for k in set(state) | set(before) | set(after)
                            if state.get(k) != before.get(k) and state.get(k) != after.get(k))[:6]
            pytest.fail(f"kill point {name!r} (killed={killed}, pending={pending}) left half a change: {differ}")
        if pending:
            assert outcome == "after", f"{name}: a complete pending file must be finished by recovery"
        leftovers = [p for p in folder.rglob(f"{TMP_MARK}*") if BOOK not in p.relative_to(folder).parts]
        assert leftovers == [], name
        journal = (folder / BOOK / "journal.jsonl").read_text(encoding="utf-8")
        assert journal.endswith("\n")
        for record in journal.splitlines():
            json.loads(record)
        assert not (folder / BOOK / "pending.json").exists()
        results[name] = (killed, pending, outcome)
    assert {outcome for _, _, outcome in results.values()} == {"before", "after"}, results
    assert any(killed and pending for killed, pending, _ in results.values()), (
        f"no kill landed inside the commit, so recovery was not exercised: {results}")
    return results


def test_sigkill_during_execute_leaves_the_tree_before_or_after(references, tmp_path: Path) -> None:
    base, before, after = references
    killed_at_each_point(base, before, after, tmp_path, KILL_POINTS)


def test_a_killed_execution_can_simply_be_run_again(references, tmp_path: Path) -> None:
    base, before, after = references
    folder = Folder(tmp_path / "again")
    shutil.copytree(base, folder)
    killed, pending = kill_when(folder, KILL_POINTS["at once"])
    state = snapshot(folder) if pending else None
    # Whatever happened, executing the message document again gives the "after" tree.
    result = subprocess.run(cli_command("execute", folder / "message.dr"), capture_output=True, text=True,
                            env=cli_env(), timeout=120)
    assert "Traceback" not in result.stderr
    assert snapshot(folder) == after, (killed, pending, state is None)
