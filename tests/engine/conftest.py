from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from deep_research.engine.research import Research

from dr_engine_support import new_research


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The research folder; tmp_path itself stays free so tests can look for escapes."""
    return tmp_path / "research"


@pytest.fixture(scope="session")
def _templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each starting research is built once with the engine, then copied for every test."""
    base = tmp_path_factory.mktemp("templates")
    new_research(base / "research", criteria=("First criterion", "Second criterion"), subproblems=("Sub A", "Sub B"))
    new_research(base / "fresh", defined=False)
    return {"research": base / "research", "fresh": base / "fresh"}


def _copy(template: Path, root: Path) -> Research:
    shutil.copytree(template, root, symlinks=True)
    return Research.open(root)


@pytest.fixture
def research(root: Path, _templates: dict[str, Path]) -> Research:
    """A research in focus at its root problem, with two open criteria and two subproblems."""
    return _copy(_templates["research"], root)


@pytest.fixture
def fresh(root: Path, _templates: dict[str, Path]) -> Research:
    """A research whose problem is not defined yet."""
    return _copy(_templates["fresh"], root)
