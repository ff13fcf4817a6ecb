"""The dossier in a real headless Chromium (Debian's, driven by playwright-core from the
VS Code test environment: scripts/setup-vscode-test-env), with the network blocked.

Skipped only when DEEP_RESEARCH_SKIP_VSCODE=1 (the same environment as the VS Code tests;
the `browser_env` fixture of tests/conftest.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from deep_research.dossier import export

from dr_dossier_support import CHILDREN, HOSTILE, NESTED, all_titles, sample_research

pytestmark = pytest.mark.browser


def test_the_dossier_in_chromium(browser_env: dict, tmp_path: Path) -> None:
    research = sample_research(tmp_path / "research")
    dossier = export(research.root, tmp_path / "dossier.html").path
    screenshot = tmp_path / "dossier.png"
    proc = subprocess.run(
        [browser_env["node24"], str(Path(__file__).with_name("browse_dossier.mjs")), browser_env["json"], str(dossier),
         str(screenshot), CHILDREN[0], NESTED],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"screenshot: {screenshot}")

    # Nothing but the file itself was requested; no script ran but ours, no dialog opened.
    assert seen["blocked"] == [], seen["blocked"]
    assert seen["dialogs"] == [] and seen["pwned"] is None, seen
    assert seen["errors"] == [], seen["errors"]
    assert not [m for m in seen["console"] if "Content Security Policy" in m], seen["console"]
    assert seen["scriptCount"] == 1
    # A citation on a child's page of its parent's attachment: the parent's page, the attachment unfolded.
    cited = seen["citation"]
    assert cited["hash"] == cited["href"] and cited["href"].startswith("#p0-a")
    assert cited["visible"] == ["p0"] and cited["open"] and cited["shown"] and cited["name"].startswith("Cache paper")
    # Every problem title is there, as text (the hostile one literally), in the tree and as a page.
    assert sorted(seen["navTitles"]) == sorted(all_titles())
    assert sorted(seen["sectionTitles"]) == sorted(all_titles())
    assert HOSTILE in seen["navTitles"]
    # One page at a time: the root first; a click on a tree entry shows that problem alone.
    assert seen["initialVisible"] == ["p0"]
    assert len(seen["afterClick"]["visible"]) == 1 and seen["afterClick"]["hash"] == f"#{seen['afterClick']['visible'][0]}"
    assert seen["afterClick"]["heading"].startswith(CHILDREN[0])
    assert len(seen["afterFilter"]["visible"]) == 1 and seen["afterFilter"]["heading"].startswith(NESTED)
    assert seen["journal"]["visible"] == ["journal"] and seen["journal"]["entries"] >= 8
    # Without the script every page shows, so the file reads in any browser.
    assert len(seen["noScript"]["visible"]) == len(all_titles()) + 1
    assert seen["noScript"]["pwned"] in (None, "no-js")
    assert screenshot.stat().st_size > 10_000

