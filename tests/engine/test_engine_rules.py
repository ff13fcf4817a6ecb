"""The rules the prompt promises, kept by execution (issue 16): the report's word limit, the
reason of a failure, and a replaced report counted as an update."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deep_research.engine.language.commands import ApprovalMode
from deep_research.engine.research import Research

from dr_engine_support import GOOD_REPORT, REPORT, block, files, line, ok, read, report, statuses

WORDY = GOOD_REPORT.replace("A1: Cache misses.", "A1: " + "word " * 1600)  # 1,618 words


def words_of(text: str) -> int:
    return len(text.split())


def journal(root: Path) -> list[dict]:
    lines = (root / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(x) for x in lines if x.strip()]


# -- the report's word limit ------------------------------------------------------------------


def test_a_report_over_the_limit_fails_and_changes_nothing(research: Research, root: Path) -> None:
    before = files(root)
    result = research.execute(report(WORDY))
    assert statuses(result) == [("write_report", "failed")]
    count = words_of(WORDY)
    assert f"has {count:,} words, over the limit of 1,500 words" in result.reply
    assert f"cut at least {count - 1500:,} words" in result.reply
    assert files(root) == before
    assert not (root / REPORT).exists()


def test_a_report_at_the_limit_is_written(research: Research, root: Path) -> None:
    text = GOOD_REPORT + "\n" + "word " * (1500 - words_of(GOOD_REPORT))
    assert words_of(text) == 1500
    result = research.execute(report(text))
    assert statuses(result) == [("write_report", "ok")]
    assert "(1,500 words)" in result.reply


def test_the_limit_comes_from_the_research_file_and_follows_its_edits(research: Research, root: Path) -> None:
    config = root / "deep-research.toml"
    config.write_text("report_max_words = 200\n", encoding="utf-8")
    text = GOOD_REPORT + "\n" + "word " * 300
    failed = research.analyze(report(text))
    assert "over the limit of 200 words" in failed.outcomes[0].summary
    assert "at most 200 words" in research.prompt()
    config.write_text("report_max_words = 5000\n", encoding="utf-8")
    assert research.analyze(report(text)).outcomes[0].status.value == "ok"
    assert "at most 5,000 words" in research.prompt()


@pytest.mark.parametrize("toml", ["report_max_words = 10\n", "report_max_words = 'many'\n", "report_max_words = [\n"])
def test_an_unusable_limit_is_the_default(research: Research, root: Path, toml: str) -> None:
    (root / "deep-research.toml").write_text(toml, encoding="utf-8")
    assert research.rules().report_max_words == 1500
    assert "at most 1,500 words" in research.prompt()


def test_an_editor_may_override_the_limit(research: Research, root: Path) -> None:
    (root / "deep-research.toml").write_text("report_max_words = 5000\n", encoding="utf-8")
    research.rule_overrides = {"report_max_words": 300}
    result = research.execute(report(GOOD_REPORT + "\n" + "word " * 400))
    assert "over the limit of 300 words" in result.reply


def test_the_prompt_states_the_limit_and_how_to_cite(research: Research) -> None:
    prompt = research.prompt()
    assert "A report is at most 1,500 words" in prompt
    assert "[[Attachment name]]" in prompt


def test_a_hand_written_report_over_the_limit_is_cut_in_the_parent_prompt(research: Research, root: Path) -> None:
    sub = root / "Subproblems" / "Sub A"
    (sub / REPORT).write_text(WORDY, encoding="utf-8")
    prompt = research.prompt()
    assert f"cut at the limit of 1,500 words: {words_of(WORDY) - 1500:,} more words are not shown" in prompt
    assert prompt.count("word ") < 1550


# -- the reason of a failure ---------------------------------------------------------------------


def test_a_failure_reason_on_the_line_becomes_the_report(research: Research, root: Path) -> None:
    ok(research, line("focus_down", "Sub A"))
    result = ok(research, line("fail_task_and_focus_up", "The benchmark data is not public"))
    assert "Reason: The benchmark data is not public" in read(root, "Subproblems", "Sub A", REPORT)
    prompt = result.prompt
    child_reports = prompt[prompt.index("### Child Reports"):prompt.index("### Current Report")]
    assert "#### Sub A (failed)" in child_reports
    assert "Reason: The benchmark data is not public" in child_reports


def test_a_failure_reason_in_the_block_form(research: Research, root: Path) -> None:
    ok(research, line("focus_down", "Sub A"))
    reason = "Three vendors were asked.\nNone publishes its numbers."
    ok(research, block("fail_task_and_focus_up", reason=reason))
    assert reason in read(root, "Subproblems", "Sub A", REPORT)


def test_a_failure_without_reason_says_none_was_given(research: Research, root: Path) -> None:
    ok(research, line("focus_down", "Sub A"))
    result = ok(research, line("fail_task_and_focus_up"))
    assert "No reason was given" in result.reply  # the warning
    assert not (root / "Subproblems" / "Sub A" / REPORT).exists()
    child_reports = result.prompt[result.prompt.index("### Child Reports"):result.prompt.index("### Current Report")]
    assert "#### Sub A (failed)" in child_reports and "No reason was given." in child_reports


def test_a_failure_keeps_the_report_written_before(research: Research, root: Path) -> None:
    ok(research, line("focus_down", "Sub A"))
    ok(research, report())
    ok(research, line("fail_task_and_focus_up", "The numbers turned out wrong"))
    text = read(root, "Subproblems", "Sub A", REPORT)
    assert text.index("Reason: The numbers turned out wrong") < text.index("Conclusion: use 32x32 tiles.")


def test_a_reason_over_the_limit_fails_and_the_focus_stays(research: Research, root: Path) -> None:
    ok(research, line("focus_down", "Sub A"))
    before = files(root)
    result = research.execute(block("fail_task_and_focus_up", reason="word " * 1600))
    assert statuses(result) == [("fail_task_and_focus_up", "failed")]
    assert "The reason has 1,600 words" in result.reply
    assert files(root) == before
    assert research.state().focus == ("Sub A",)


@pytest.mark.parametrize("text, code", [
    ("<<< fail_task_and_focus_up\n///why\nno data\n>>>\n", "unknown-section"),
    ("<<< fail_task_and_focus_up\n///reason\n\n>>>\n", "empty-section"),
])
def test_the_block_form_is_checked(research: Research, text: str, code: str) -> None:
    analysis = research.analyze(text)
    assert code in {d.code for d in analysis.diagnostics}
    assert analysis.outcomes[0].status.value == "failed"


# -- a replaced report is an update ------------------------------------------------------------------


def test_replacing_a_report_is_an_update(research: Research, root: Path) -> None:
    first = research.execute(report(), mode=ApprovalMode.CREATE)
    assert first.executed  # writing the first report is a create
    again = research.execute(report(GOOD_REPORT.replace("32x32", "64x64")), mode=ApprovalMode.CREATE)
    assert not again.executed and again.reason == "needs-approval"
    assert [o.kind.label for o in again.analysis.needing_approval(ApprovalMode.CREATE)] == ["update"]
    assert "32x32" in read(root, REPORT)
    research.execute(report(GOOD_REPORT.replace("32x32", "64x64")), mode=ApprovalMode.UPDATE)
    kinds = [r["kind"] for r in journal(root) if r.get("command") == "write_report"]
    assert kinds == ["create", "update"]
