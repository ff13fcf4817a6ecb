"""ARCHITECTURE.md is true to the tree: every file it names exists where it says, and the
engine's code map lists every module of the engine under its storey's heading, so that a
newcomer who looks a behaviour up there finds the file (issue 47)."""

from __future__ import annotations

import re
from pathlib import Path

import deep_research

PACKAGE = Path(deep_research.__file__).parent
REPO = PACKAGE.parent.parent
TEXT = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
ROOTS = ("engine", "app", "sources", "autopilot", "lsp", "mcp_server", "dossier")
PATH = re.compile(r"(?<![\w/.])((?:server/deep_research/)?(?:" + "|".join(ROOTS) + r"|tests|scripts|benchmarks|docs)"
                  r"/[\w/.-]*\w)")


def _engine_map() -> dict[str, set[str]]:
    """The engine's code map: each storey's folder ("" the facade) and the `*.py` its bullets name."""
    section = TEXT.split("### `server/deep_research/engine/`", 1)[1].split("\n### ", 1)[0]
    storeys: dict[str, set[str]] = {}
    for block in section.split("\n#### ")[1:]:
        heading, _, body = block.partition("\n")
        folder = re.match(r"`(\w+)/`", heading)
        storeys[folder.group(1) if folder else ""] = set(re.findall(r"^- `(\w+\.py)`", body, flags=re.M))
    return storeys


def test_every_path_architecture_names_exists() -> None:
    missing = []
    for found in sorted(set(PATH.findall(TEXT))):
        path = found.removeprefix("server/deep_research/")
        place = REPO / path if path.split("/")[0] in ("tests", "scripts", "benchmarks", "docs") else PACKAGE / path
        if not place.exists() and not place.with_suffix(".py").exists():
            missing.append(found)
    assert len(PATH.findall(TEXT)) > 40, "the paths were found"
    assert missing == []


def test_the_engines_code_map_lists_every_module_under_its_storey() -> None:
    storeys = _engine_map()
    engine = PACKAGE / "engine"
    on_disk = {folder: {p.name for p in (engine / folder).glob("*.py") if p.name != "__init__.py"}
               for folder in storeys}
    assert storeys == on_disk
    folders = {p.name for p in engine.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(storeys) - {""}, "every storey has its heading"
