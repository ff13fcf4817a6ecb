"""The settings table is the one declaration: the command line, the editors' settings, the
engine's rules and the VS Code manifest all agree with it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from deep_research.cli import add_options, given
from deep_research.engine.language.commands import ApprovalMode
from deep_research.engine.settings.rules import Rules, rules_of
from deep_research.engine.settings.table import FIELDS, SETTINGS, Config, load, read
from deep_research.engine.store import CONFIG_FILE
from deep_research.lsp.config import Settings

REPO = Path(__file__).resolve().parents[2]
CLIENT_ONLY = {"deepResearch.server.pythonPath", "deepResearch.trace.server"}  # read by the extension itself


def _manifest() -> dict:
    return json.loads((REPO / "package.json").read_text(encoding="utf-8"))["contributes"]["configuration"]["properties"]


def _expected(setting) -> dict:
    """What package.json must say of a setting (type, enum, default, bounds)."""
    unset = setting.toml and setting.editor_default is None  # null ("" for a text): the file decides
    kind = {bool: "boolean", int: "integer", str: "string", "choice": "string"}[setting.kind]
    nullable = unset and setting.kind is not str
    out: dict = {"type": [kind, "null"] if nullable else kind}
    if setting.kind == "choice":
        out["enum"] = ([None] if nullable else []) + list(setting.choices)
    if unset:
        out["default"] = None if nullable else ""
    else:
        out["default"] = setting.editor_default if setting.toml else setting.default
    for bound in ("minimum", "maximum"):
        if getattr(setting, bound) is not None:
            out[bound] = getattr(setting, bound)
    return out


def test_the_vscode_manifest_declares_every_editor_setting_as_the_table_does() -> None:
    manifest = _manifest()
    wrong = []
    for setting in SETTINGS:
        if setting.editor_key is None:
            continue
        name = f"deepResearch.{setting.editor_key}"
        declared = manifest.get(name)
        expected = _expected(setting)
        if declared is None:
            wrong.append(f"{name} is missing from package.json; add {json.dumps(expected)}")
            continue
        shown = {k: declared.get(k) for k in expected}
        if shown != expected or not (declared.get("markdownDescription") or declared.get("description")):
            wrong.append(f"{name}: package.json says {json.dumps(shown)}, the table {json.dumps(expected)} "
                         "(and a description)")
    editor_keys = {f"deepResearch.{s.editor_key}" for s in SETTINGS if s.editor_key}
    wrong += [f"{name} is in package.json but not in the settings table" for name in manifest
              if name not in editor_keys | CLIENT_ONLY]
    assert not wrong, "\n".join(wrong)


def test_every_run_option_comes_from_the_table_and_is_checked_by_it() -> None:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_options(parser)
    options = {s.option: s for s in SETTINGS if s.option}
    assert {"--max-rounds", "--approval", "--grammar", "--max-reply-tokens"} <= set(options)
    args = parser.parse_args(["--max-rounds", "7", "--approval", "CREATE", "--grammar", "off"])
    assert given(args) == {"max_rounds": 7, "approval_mode": "create", "grammar": "off"}
    with pytest.raises(argparse.ArgumentError, match="--max-prompt-tokens must be a whole number ≥ 500"):
        parser.parse_args(["--max-prompt-tokens", "20"])


def test_the_engines_rules_are_the_tables_rules(tmp_path: Path) -> None:
    rules = {s.key for s in SETTINGS if s.rule}
    assert set(Rules.__dataclass_fields__) == rules and "report_max_words" in rules
    assert Rules() == Rules(**{key: FIELDS[key].default for key in rules})
    (tmp_path / CONFIG_FILE).write_text("report_max_words = 800\n", encoding="utf-8")
    assert rules_of(read(tmp_path)[0]).report_max_words == 800 == load(tmp_path, {})[0].report_max_words
    (tmp_path / CONFIG_FILE).write_text("report_max_words = 3\n", encoding="utf-8")  # below the minimum: default
    assert rules_of(read(tmp_path)[0]) == Rules()
    config, problems = load(tmp_path, {})
    assert config.report_max_words == FIELDS["report_max_words"].default
    assert problems == [f"{tmp_path / CONFIG_FILE}: `report_max_words` must be a whole number from 100 to 100,000, "
                        "not 3; ignored"]


def test_the_editors_settings_are_the_tables() -> None:
    """Each editor key reads its row, with the row's check; the approval modes are the engine's."""
    assert FIELDS["approval_mode"].choices == tuple(mode.label for mode in ApprovalMode)
    values = {"maxReplyTokens": 300.0, "approvalMode": "Read", "grammar": "ON", "search.url": " http://x "}
    settings = Settings.from_client(values)
    assert settings.values == {"max_reply_tokens": 300, "approval_mode": "read", "grammar": "on", "search.url": "http://x"}
    merged = Config().merged(**settings.overrides())
    assert (merged.max_reply_tokens, merged.grammar, merged.search.url) == (300, "on", "http://x")
    assert Config().merged(**Settings().overrides()) == Config()  # nothing set: the file decides
