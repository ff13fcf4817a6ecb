"""Benchmarks never rot: each one in benchmarks/ (as scripts/run-benchmarks lists them) runs
in its quick mode, as a subprocess, exits 0 and prints figures. Not a timing test: the
figures are not judged, only that the benchmark still starts, runs and reports."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO / "scripts" / "run-benchmarks"


def listed() -> list:
    lines = subprocess.run([sys.executable, str(RUNNER), "--list"], capture_output=True, text=True, check=True,
                           timeout=60).stdout.splitlines()
    out = []
    for line in lines:
        path, *tags = line.split()
        # Hang detectors, not timing tests: a quick mode takes 1–14 s alone but 40–90 s in a cold
        # run, where scripts/run-all-tests gives the model's path more weight than the tests.
        marks = [pytest.mark.llm, pytest.mark.timeout(600)] if "llm" in tags else [pytest.mark.timeout(360)]
        out.append(pytest.param(path, "llm" in tags, id=Path(path).stem, marks=marks))
    return out


@pytest.mark.parametrize(("path", "needs_model"), listed())
def test_each_benchmark_runs_in_its_quick_mode(path: str, needs_model: bool, request) -> None:
    if needs_model:
        request.getfixturevalue("local_llm")  # skips (or fails under make test) without the model
    env = {**os.environ, "PYTHONPATH": str(REPO / "server")}
    # A process group of its own, so that a timeout stops what the benchmark started too (its
    # llama-server ran on after `subprocess.run` had killed the benchmark's Python); not a session
    # of its own, which would be an autogroup of its own, weighed as much as the whole run of
    # tests it belongs to (scripts/run-all-tests shares the cores by session).
    process = subprocess.Popen([sys.executable, str(REPO / path), "--quick"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, cwd=REPO, stdin=subprocess.DEVNULL,
                               process_group=0)
    try:
        stdout, stderr = process.communicate(timeout=540 if needs_model else 300)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    assert process.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    figures = [line for line in stdout.splitlines() if re.search(r"\d", line)]
    assert figures, "a benchmark prints its figures:\n" + stdout
    print(stdout)

