#!/usr/bin/env python3
"""Bundles the language server into the VS Code extension.

- `pip install --target vscode-client/bundled/libs` the server's runtime dependencies,
  read from the root pyproject.toml ([project].dependencies), resolved for Python 3.10
  (the oldest supported) as pure-Python wheels, so one set works on 3.10 and newer;
- copies server/deep_research to vscode-client/bundled/deep_research;
- writes vscode-client/bundled/not-bundled.json: the requirements left out (see
  NOT_BUNDLED), as pyproject.toml states them; the extension installs them on request
  into a private environment, and scripts/setup-wheelhouse downloads them for its test.

The extension then runs `<python> -m deep_research serve` with PYTHONPATH set to
bundled/ and bundled/libs. pip runs only when the dependency list changed (a stamp
file records it); the copy of the sources is always fresh.

    python3 scripts/bundle-server.py [--force]
    python3 scripts/bundle-server.py --print-not-bundled     # one requirement a line
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "vscode-client" / "bundled"
LIBS = BUNDLED / "libs"
STAMP = LIBS / ".bundle-stamp.json"
TARGET_PYTHON = "3.10"
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", ".mypy_cache")


# Libraries that pull compiled modules (openai: pydantic-core and jiter; trafilatura: lxml;
# mcp: pydantic-core, cryptography; ddgs: primp, lxml) cannot be bundled once for every
# platform and Python. The server imports them only where the autopilot, web pages,
# `deep-research mcp` or a DuckDuckGo search need them; the extension offers to install them
# (not-bundled.json), and the server says how to when they are missing.
NOT_BUNDLED = {"openai", "trafilatura", "mcp", "ddgs"}
EXTRAS_FILE = BUNDLED / "not-bundled.json"


def dependencies(bundled: bool = True) -> list[str]:
    """The runtime dependencies to bundle ([project].dependencies minus NOT_BUNDLED), or with
    `bundled=False` those left out, exactly as pyproject.toml states them."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomllib is 3.11+
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            sys.exit("bundle-server needs Python >= 3.11 (tomllib) or the tomli package")
    deps = tomllib.loads(text)["project"]["dependencies"]
    return [d for d in deps if (_canonical(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) not in NOT_BUNDLED) == bundled]


# pip's --python-version picks wheels but evaluates environment markers for the running
# interpreter, so a dependency such as `exceptiongroup; python_version < "3.11"` would be
# left out when bundling on 3.11+. The markers are evaluated here for every supported
# Python on every platform, and whatever any of them needs is bundled.
MARKER_ENVS = [
    {"python_version": v, "python_full_version": f"{v}.0", "sys_platform": plat, "platform_system": system,
     "os_name": os_name, "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    for v in ("3.10", "3.11", "3.12", "3.13", "3.14")
    for plat, system, os_name in (("linux", "Linux", "posix"), ("darwin", "Darwin", "posix"), ("win32", "Windows", "nt"))
]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_requirements() -> list[str]:
    """Requirements of the installed libraries that some supported environment needs but pip skipped."""
    from email.parser import Parser

    from pip._vendor.packaging.requirements import Requirement

    metas = [Parser().parsestr(p.read_text(encoding="utf-8")) for p in LIBS.glob("*.dist-info/METADATA")]
    installed = {_canonical(m["Name"]) for m in metas}
    missing: dict[str, str] = {}
    for meta in metas:
        for line in meta.get_all("Requires-Dist") or []:
            req = Requirement(line)
            if _canonical(req.name) in installed:
                continue
            if req.marker is None or any(req.marker.evaluate({**env, "extra": ""}) for env in MARKER_ENVS):
                req.marker = None
                missing[_canonical(req.name)] = str(req)
    return sorted(missing.values())


def install_libs(deps: list[str], force: bool) -> str:
    args = [
        "install", "--target", str(LIBS), "--python-version", TARGET_PYTHON,
        "--only-binary=:all:", "--platform", "any", "--implementation", "py", "--abi", "none",
        "--no-compile", "--disable-pip-version-check", "--no-input", "--quiet",
    ]
    key = hashlib.sha256(json.dumps({"deps": deps, "args": args}).encode()).hexdigest()
    if not force and STAMP.exists() and json.loads(STAMP.read_text()).get("key") == key:
        return "reused"
    wanted = list(deps)
    for _ in range(5):
        shutil.rmtree(LIBS, ignore_errors=True)
        LIBS.mkdir(parents=True)
        subprocess.run([sys.executable, "-m", "pip", *args, *wanted], check=True)
        extra = missing_requirements()
        if not extra:
            break
        print(f"bundle-server: adding requirements of other Pythons/platforms: {', '.join(extra)}")
        wanted += extra
    else:
        sys.exit("bundle-server: the requirements did not settle")
    shutil.rmtree(LIBS / "bin", ignore_errors=True)  # console scripts of the libraries
    for cache in LIBS.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    native = [p for p in LIBS.rglob("*") if p.suffix in {".so", ".pyd", ".dylib"}]
    if native:
        sys.exit(f"bundle-server: compiled modules cannot be bundled for every platform: {native[:5]}")
    installed = sorted(p.name.removesuffix(".dist-info") for p in LIBS.glob("*.dist-info"))
    STAMP.write_text(json.dumps({"key": key, "dependencies": deps, "installed": installed}, indent=1))
    return "installed " + ", ".join(installed)


def copy_server() -> int:
    dest = BUNDLED / "deep_research"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(REPO / "server" / "deep_research", dest, ignore=IGNORE)
    return sum(1 for _ in dest.rglob("*.py"))


def write_extras() -> list[str]:
    extras = dependencies(bundled=False)
    names = [_canonical(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) for d in extras]
    EXTRAS_FILE.write_text(json.dumps({"requirements": extras, "names": names}, indent=1) + "\n", encoding="utf-8")
    return extras


def main() -> int:
    if "--print-not-bundled" in sys.argv:
        print("\n".join(dependencies(bundled=False)))
        return 0
    started = time.monotonic()
    if not (REPO / "server" / "deep_research" / "__init__.py").exists():
        sys.exit("bundle-server: server/deep_research is missing")
    deps = dependencies()
    libs = install_libs(deps, force="--force" in sys.argv)
    files = copy_server()
    extras = write_extras()
    print(f"bundled the server into {BUNDLED.relative_to(REPO)}: deep_research ({files} .py files); "
          f"libs {libs}; not bundled (installed on request): {', '.join(extras)}; {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
