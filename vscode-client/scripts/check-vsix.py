#!/usr/bin/env python3
"""Checks the contents of the packaged extension (.vsix).

Asserts that the server package (every file of server/deep_research: a stylesheet left out made
every compile in VS Code fail) and every bundled library are inside, and that no
TypeScript sources, node_modules, tests, source maps or Python caches are; then
unpacks it and starts the bundled server with `python -S` (no site-packages, so
only the bundled libraries can be imported) and completes an LSP `initialize`.

    python3 vscode-client/scripts/check-vsix.py [path/to/deep-research.vsix] [--no-smoke]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "vscode-client" / "dist" / "deep-research.vsix"
EXT = "extension/"
REQUIRED = [
    "package.json",
    "vscode-client/dist/extension.js",
    "vscode-client/language-configuration.json",
    "vscode-client/syntaxes/deep-research.tmLanguage.json",
    "vscode-client/snippets/deep-research.json",
    "vscode-client/bundled/deep_research/__init__.py",
    "vscode-client/bundled/deep_research/__main__.py",
    "vscode-client/bundled/not-bundled.json",  # what the extension offers to install
    "vscode-client/bundled/on-request.txt",  # ... and their lock, which it installs from
    "vscode-client/bundled/export.txt",  # ... with the export extra, when compile needs it
    # the server's runtime libraries (pure Python, resolved for 3.10+)
    "vscode-client/bundled/libs/pygls/__init__.py",
    "vscode-client/bundled/libs/lsprotocol/__init__.py",
    "vscode-client/bundled/libs/cattrs/__init__.py",
    "vscode-client/bundled/libs/attrs/__init__.py",
    "vscode-client/bundled/libs/typing_extensions.py",
    "vscode-client/bundled/libs/exceptiongroup/__init__.py",
    "vscode-client/bundled/libs/prompt_toolkit/__init__.py",
    "vscode-client/bundled/libs/wcwidth/__init__.py",
]
MAX_BYTES = 15 * 1024 * 1024


def forbidden(name: str) -> str | None:
    parts = name.split("/")
    if "node_modules" in parts:
        return "node_modules"
    if "__pycache__" in parts or name.endswith((".pyc", ".pyo")):
        return "Python cache"
    if name.endswith(".ts") or name.endswith(".map") or "/src/" in f"/{name}":
        return "TypeScript source or map"
    if name.startswith(("tests/", "server/", "scripts/", "vscode-client/test/", "vscode-client/scripts/")):
        return "not part of the extension"
    if name.endswith((".so", ".pyd", ".dylib", ".vsix")):
        return "binary"
    return None


def check(vsix: Path) -> list[str]:
    errors: list[str] = []
    with zipfile.ZipFile(vsix) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        manifest = json.loads(z.read(EXT + "package.json"))
    ext = [n[len(EXT):] for n in names if n.startswith(EXT)]
    for req in REQUIRED:
        if req not in ext:
            errors.append(f"missing: {req}")
    packaged = set(ext)
    for path in sorted((REPO / "server" / "deep_research").rglob("*")):  # the server whole, its data files too
        relative = path.relative_to(REPO / "server").as_posix()
        if path.is_file() and "__pycache__" not in relative and f"vscode-client/bundled/{relative}" not in packaged:
            errors.append(f"missing: vscode-client/bundled/{relative} (the server's own file: .vscodeignore left it out)")
    for n in ext:
        why = forbidden(n)
        if why:
            errors.append(f"must not be packaged ({why}): {n}")
    if manifest.get("main") != "./vscode-client/dist/extension.js":
        errors.append(f"package.json main is {manifest.get('main')!r}")
    size = vsix.stat().st_size
    if size > MAX_BYTES:
        errors.append(f"{vsix.name} is {size} bytes (limit {MAX_BYTES})")
    libs = sorted({n.split("/")[3] for n in ext if n.startswith("vscode-client/bundled/libs/") and n.count("/") >= 4})
    print(f"{vsix.name}: {len(ext)} files, {size // 1024} KB; bundled libs: {', '.join(libs)}")
    return errors


def smoke(vsix: Path) -> list[str]:
    """Start the bundled server from the unpacked .vsix without site-packages and initialize it."""
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(vsix) as z:
            z.extractall(tmp)
        bundled = Path(tmp, "extension", "vscode-client", "bundled")
        env = {**os.environ, "PYTHONPATH": f"{bundled}{os.pathsep}{bundled / 'libs'}", "PYTHONDONTWRITEBYTECODE": "1"}
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-S", "-m", "deep_research", "serve", "--stdio"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp,
        )
        try:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"processId": None, "rootUri": None, "capabilities": {}}}).encode()
            assert proc.stdin and proc.stdout
            proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            proc.stdin.flush()
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                ch = proc.stdout.read(1)
                if not ch:
                    return [f"the bundled server exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}"]
                header += ch
            length = next(int(v) for k, _, v in (line.partition(b":") for line in header.split(b"\r\n")) if k.lower() == b"content-length")
            reply = json.loads(proc.stdout.read(length))
            took = time.monotonic() - started
            commands = reply.get("result", {}).get("capabilities", {}).get("executeCommandProvider", {}).get("commands", [])
            print(f"bundled server answered initialize in {took:.2f}s under `python -S` (commands: {', '.join(commands)})")
            return [] if "result" in reply else [f"initialize failed: {reply}"]
        finally:
            proc.kill()
            proc.wait(10)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    vsix = Path(args[0]) if args else DEFAULT
    if not vsix.exists():
        print(f"{vsix} does not exist: run `npm run package` first", file=sys.stderr)
        return 1
    errors = check(vsix)
    if not errors and "--no-smoke" not in argv:
        errors += smoke(vsix)
    for e in errors:
        print(f"FAIL {e}", file=sys.stderr)
    print("vsix check: " + ("OK" if not errors else f"{len(errors)} problem(s)"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
