"""The product says what it runs on (issue 44): `--version` names every library with its
supported range, and a library outside its range is one sentence, not a traceback, in the
commands that need it. The environment that holds a library outside its range is a real one:
a package's metadata (a `.dist-info`) ahead of the installed one on the path, as `pip install`
of another version by hand leaves it."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

from dr_cli_support import cli_command, cli_env


def upgraded_by_hand(folder: Path, name: str, version: str) -> dict[str, str]:
    """An environment in which `name` is at `version` as far as its metadata says."""
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    env = cli_env()
    env["PYTHONPATH"] = f"{folder}:{env['PYTHONPATH']}"
    return env


def deep_research(*args: object, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cli_command(*args), capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


def test_version_names_each_library_with_its_version_and_range(tmp_path: Path) -> None:
    shown = deep_research("--version", env=cli_env(), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("deep-research 0.") and "Python 3." in lines[0]
    for name in ("openai", "httpx", "pygls", "lsprotocol", "mcp", "trafilatura", "pypdf", "markdown-it-py", "ddgs"):
        line = next(line for line in lines if line.strip().startswith(name + " "))
        assert metadata.version(name) in line and "supported: " in line and "outside" not in line, line


def test_a_library_outside_its_range_is_one_sentence_and_nothing_runs(tmp_path: Path) -> None:
    env = upgraded_by_hand(tmp_path / "site", "openai", "99.0.0")
    research = tmp_path / "research"
    assert deep_research("new", research, env=env, cwd=tmp_path).returncode == 0  # no model needed there

    run = deep_research("run", research, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", env=env, cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    sentence = run.stderr.strip()
    assert sentence.count("\n") == 0 and "openai 99.0.0 is installed" in sentence, sentence
    supported = next(r for r in metadata.requires("deep-research") if r.startswith("openai"))
    assert ">=1.40" in sentence and "<4" in sentence and "pip install 'openai>=" in sentence, (sentence, supported)
    # refused before any model call: the endpoint (the discard port) would have been named

    shown = deep_research("--version", env=env, cwd=tmp_path)
    assert "openai 99.0.0 (supported: >=1.40,<4)   <- outside the supported range" in shown.stdout


def test_the_mcp_server_with_mcp_outside_its_range_says_so(tmp_path: Path) -> None:
    env = upgraded_by_hand(tmp_path / "site", "mcp", "1.0.0")
    served = deep_research("mcp", tmp_path, env=env, cwd=tmp_path)
    assert served.returncode == 2 and "mcp 1.0.0 is installed" in served.stderr and "Traceback" not in served.stderr
