"""The crash harness's figures, printed at the end of the pytest run (how many crash states
each scenario built and checked)."""

from __future__ import annotations

FIGURES: list[str] = []


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if FIGURES:
        terminalreporter.section("crash states checked (tests/crash)")
        for line in FIGURES:
            terminalreporter.write_line(line)
