#!/usr/bin/env python3
"""Bundles the language server into the VS Code extension.

- `pip install --target vscode-client/bundled/libs` the server's runtime dependencies, exactly
  the versions and files of the lock (requirements/bundled.txt, written by scripts/lock from
  pyproject.toml's [project].dependencies minus NOT_BUNDLED): pure-Python wheels, each checked
  against its hash; every entry that any supported Python on any platform needs, so that one
  set works on 3.10 and newer;
- copies server/deep_research to vscode-client/bundled/deep_research;
- writes vscode-client/bundled/not-bundled.json (the requirements left out, as pyproject.toml
  states them) and vscode-client/bundled/on-request.txt (their lock, requirements/on-request.txt):
  the extension installs them on request into a private environment, exactly as locked, and
  scripts/setup-wheelhouse downloads them for its test.

The extension then runs `<python> -m deep_research serve` with PYTHONPATH set to
bundled/ and bundled/libs. pip runs only when the lock changed (a stamp file records it);
the copy of the sources is always fresh.

    python3 scripts/bundle-server.py [--force]
    python3 scripts/bundle-server.py --print-bundled       # one requirement a line (scripts/lock)
    python3 scripts/bundle-server.py --print-not-bundled   # one requirement a line (scripts/lock)
    python3 scripts/bundle-server.py --print-on-request-extras   # the extras installed on request (scripts/lock)
    python3 scripts/bundle-server.py --print-extra NAME    # one requirement a line (scripts/lock)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
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
NOT_BUNDLED = {"openai", "trafilatura", "lxml-html-clean", "mcp", "ddgs"}
EXTRAS_FILE = BUNDLED / "not-bundled.json"
LOCK = REPO / "requirements" / "bundled.txt"  # scripts/lock writes both
ON_REQUEST = REPO / "requirements" / "on-request.txt"
# Extras the extension installs on request too, when a command needs them (compile's docx, odt
# and pdf need `export`): each with its lock, which holds what ON_REQUEST holds as well, so that
# one `pip install --require-hashes -r` makes the whole private environment.
ON_REQUEST_EXTRAS = ("export",)


def dependencies(bundled: bool = True) -> list[str]:
    """The runtime dependencies to bundle ([project].dependencies minus NOT_BUNDLED), or with
    `bundled=False` those left out, exactly as pyproject.toml states them."""
    deps = _project()["dependencies"]
    return [d for d in deps if (_canonical(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) not in NOT_BUNDLED) == bundled]


def extra(name: str) -> list[str]:
    """An extra's requirements, exactly as pyproject.toml states them."""
    return list(_project()["optional-dependencies"][name])


def _project() -> dict:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomllib is 3.11+
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            sys.exit("bundle-server needs Python >= 3.11 (tomllib) or the tomli package")
    return tomllib.loads(text)["project"]


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


def locked(lock: Path) -> list[tuple[str, str, list[str]]]:
    """The lock's entries that some supported environment needs: (name, requirement line
    without its marker, hash options). A package locked at two versions for two Pythons
    cannot be bundled once for all of them."""
    from pip._vendor.packaging.markers import Marker

    text = re.sub(r"\\\n\s*", " ", lock.read_text(encoding="utf-8"))  # continuation lines joined
    entries: dict[str, tuple[str, str, list[str]]] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        words = line.split()
        hashes = [w for w in words if w.startswith("--hash=")]
        requirement, _, marker = " ".join(w for w in words if not w.startswith("--hash=")).partition(";")
        if marker.strip() and not any(Marker(marker).evaluate({**env, "extra": ""}) for env in MARKER_ENVS):
            continue
        name = _canonical(requirement.split("==")[0].strip())
        if name in entries and entries[name][1] != requirement.strip():
            sys.exit(f"bundle-server: the lock holds {name} at two versions for different Pythons; one bundle cannot hold both")
        entries[name] = (name, requirement.strip(), hashes)
    return sorted(entries.values())


def install_libs(force: bool) -> str:
    args = [
        "install", "--target", str(LIBS), "--python-version", TARGET_PYTHON,
        "--only-binary=:all:", "--platform", "any", "--implementation", "py", "--abi", "none",
        "--no-deps", "--require-hashes",
        "--no-compile", "--disable-pip-version-check", "--no-input", "--quiet",
    ]
    entries = locked(LOCK)
    key = hashlib.sha256(json.dumps({"lock": entries, "args": args}).encode()).hexdigest()
    if not force and STAMP.exists() and json.loads(STAMP.read_text()).get("key") == key:
        return "reused"
    shutil.rmtree(LIBS, ignore_errors=True)
    LIBS.mkdir(parents=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as wanted:
        wanted.write("".join(f"{requirement} {' '.join(hashes)}\n" for _, requirement, hashes in entries))
    try:
        subprocess.run([sys.executable, "-m", "pip", *args, "-r", wanted.name], check=True)
    finally:
        os.unlink(wanted.name)
    extra = missing_requirements()
    if extra:
        sys.exit(f"bundle-server: the lock lacks what the bundled libraries need ({', '.join(extra)}): run `make lock`")
    shutil.rmtree(LIBS / "bin", ignore_errors=True)  # console scripts of the libraries
    for cache in LIBS.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    native = [p for p in LIBS.rglob("*") if p.suffix in {".so", ".pyd", ".dylib"}]
    if native:
        sys.exit(f"bundle-server: compiled modules cannot be bundled for every platform: {native[:5]}")
    installed = sorted(p.name.removesuffix(".dist-info") for p in LIBS.glob("*.dist-info"))
    STAMP.write_text(json.dumps({"key": key, "installed": installed}, indent=1))
    return "installed " + ", ".join(installed)


def copy_server() -> int:
    dest = BUNDLED / "deep_research"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(REPO / "server" / "deep_research", dest, ignore=IGNORE)
    return sum(1 for _ in dest.rglob("*.py"))


def _names(requirements: list[str]) -> list[str]:
    return [_canonical(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) for d in requirements]


def write_extras() -> list[str]:
    extras = dependencies(bundled=False)
    shutil.copyfile(ON_REQUEST, BUNDLED / ON_REQUEST.name)
    on_request = {}
    for name in ON_REQUEST_EXTRAS:
        lock = REPO / "requirements" / f"{name}.txt"
        shutil.copyfile(lock, BUNDLED / lock.name)
        on_request[name] = {"requirements": extra(name), "names": _names(extra(name)), "lock": lock.name}
    EXTRAS_FILE.write_text(json.dumps({"requirements": extras, "names": _names(extras), "lock": ON_REQUEST.name,
                                       "extras": on_request}, indent=1) + "\n", encoding="utf-8")
    return extras


def main() -> int:
    for flag, bundled in (("--print-bundled", True), ("--print-not-bundled", False)):
        if flag in sys.argv:
            print("\n".join(dependencies(bundled=bundled)))
            return 0
    if "--print-on-request-extras" in sys.argv:
        print(" ".join(ON_REQUEST_EXTRAS))
        return 0
    if "--print-extra" in sys.argv:
        print("\n".join(extra(sys.argv[sys.argv.index("--print-extra") + 1])))
        return 0
    started = time.monotonic()
    if not (REPO / "server" / "deep_research" / "__init__.py").exists():
        sys.exit("bundle-server: server/deep_research is missing")
    libs = install_libs(force="--force" in sys.argv)
    files = copy_server()
    extras = write_extras()
    print(f"bundled the server into {BUNDLED.relative_to(REPO)}: deep_research ({files} .py files); "
          f"libs {libs}; not bundled (installed on request, as locked): {', '.join(extras)}; {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
