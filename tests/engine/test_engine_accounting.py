"""Accounting per problem from the journal (engine/tree/accounting.py), and `tree --stats`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deep_research.engine.research import Research
from deep_research.engine.tree.accounting import IDLE, Figures, Ledger, markdown, summary

from dr_engine_support import BOOK, define, line, subproblem

T0 = datetime(2026, 1, 1, 10, 0, 0, tzinfo=timezone.utc)
REPO = Path(__file__).resolve().parents[2]


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="microseconds")


def command(message: int, problem: list[str], name: str, status: str, ended: float, index: int = 1) -> dict:
    return {"message": message, "session": 1, "index": index, "line": index, "command": name, "kind": "create",
            "arguments": {}, "problem": problem, "started": at(ended - 0.01), "ended": at(ended), "status": status,
            "result": "done" if status == "ok" else None, "error": None if status == "ok" else "why", "warnings": []}


def round_(message: int | None, problem: list[str], ended: float, prompt: int, completion: int, estimated=False) -> dict:
    return {"record": "round", "run": "r1", "round": 1, "message": message, "session": 1, "problem": problem,
            "model": "m", "prompt_tokens": prompt, "completion_tokens": completion, "tokens_estimated": estimated,
            "latency_ms": 900, "first_token_ms": 100, "finish_reason": "stop", "outcome": "executed",
            "commands": {"ok": 1, "failed": 0, "skipped": 0}, "error": None, "started": at(ended - 1), "ended": at(ended)}


# A session written by hand: every figure below follows from these records alone.
SCRIPT = [
    command(1, [], "define_problem", "ok", 0),
    round_(2, [], 60, 1000, 100),                                                   # root +60 s
    command(2, [], "add_subproblem", "ok", 90, 1),                                  # root +30 s
    command(2, [], "add_criteria", "ok", 90.5, 2),                                  # root +0.5 s
    command(2, [], "mark_criteria_as_done", "failed", 91, 3),                       # root +0.5 s
    command(3, [], "focus_down", "ok", 100),                                        # root +9 s
    command(4, ["A"], "add_criteria", "ok", 400),                                   # A +300 s
    round_(5, ["A"], 3400, 2000, 300, estimated=True),                              # A +IDLE (a long break)
    command(5, ["A"], "focus_up", "ok", 3460),                                      # A +60 s
    {"record": "undo", "message": 5, "session": 2, "problem": [], "started": at(3500), "ended": at(3500)},
    {"message": 5, "session": 3, "command": "reopen", "kind": "update", "started": at(9000), "ended": at(9000),
     "status": "ok", "result": "The user reopened the research.", "error": None},
    command(6, [], "add_criteria", "ok", 9030, 1),                                  # root +30 s
    command(6, [], "add_criteria", "skipped", 9030, 2),
    {"message": 6, "session": 3, "command": "SHUT_DOWN_DEEP_RESEARCHER", "kind": "update", "started": at(9031),
     "ended": at(9031), "status": "ok", "result": "shut down", "error": None},        # root +1 s, no problem field
    {"record": "a-kind-from-the-future", "ended": at(9100)},
]
NOISE = ["not json", "[1, 2]", '{"message": "seven", "status": "ok"}', '{"record": "round", "problem": "A", '
         '"prompt_tokens": "many", "ended": "yesterday"}', "", '"just a string"']


def write_journal(root: Path, records: list[dict], noise: list[str] = ()) -> Path:
    path = root / BOOK / "journal.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in records]
    for index, junk in enumerate(noise):
        lines.insert(1 + 2 * index, junk)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_figures_of_a_hand_written_session(tmp_path: Path) -> None:
    write_journal(tmp_path, SCRIPT, NOISE)
    ledger = Ledger(tmp_path)
    root, a = ledger.own(()), ledger.own(("A",))
    # The damaged round record of the noise still counts as a round (of the focus then), without tokens.
    assert root == Figures(messages=4, undone=0, commands=7, failed=1, skipped=1, seconds=pytest.approx(131),
                           rounds=2, prompt_tokens=1000, completion_tokens=100, estimated=False)
    assert a == Figures(messages=2, undone=1, commands=2, failed=0, skipped=0, seconds=pytest.approx(360 + IDLE),
                        rounds=1, prompt_tokens=2000, completion_tokens=300, estimated=True)
    total = ledger.total(())
    assert (total.messages, total.undone, total.commands, total.failed, total.rounds, total.tokens) == (6, 1, 9, 1, 3, 3400)
    assert total.seconds == pytest.approx(131 + 360 + IDLE) and total.estimated
    assert ledger.total(("A",)) == a and ledger.total(("B",)) == Figures()
    assert summary(total) == "6 messages (1 undone) · 9 commands (1 failed) · 38 min in focus · 3 model rounds, ~3,400 tokens"
    text = markdown(a, "this subproblem")
    assert "- Messages: 2 (1 undone)" in text and "- Model rounds: 1, tokens: 2,300 (2,000 prompt + 300 completion) (partly estimated)" in text
    assert summary(Figures()) == "no activity yet"


def test_the_ledger_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = write_journal(tmp_path, SCRIPT[:6])
    ledger = Ledger(tmp_path)
    assert ledger.total(()).messages == 3 and ledger.events == 6
    assert ledger.refresh() is False  # unchanged: not even opened
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(SCRIPT[6]) + "\n" + json.dumps(SCRIPT[7])[:40])  # a torn last line
    assert ledger.total(()).messages == 4 and ledger.events == 7
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(SCRIPT[7])[40:] + "\n")
    assert ledger.total(("A",)).rounds == 1 and ledger.events == 8
    # Rewritten rather than appended to (a journal replaced by a copy): read again from the start.
    write_journal(tmp_path, SCRIPT[:2] + [command(2, ["Z"], "add_criteria", "failed", 5)] + [{"x": 1}] * 20)
    assert ledger.total(()).failed == 1 and ledger.own(("Z",)).failed == 1 and ledger.own(("A",)) == Figures()
    path.unlink()
    assert ledger.total(()) == Figures()


def test_figures_of_a_scripted_session_match_its_journal(tmp_path: Path) -> None:
    research = Research.create(tmp_path / "research")
    messages = [
        define(),
        line("add_criteria", "One") + subproblem("Leaf") + line("mark_criteria_as_done", "4"),
        line("focus_down", "Leaf"),
        line("add_criteria", "Leaf one") + line("mark_criteria_as_done", "1") + line("focus_up"),
        line("add_criteria", "Two") + line("focus_down", "Nope") + line("add_criteria", "after"),
        line("add_criteria", "Undone"),
    ]
    for text in messages:
        research.execute(text)
    research.undo()
    journal = research.root / BOOK / "journal.jsonl"
    with open(journal, "a", encoding="utf-8") as handle:  # the autopilot's records, by hand
        handle.write(json.dumps(round_(None, ["Leaf"], 0, 500, 50)) + "\n")
        handle.write(json.dumps(round_(None, [], 0, 700, 70)) + "\n")
    records = [json.loads(x) for x in journal.read_text(encoding="utf-8").splitlines()]
    commands = [r for r in records if "record" not in r]
    ledger = Ledger(research.root)
    for path in [(), ("Leaf",)]:
        mine = [r for r in commands if tuple(r.get("problem", [])) == path]
        figures = ledger.own(path)
        assert figures.messages == len({r["message"] for r in mine})
        assert figures.commands == sum(r["status"] in ("ok", "failed") for r in mine)
        assert figures.failed == sum(r["status"] == "failed" for r in mine)
        assert figures.skipped == sum(r["status"] == "skipped" for r in mine)
        rounds = [r for r in records if r.get("record") == "round" and tuple(r["problem"]) == path]
        assert (figures.rounds, figures.tokens) == (len(rounds), sum(r["prompt_tokens"] + r["completion_tokens"] for r in rounds))
    assert ledger.own(()).undone == 1 == Counter(r.get("record") for r in records)["undo"]
    assert ledger.total(()).messages == len(messages)


def test_tree_stats_on_the_command_line(tmp_path: Path) -> None:
    research = Research.create(tmp_path / "research")
    for text in [define(), subproblem("Leaf") + line("add_criteria", "One"), line("focus_down", "Leaf"),
                 line("mark_criteria_as_done", "3")]:
        research.execute(text)
    with open(research.root / BOOK / "journal.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(round_(None, ["Leaf"], 0, 1200, 34)) + "\n")
    env = {"PYTHONPATH": str(REPO / "server"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "deep_research", "tree", str(research.root), "--stats"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("How fast is tiled matrix multiplication [0/1] (open)  · 4 messages · 5 commands (1 failed) · ")
    assert lines[0].endswith("1 model round, 1,234 tokens")
    assert lines[1].startswith("└── Leaf [0/0] (open)  ◀ focus  · 1 message · 1 command (1 failed) · ")
    assert "count each problem with its subproblems" in done.stdout
    plain = subprocess.run([sys.executable, "-m", "deep_research", "tree", str(research.root)],
                           capture_output=True, text=True, env=env, timeout=60)
    assert "·" not in plain.stdout


def test_adding_figures_adds_every_field() -> None:
    from dataclasses import fields

    one = Figures(**{f.name: (True if f.type in (bool, "bool") else 1) for f in fields(Figures)})
    total = Figures()
    total.add(one)
    total.add(one)
    assert total == Figures(**{f.name: (True if f.type in (bool, "bool") else 2) for f in fields(Figures)})


def test_rolled_up_figures_follow_each_appended_record(tmp_path: Path) -> None:
    path = write_journal(tmp_path, SCRIPT[:1])
    ledger = Ledger(tmp_path)
    for record in SCRIPT[1:] + [command(7, ["A", "B"], "add_criteria", "failed", 9200)]:
        before = [ledger.total(p) for p in [(), ("A",), ("A", "B")]]  # rolled up before the record
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        fresh = Ledger(tmp_path)
        for p in [(), ("A",), ("A", "B")]:
            assert ledger.total(p) == fresh.total(p), (record, p)
        assert before is not None


def test_a_hover_does_not_wait_for_a_long_first_reading(tmp_path: Path) -> None:
    write_journal(tmp_path, SCRIPT)
    ledger = Ledger(tmp_path)
    with ledger._lock:  # stands for a reading under way in the background
        ledger._warm.clear()
        assert ledger.total_if_ready((), wait=0.01) is None
        ledger._warm.set()
        assert ledger.total_if_ready((), wait=0.01) is None  # still locked
    assert ledger.total_if_ready(()).messages == 6
    ledger = Ledger(tmp_path)
    ledger.warm_up()
    assert ledger.total_if_ready(("A",), wait=10).messages == 2


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**12) | st.floats(allow_nan=True) | st.text(max_size=20)
    | st.sampled_from(["2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00", "round", "undo",
                       "ok", "failed", "skipped", "reopen"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=5,
)
_KEYS = ["record", "message", "problem", "command", "status", "started", "ended", "prompt_tokens",
         "completion_tokens", "tokens_estimated"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=7) | _VALUES, max_size=15))
def test_any_journal_gives_figures(tmp_path: Path, records: list) -> None:
    path = tmp_path / BOOK / "journal.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    ledger = Ledger(tmp_path)
    total = ledger.total(())
    assert total.messages >= 0 and total.tokens >= 0 and total.seconds >= 0
    summary(total)
