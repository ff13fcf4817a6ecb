"""Fixtures of the VS Code tests: the built extension and the real-VS-Code test environment.

Every test here is skipped when DEEP_RESEARCH_SKIP_VSCODE=1, and only then. A missing
test environment is a failure that names the script that installs it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from .harness import DRIVERS, REPO, SETUP, VSIX, driver_env, require, run


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("DEEP_RESEARCH_SKIP_VSCODE") != "1":
        return
    skip = pytest.mark.skip(reason="DEEP_RESEARCH_SKIP_VSCODE=1")
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """The extension's npm dependencies, installed from package-lock.json when missing or stale."""
    if shutil.which("npm") is None:
        pytest.fail("npm is not on PATH: the extension build needs Node.js and npm", pytrace=False)
    hidden_lock = REPO / "node_modules" / ".package-lock.json"
    lock = REPO / "package-lock.json"
    if not hidden_lock.exists() or hidden_lock.stat().st_mtime < lock.stat().st_mtime:
        require(run(["npm", "ci", "--no-audit", "--no-fund"], timeout=600), "npm ci")
    return REPO / "node_modules"


# What `npm run package` reads: the extension, the server it bundles and its dependencies, and
# the top-level files vsce may take (README, .vscodeignore). Not the extension's tests.
PACKAGE_INPUTS = ("vscode-client", "server/deep_research", "scripts/bundle-server.py", "requirements",
                  "node_modules/.package-lock.json")
NOT_INPUTS = {"dist", "bundled", "test", "__pycache__", "node_modules"}
DIGEST = VSIX.parent / ".inputs.sha256"  # the inputs' digest of the .vsix beside it
BUILT = [VSIX, REPO / "vscode-client" / "dist" / "extension.js", REPO / "vscode-client" / "bundled" / "libs" / "pygls"]


def package_inputs_digest() -> str:
    """A digest of every file `npm run package` reads (names and contents), and of the node and
    Python that build it."""
    digest = hashlib.sha256()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
    digest.update(f"{node} {sys.version}".encode())
    files = [p for p in REPO.iterdir() if p.is_file()]
    for name in PACKAGE_INPUTS:
        top = REPO / name
        files += [top] if top.is_file() else [p for p in top.rglob("*") if p.is_file()
                                              and not NOT_INPUTS & set(p.relative_to(top).parts)]
    for path in sorted(files):
        digest.update(f"{path.relative_to(REPO)}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@pytest.fixture(scope="session")
def extension_package(node_modules: Path) -> Path:
    """Typecheck, bundle, bundle the server, `vsce package`, check the .vsix (npm run package),
    unless the .vsix there was packaged from the same inputs (their digest beside it): ~15 s of
    CPU saved on every run after the first, and the .vsix is still checked by its tests."""
    digest = package_inputs_digest()
    if all(p.exists() for p in BUILT) and DIGEST.exists() and DIGEST.read_text() == digest:
        print(f"{VSIX} was packaged from these sources: reused")
        return VSIX
    DIGEST.unlink(missing_ok=True)
    require(run(["npm", "run", "package"], timeout=600), "npm run package")
    assert VSIX.exists()
    DIGEST.write_text(digest)
    return VSIX


@pytest.fixture(scope="session")
def vscode_env() -> Path:
    """The cache dir of a complete install made by scripts/setup-vscode-test-env."""
    proc = subprocess.run(["bash", str(REPO / SETUP), "--print-dir"], capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        pytest.fail(
            f"The VS Code test environment (code-server, node 24, playwright-core, chromium) is not installed. "
            f"Run: {SETUP}",
            pytrace=False,
        )
    return Path(proc.stdout.strip())


@pytest.fixture(scope="session")
def workbench(extension_package: Path, vscode_env: Path) -> Iterator[str]:
    """One code-server (the .vsix installed) and one Chromium for the UI drivers of the session
    (drivers/workbench-session.mjs): what they read from $DR_WORKBENCH. Each driver opens its own
    folder in its own browser context and stops its own window's extension host; starting both
    was a third of each driver's CPU."""
    proc = subprocess.Popen(["node", str(DRIVERS / "workbench-session.mjs")], cwd=REPO, env=driver_env(vscode_env),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    started: list[str] = []
    for line in proc.stdout:
        if line.startswith("{"):
            break
        started.append(line)
    else:
        code = proc.wait(timeout=60)
        if code == 2:
            pytest.fail(f"the VS Code test environment or the .vsix is missing. Run: {SETUP}\n{''.join(started)}", pytrace=False)
        pytest.fail(f"the shared code-server did not start (rc {code}):\n{''.join(started)[-6000:]}", pytrace=False)
    yield line.strip()
    proc.stdin.close()  # it stops code-server and Chromium
    rest = proc.stdout.read()
    code = proc.wait(timeout=60)
    assert code == 0, f"the shared code-server did not stop cleanly (rc {code}):\n{rest[-4000:]}"
