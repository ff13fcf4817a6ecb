"""Power loss at every point of the engine's writes: the crash harness on CI's scenarios
(tests/crash/replay.py says what is checked in each state), the persistence model on
small sequences, and the harness failing when one of the engine's barriers is taken away."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deep_research.engine import store

from .conftest import FIGURES
from .disk import (
    BLOCK, Create, CrashState, FsyncDir, FsyncFile, Image, Mkdir, Rename, Write, covered, crash_states,
)
from .replay import run
from .scenarios import SCENARIOS


def scenario(name: str):
    return next(s for s in SCENARIOS if s.name == name)


@pytest.mark.timeout(360)  # hang detection: the longest scenario took 102–106 s of wall in cold runs
@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_every_crash_state_is_before_or_after(name: str) -> None:
    result = run(scenario(name), log=lambda line: None)
    FIGURES.append(result.line())
    assert result.outside == [], "the recorded operation changed something outside its sandbox"
    assert result.inconsistent == [], f"{len(result.inconsistent)} inconsistent states, the first: {result.inconsistent[0]}"
    assert result.operations > 0 and result.distinct > 1
    assert {"before"} <= set(result.outcomes), result.outcomes  # the harness saw both sides
    assert any(v != "before" for v in result.outcomes), result.outcomes


# -- the harness fails when a barrier is missing ------------------------------------------------------


def test_a_new_folder_not_fsynced_into_its_parent_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    real = store.make_folders
    monkeypatch.setattr(store.transaction, "make_folders", lambda folder, durable: real(folder, durable=False))
    result = run(scenario("execute"), kill_stride=None, log=lambda line: None)
    assert result.inconsistent
    assert any("lost: #" in line and "Mkdir(path='research/Subproblems/Part" in line for line in result.inconsistent)


def test_a_pending_file_whose_removal_is_not_durable_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """It comes back after the power loss and is applied again over the user's later edit."""
    monkeypatch.setattr(store.transaction, "_finish", lambda book, durable: os.unlink(book / store.PENDING))
    result = run(scenario("edit"), kill_stride=None, log=lambda line: None)
    assert len(result.inconsistent) == 1
    assert "Unlink(path='research/.deep-research/pending.json')" in result.inconsistent[0]
    assert "the operation had returned, yet the disk is 'after mark 1'" in result.inconsistent[0]


# -- the persistence model -------------------------------------------------------------------------------


def unsafe_replace(data: bytes) -> list:
    """Write a temporary file and rename it over `f` with no fsync at all."""
    return [Create("tmp", 2), Write(2, 0, data), Rename("tmp", "f")]


def files_after(states, ops, initial: Image) -> list[dict[str, bytes]]:
    return [state.build(initial, ops).files() for state in states]


def old_file() -> Image:
    image = Image()
    image.names["f"] = 1
    image.inodes[1] = b"old"
    return image


def test_without_fsync_a_rename_may_land_without_its_data() -> None:
    ops = unsafe_replace(b"new")
    outcomes = files_after(crash_states(ops, range(3, 4)), ops, old_file())
    assert {"f": b"old"} in outcomes and {"f": b"new"} in outcomes
    assert {"f": b""} in outcomes  # the rename reached the disk, the data did not


def test_fsync_of_data_and_folder_leaves_only_old_or_new() -> None:
    ops = [Create("tmp", 2), Write(2, 0, b"new"), FsyncFile(2), Rename("tmp", "f"), FsyncDir("")]
    for k in range(len(ops) + 1):
        for files in files_after(crash_states(ops, range(k, k + 1)), ops, old_file()):
            assert files.get("f") in (b"old", b"new"), (k, files)
    assert files_after(crash_states(ops, range(5, 6)), ops, old_file()) == [{"f": b"new"}]


def test_a_write_is_cut_at_block_boundaries() -> None:
    data = bytes(range(256)) * (3 * BLOCK // 256 + 1)
    ops = [Create("g", 2), Write(2, 0, data), FsyncDir("")]
    cut = [s for s in crash_states(ops, range(3, 4)) if s.cut is not None]
    sizes = sorted(len(s.build(Image(), ops).files()["g"]) for s in cut)
    assert sizes == [BLOCK, 2 * BLOCK, 3 * BLOCK]


def test_a_folder_not_made_durable_takes_its_files_with_it() -> None:
    ops = [Mkdir("d"), Create("d/x", 2), Write(2, 0, b"x"), FsyncFile(2), FsyncDir("d")]
    assert covered(ops, 5) == [False, True, True, True, True]
    lost = CrashState(5, lost=(0,)).build(Image(), ops)
    assert lost.files() == {} and "d" not in lost.folders


def test_the_recorder_sees_what_the_engine_does(tmp_path: Path) -> None:
    """The recorder's model equals the disk after a real message (replay.record checks it),
    and it saw the barriers the engine makes."""
    from .replay import record

    recorder = record(scenario("execute"), tmp_path, full=False)
    kinds = {type(op).__name__ for op in recorder.ops}
    assert {"Mkdir", "Create", "Write", "Rename", "Unlink", "FsyncFile", "FsyncDir"} <= kinds
    assert recorder.outside == []
