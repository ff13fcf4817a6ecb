"""The engine is plain Python: nothing in `deep_research.engine` imports pygls,
lsprotocol or the MCP SDK, directly or through another module, at import time or lazily. Nor does it
reach the network: no HTTP client, no extractor, nothing of `deep_research.sources`."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import deep_research.engine

ENGINE = Path(deep_research.engine.__file__).parent
SERVER = ENGINE.parent.parent
FORBIDDEN = ("pygls", "lsprotocol", "mcp", "mcp_types")
OFFLINE = ("httpx", "httpcore", "trafilatura", "pypdf", "openai", "socket", "urllib.request")

PROBE = """
import importlib, pkgutil, sys
import deep_research.engine as engine
names = [m.name for m in pkgutil.walk_packages(engine.__path__, engine.__name__ + ".")]
for name in names:
    importlib.import_module(name)
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("pygls", "lsprotocol", "mcp", "mcp_types"))
lsp = sorted(m for m in sys.modules if m.startswith(("deep_research.lsp", "deep_research.mcp_server")))
online = sorted(m for m in sys.modules if m.split(".")[0] in ("httpx", "httpcore", "trafilatura", "pypdf", "openai")
                or m.startswith("deep_research.sources"))
print(len(names))
print(",".join(leaked))
print(",".join(lsp))
print(",".join(online))
"""


def test_importing_every_engine_module_loads_no_lsp_library() -> None:
    env = {**os.environ, "PYTHONPATH": str(SERVER)}
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=60, cwd=SERVER,
    )
    assert result.returncode == 0, result.stderr
    count, leaked, lsp, online = (result.stdout.split("\n") + ["", "", ""])[:4]
    assert int(count) >= 15, "every module of the engine was imported"
    assert leaked == "", f"the engine pulled in {leaked}"
    assert lsp == "", f"the engine pulled in the server package: {lsp}"
    assert online == "", f"the engine pulled in network code: {online}"


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module an engine file imports (absolute names), including imports inside functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = ".".join(path.relative_to(SERVER).parent.parts)  # the file's own package: storeys are folders
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def test_no_engine_source_imports_lsp_or_network_code_even_lazily() -> None:
    offenders = []
    for path in sorted(ENGINE.rglob("*.py")):
        for lineno, name in _imports(path):
            top = name.split(".")[0]
            if top in FORBIDDEN or name.startswith("deep_research.lsp") or name in ("deep_research.cli", "deep_research.repl"):
                offenders.append(f"{path.relative_to(SERVER)}:{lineno} imports {name}")
            elif name in OFFLINE or top in OFFLINE or name.startswith("deep_research.sources"):
                offenders.append(f"{path.relative_to(SERVER)}:{lineno} imports {name}")
    assert offenders == []
