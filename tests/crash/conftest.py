"""The crash harness's figures, printed at the end of the pytest run (how many crash states
each scenario built and checked); fsync on for every test here."""

from __future__ import annotations

import pytest

from deep_research.engine.store import NO_FSYNC_FOR_TESTS

FIGURES: list[str] = []


@pytest.fixture(autouse=True)
def fsync_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about durability: fsync as the product does it (tests/conftest.py turns
    it off for the others)."""
    monkeypatch.delenv(NO_FSYNC_FOR_TESTS, raising=False)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if FIGURES:
        terminalreporter.section("crash states checked (tests/crash)")
        for line in FIGURES:
            terminalreporter.write_line(line)
