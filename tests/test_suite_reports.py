"""The suite always reports: a failure, however it is formatted, never stops pytest (issue 44).

On Python 3.11 a `__del__` that raises while the garbage collector runs inside `ast.parse` (pytest
parses source to format a failure) broke that parse with `SystemError: AST constructor recursion
depth mismatch`: an INTERNALERROR, and nothing said about the other tests. tests/unraisable.py
hands such exceptions to pytest after the collector; this runs the case in a pytest of its own,
with the suite's plugins, and looks at what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CASE = '''
import ast
import gc

SOURCE = "x = [" + ", ".join(f"{{'k{i}': ({i}, {i} + 1)}}" for i in range(200)) + "]\\n"


class HalfBuilt:  # as openai 3's client, built with a timeout it refused
    def __del__(self):
        raise AttributeError("'HalfBuilt' object has no attribute '_state'")


def collect_inside_a_parse():
    """Garbage with a failing __del__, collected at the parse's first allocation."""
    threshold = gc.get_threshold()
    gc.disable()
    try:
        for _ in range(3):
            garbage = HalfBuilt()
            garbage.cycle = garbage
        del garbage
        gc.set_threshold(1)
        gc.enable()
        return compile(SOURCE, "<generated>", "exec", ast.PyCF_ONLY_AST)
    finally:
        gc.set_threshold(*threshold)
        gc.enable()


def test_a_parse_goes_on_while_the_collector_finalises():
    assert isinstance(collect_inside_a_parse(), ast.Module)


def test_a_failure_is_formatted_while_the_collector_finalises():
    collect_inside_a_parse()
    values = {"x": list(range(40))}
    assert values == {"x": list(range(1, 41))}


def test_after_them():
    pass
'''


def test_a_del_that_raises_in_the_collector_is_reported_and_every_test_runs(tmp_path: Path) -> None:
    case = tmp_path / "test_case.py"
    case.write_text(CASE, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # not the project's settings
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.unraisable", "-p", "no:cacheprovider", "-q", "-rfE",
         "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini"), str(case)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    out = ran.stdout + ran.stderr
    assert "INTERNALERROR" not in out and "SystemError" not in out, out[-3000:]
    assert ran.returncode == 1, out[-3000:]  # one test failed: an ordinary failure
    assert "1 failed, 2 passed" in out, out[-3000:]
    assert re.search(r"FAILED \S*test_case.py::test_a_failure_is_formatted_while_the_collector_finalises", out), out[-3000:]
    assert "AssertionError" in out and "assert {'x': [0, 1, 2" in out  # formatted as pytest formats
    # and the exception in the collector is still told, as pytest tells it
    assert "PytestUnraisableExceptionWarning" in out and "HalfBuilt.__del__" in out, out[-3000:]
