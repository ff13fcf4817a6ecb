"""A real Emacs (Debian's emacs-nox 28 with elpa-eglot 1.9, from scripts/setup-emacs-test-env)
in batch mode, configured as docs/editors.md says, against the real server: a .dr document
through eglot, a diagnostic through Flymake, completion-at-point, the execute code action
writing the tree. The scenario is scenario.el; the assertions are here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.editor

REPO = Path(__file__).resolve().parents[2]
SETUP = "scripts/setup-emacs-test-env"


@pytest.fixture(scope="session")
def emacs() -> str:
    found = subprocess.run(["bash", str(REPO / SETUP), "--print-bin"], capture_output=True, text=True)
    if found.returncode != 0:
        if os.environ.get("DEEP_RESEARCH_SKIP_EMACS") == "1":
            pytest.skip("DEEP_RESEARCH_SKIP_EMACS=1")
        pytest.fail(f"Emacs with eglot is not installed. Run: {SETUP} (or set DEEP_RESEARCH_SKIP_EMACS=1)",
                    pytrace=False)
    return found.stdout.strip()


def test_eglot_diagnostics_completion_and_execution(emacs: str, tmp_path: Path) -> None:
    research = tmp_path / "research"
    env = {**os.environ, "PYTHONPATH": str(REPO / "server"), "HOME": str(tmp_path / "home")}
    subprocess.run([sys.executable, "-m", "deep_research", "new", str(research)], env=env, check=True,
                   capture_output=True, timeout=60)
    out = tmp_path / "observed.json"
    env.update(DR_FILE=str(research / "message.dr"), DR_OUT=str(out),
               DR_SERVER_CMD=json.dumps([sys.executable, "-m", "deep_research", "serve"]))
    proc = subprocess.run([emacs, "--batch", "-Q", "-l", str(Path(__file__).parent / "scenario.el")], env=env,
                          cwd=research, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    seen = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    assert proc.returncode == 0 and seen.get("ok") is True, f"{seen.get('error')}\n{proc.stderr[-4000:]}"
    assert seen["major-mode"] == "deep-research-mode"
    assert (seen["language-id"], seen["server"]) == ("deep-research", "deep-research")
    assert any("Did you mean `focus_up`" in d for d in seen["diagnostics"]), seen["diagnostics"]
    assert seen["completed"].startswith("<<< define_problem\n///title\n"), seen["completed"]
    assert len(seen["actions"]) == 1 and "execute" in seen["actions"][0]
    assert "Tiled matrix multiplication" in seen["definition"]
    assert "Cites three sources" in (research / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
    assert seen["saved"] == ""
    assert json.loads((research / ".deep-research" / "state.json").read_text())["phase"] == "in_focus"
