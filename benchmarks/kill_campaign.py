#!/usr/bin/env python3
"""kill -9 campaigns: `deep-research execute`, `undo`, `run` (autopilot rounds) and
`run --parallel 4` (researchers at once) killed at random moments, the research opened
again, and checked.

    PYTHONPATH=server python benchmarks/kill_campaign.py [--runs 1000] [--seed 1] [--quick] [execute undo run parallel]

For each kind, a base research is made once, and the uninterrupted operation gives the
reference states (for `run`, one per number of rounds done: the scripted model on loopback
replies the same every time). Each run copies the base, starts the command, and kills it
with SIGKILL either after a random delay within the command's usual duration, or a random
delay after its commit's pending file appears (so that many kills land inside commits).
Then the research is opened as the next command would (`Research.open` finishes an
interrupted commit) and must be exactly one of the reference states (timestamps and run
ids aside), or, for `run`, such a state with the next reply waiting unexecuted in
message.dr; its journal must parse, no pending or temporary file may be left, and its
prompt file must be the prompt of the research as it is. A run that finished before its
kill is checked too and made again, so `--runs` counts runs the kill interrupted (the delay's
window shrinks to the quickest run seen finishing). A `run` is killed in a random round: once
the rounds before it are in the journal, within a round's share of the window or at its
commit. Prints the outcomes per kind;
exit status 1 if any run left anything else. (tests/cli/test_cli_kill.py kills at chosen
points in CI; this is the long campaign.)

`parallel`: `run --parallel 4` on a research whose root delegates 4 subproblems of 3 rounds
each (15 rounds, up to 4 researchers writing at once, against a model on loopback whose reply
depends on the research as it is on disk, so that any interrupted run can be resumed). The
order in which researchers commit varies from run to run, so a killed research is judged by
what must hold of every state a sequence of whole messages leaves, not against reference
snapshots: the checks above, every working researcher's prompt file is its prompt, the
journal has one record per executed message (numbered 1…n, as `state.json` counts them) and
the round records of executed rounds name exactly those messages, and `deep-research check`
is clean. Then every researcher must be resumable: `run --parallel 4` again finishes the
research (a reply left unexecuted in a researcher's document stops that researcher with
exit status 3, as it should; it is then executed with `deep-research execute`, as the message
says, and `run` again must finish), and `check` is clean after it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "server"), str(ROOT)]

from deep_research.engine.research import Research  # noqa: E402
from deep_research.engine.retrieval.layout_store import FOLDER as LAYOUTS  # noqa: E402
from tests.roomy import roomy  # noqa: E402
from tests.scripted_model import WHOLE_RESEARCH, Say, ScriptedModel, by_problem  # noqa: E402

BOOK = ".deep-research"
TMP_MARK = ".tmp-dr-"
COMMAND = [sys.executable, "-m", "deep_research"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "server"), "OPENAI_API_KEY": "scripted"}
DEFINE = "<<< define_problem\n///title\nA wide problem\n///content\nMany parts.\n>>>\n"
VOLATILE = {"started", "ended", "at", "run", "latency_ms", "first_token_ms", "prompt_tokens", "completion_tokens",
            "tokens_estimated", "added", "created", "fetched"}
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?")
_DIGEST = re.compile(r"\b[0-9a-f]{64}\b")
_RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6}")


def large_message(parts: int) -> str:
    text = "Planning the breakdown.\n///add_criteria Every part is covered\n"
    for n in range(parts):
        text += f"<<< add_subproblem\n///title\nPart {n:03d}\n///content\nWhat part {n} must answer.\n>>>\n"
    for n in range(parts):
        text += f"<<< add_attachment\n///name\nSource {n:03d}\n///content\n" + f"Excerpt {n}. " * 40 + "\n>>>\n"
    return text + "<<< append_to_problem_definition\n///content\nScope grew.\n>>>\n"


# -- what a research is, timestamps aside -----------------------------------------------------------------


def normal(value: object) -> object:
    if isinstance(value, dict):
        return {k: normal(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [normal(v) for v in value]
    if isinstance(value, str):
        return _RUN_ID.sub("<run>", _DIGEST.sub("<digest>", _TIME.sub("<time>", value)))
    return value


def snapshot(folder: Path) -> dict[str, object]:
    """Every file and folder, JSON and JSON lines compared without their volatile fields."""
    out: dict[str, object] = {}
    for current, dirs, files in os.walk(folder):
        rel_dir = os.path.relpath(current, folder)
        if rel_dir == BOOK:  # the parts' layouts: derived, written by whoever divides (engine/retrieval/layout_store.py)
            dirs[:] = [d for d in dirs if d != LAYOUTS]
        out[rel_dir + "/"] = None
        for name in files:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel == f"{BOOK}/lock" or (rel_dir in (".", BOOK) and name.startswith(TMP_MARK)) \
                    or re.fullmatch(rf"{BOOK}/undo/\d+\.\d+\.before", rel) or rel.startswith(f"{BOOK}/index.sqlite3"):
                continue  # not state: the lock; temporaries the next commit sweeps; undo's spare links; the
                # search index (derived, written after the commit: tests/crash checks the next find)
            text = Path(current, name).read_bytes().decode("utf-8", errors="replace")
            if name.endswith(".json"):
                out[rel] = normal(json.loads(text))
            elif name.endswith(".jsonl"):
                out[rel] = [normal(json.loads(line)) for line in text.splitlines() if line.strip()]
            else:
                out[rel] = normal(text)
    return out


def problems_of(folder: Path) -> list[str]:
    """What must hold of any research once opened after a kill, whatever state it is in."""
    research = Research.open(folder)  # as the next command: finishes an interrupted commit
    found = []
    if (folder / BOOK / "pending.json").exists():
        found.append("a pending file is left")
    left = [str(p.relative_to(folder)) for p in folder.rglob(f"{TMP_MARK}*")
            if p.parent not in (folder, folder / BOOK)]  # there, the next commit sweeps them
    if left:
        found.append(f"temporary files are left: {left[:3]}")
    journal = folder / BOOK / "journal.jsonl"
    if journal.exists():
        text = journal.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            found.append("the journal ends with a torn line")
        for number, line in enumerate(text.splitlines(), 1):
            try:
                json.loads(line)
            except ValueError:
                found.append(f"journal line {number} does not parse")
                break
    if (folder / BOOK / "prompt.md").read_text(encoding="utf-8") != research.prompt():
        found.append("prompt.md is not the prompt of the research")
    return found


# -- the three kinds ----------------------------------------------------------------------------------------


class Kind:
    name = ""

    def __init__(self, work: Path, parts: int, rounds: int) -> None:
        self.work = work
        self.parts = parts
        self.rounds = rounds
        self.base = work / f"{self.name}-base"
        self.references: dict[str, dict] = {}
        self.duration = 0.0

    def command(self, folder: Path) -> list[str]:
        raise NotImplementedError

    def reset(self) -> None:
        """Before each run (the autopilot's model starts its script again)."""

    def run_to_end(self, folder: Path, *extra: str) -> None:
        self.reset()
        started = time.perf_counter()
        command = self.command(folder)
        if extra:  # `run` with fewer rounds, for the references
            command = command[:-2] + list(extra)
        done = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=600)
        assert done.returncode in (0, 4), done.stderr  # 4: `run` stopped at --max-rounds
        self.duration = max(self.duration, time.perf_counter() - started)

    def reference(self, name: str, build) -> None:
        folder = self.work / f"{self.name}-{name}"
        shutil.copytree(self.base, folder)
        build(folder)
        Research.open(folder)
        self.references[name] = snapshot(folder)

    def judge(self, folder: Path) -> str | None:
        now = snapshot(folder)
        for name, reference in self.references.items():
            if now == reference:
                return name
        return None

    def close(self) -> None:
        pass


class Execute(Kind):
    name = "execute"

    def prepare(self) -> None:
        research = Research.create(self.base, "Cover everything.", [("Background", "Context text.")])
        roomy(self.base)  # a message of many subproblems: past the default budget
        assert research.execute(DEFINE).executed
        (self.base / "message.dr").write_text(large_message(self.parts), encoding="utf-8")
        self.references["before"] = snapshot(self.base)
        self.reference("after", lambda folder: self.run_to_end(folder))

    def command(self, folder: Path) -> list[str]:
        return COMMAND + ["execute", str(folder / "message.dr")]


class Undo(Kind):
    name = "undo"

    def prepare(self) -> None:
        research = Research.create(self.base, "Cover everything.", [("Background", "Context text.")])
        roomy(self.base)
        assert research.execute(DEFINE).executed
        assert research.execute(large_message(self.parts), consume=self.base / "message.dr").executed
        self.references["before"] = snapshot(self.base)
        self.reference("after", lambda folder: self.run_to_end(folder))

    def command(self, folder: Path) -> list[str]:
        return COMMAND + ["undo", str(folder)]


class Run(Kind):
    """`deep-research run` through the whole scripted research (five rounds)."""

    name = "run"

    def prepare(self) -> None:
        self.model = ScriptedModel().start()
        Research.create(self.base, "Find the clearest tiled matrix multiplication for teaching.")
        (self.base / "deep-research.toml").write_text(
            f'base_url = "{self.model.base_url}"\nmodel = "scripted-model"\ngrammar = "off"\napproval_mode = "delete"\n')
        self.references["0 rounds"] = snapshot(self.base)
        for rounds in range(1, self.rounds + 1):
            self.reference(f"{rounds} rounds", lambda folder, r=rounds: self.run_to_end(folder, "--max-rounds", str(r)))
        self.drafts = {f"{r} rounds": WHOLE_RESEARCH[r] for r in range(self.rounds)}

    def reset(self) -> None:
        with self.model._changed:
            self.model.steps[:] = [Say(text) for text in WHOLE_RESEARCH]

    def command(self, folder: Path) -> list[str]:
        return COMMAND + ["run", str(folder), "--max-rounds", str(self.rounds)]

    def judge(self, folder: Path) -> str | None:
        found = super().judge(folder)
        if found is not None:
            return found
        now = snapshot(folder)
        waiting = (now.get("message.dr") or "").strip()
        for name, draft in self.drafts.items():  # the next reply written, not yet executed
            reference = self.references[name]
            # (cut after its focus change, if it has one: the stream stops there)
            if waiting and normal(draft).startswith(waiting) and {**now, "message.dr": reference["message.dr"]} == reference:
                return f"{name} + a reply waiting"
        return None

    def close(self) -> None:
        self.model.stop()


class Parallel(Kind):
    """`deep-research run --parallel 4`: a root that delegates 4 subproblems of 3 rounds each."""

    name = "parallel"
    ROOT = "Caches and tiling"
    PARTS, ROUNDS = 4, 3  # subproblems the root delegates; rounds of each delegated researcher

    def prepare(self) -> None:
        self.folder: Path | None = None  # the research the model answers about now
        self.model = ScriptedModel(respond=self.respond).start()
        Research.create(self.base, "Find how caches shape tiled matrix multiplication.")
        (self.base / "deep-research.toml").write_text(
            f'base_url = "{self.model.base_url}"\nmodel = "scripted-model"\ngrammar = "off"\napproval_mode = "delete"\n')
        roomy(self.base)  # four researchers at once: past the default max_breadth (3)
        self.resumed = Counter()
        folder = self.work / f"{self.name}-reference"
        shutil.copytree(self.base, folder)
        self.folder = folder
        self.run_to_end(folder)  # the uninterrupted run: its time is the kill's window
        assert self.finished(folder), "the uninterrupted parallel run did not finish"

    def part(self, n: int) -> str:
        return f"Part {n + 1}"

    def respond(self, body: dict):
        """The model: its reply depends on the research on disk (no recovery here: the run's
        process owns the research; a researcher's own problem is as its last message left it)."""
        title = by_problem(body)
        research = Research(self.folder)
        if title is None:
            return Say(f"<<< define_problem\n///title\n{self.ROOT}\n///content\nWhich tiling suits which cache?\n>>>\n")
        if title == self.ROOT:
            if not research.tree.children(()):
                parts = "".join(f"<<< add_subproblem\n///title\n{self.part(n)}\n///content\nPart {n + 1} of it.\n>>>\n"
                                for n in range(self.PARTS))
                delegate = "".join(f"///delegate {self.part(n)}\n" for n in range(self.PARTS))
                return Say("Independent parts.\n///add_criteria Every part is answered\n" + parts + delegate)
            return Say("All in.\n///mark_criteria_as_done 1\n<<< write_report\n///content\nSummarized problem "
                       "definition: caches and tiling.\nConclusion: every part is answered.\n>>>\n///focus_up\n")
        problem = next((p for p in research.tree.children(()) if p.title == title), None)
        done = len(problem.criteria) if problem is not None else 0
        if done < self.ROUNDS - 1:
            return Say(f"A finding.\n///add_criteria Finding {done + 1} of {title} holds\n")
        marks = "".join(f"///mark_criteria_as_done {i}\n" for i in range(1, done + 1))
        return Say(f"{marks}<<< write_report\n///content\nSummarized problem definition: {title}.\nConclusion: "
                   "settled.\n>>>\n///focus_up\n")

    def reset(self) -> None:
        pass

    def command(self, folder: Path) -> list[str]:
        self.folder = folder
        return COMMAND + ["run", str(folder), "--parallel", "4", "--max-rounds", "100"]

    @staticmethod
    def finished(folder: Path) -> bool:
        return json.loads((folder / BOOK / "state.json").read_text(encoding="utf-8")).get("phase") == "finished"

    def judge(self, folder: Path) -> str | None:
        problems = invariants(folder)
        if problems:
            print(f"    {folder}: {problems}", flush=True)
            return None
        state = json.loads((folder / BOOK / "state.json").read_text(encoding="utf-8"))
        label = f"{state.get('messages', 0)} messages"
        waiting = [str(p.relative_to(folder)) for p in folder.rglob("message.dr") if p.read_text(encoding="utf-8").strip()]
        # Every researcher resumable: run again (on a copy: the killed research stays as it was).
        resumed = folder.with_name(folder.name + "-resumed")
        shutil.rmtree(resumed, ignore_errors=True)
        shutil.copytree(folder, resumed)
        self.folder = resumed
        how = self.resume(resumed)
        self.folder = folder
        if how is None:
            return None
        shutil.rmtree(resumed, ignore_errors=True)
        self.resumed[how] += 1
        return label + (f", {len(waiting)} reply waiting" if waiting else "") + f"; {how}"

    def resume(self, folder: Path) -> str | None:
        """`run --parallel 4` again until it finishes (a reply waiting in a document is executed
        as the message says); None if the research cannot be finished, or `check` finds anything."""
        executed = 0
        for _ in range(self.PARTS + 2):
            done = subprocess.run(self.command(folder), env=ENV, capture_output=True, text=True, timeout=600)
            if done.returncode == 0:
                break
            if done.returncode != 3:
                print(f"    resume of {folder} failed ({done.returncode}): {done.stdout[-500:]} {done.stderr[-500:]}")
                return None
            for document in folder.rglob("message.dr"):
                if document.read_text(encoding="utf-8").strip():
                    ran = subprocess.run(COMMAND + ["execute", str(document)], env=ENV, capture_output=True, text=True,
                                         timeout=120)
                    executed += 1
                    if ran.returncode not in (0, 1):  # 1: a command in it failed (it ran, the model is told)
                        print(f"    execute {document} failed ({ran.returncode}): {ran.stdout[-300:]} {ran.stderr[-300:]}")
                        return None
        else:
            return None
        check = subprocess.run(COMMAND + ["check", str(folder)], env=ENV, capture_output=True, text=True, timeout=120)
        if not self.finished(folder) or check.returncode != 0:
            print(f"    resumed {folder}: finished {self.finished(folder)}, check {check.returncode}: {check.stdout[-500:]}")
            return None
        return "resumed" + (f" after executing {executed} waiting repl{'y' if executed == 1 else 'ies'}" if executed else "")

    def close(self) -> None:
        self.model.stop()


def invariants(folder: Path) -> list[str]:
    """What must hold of any state of a parallel research after a kill (beyond `problems_of`)."""
    found = problems_of(folder)
    research = Research.open(folder)
    for researcher in research.researchers():
        prompt_file = research.prompt_file(researcher.name)
        if researcher.name != "main" and (not prompt_file.exists()
                                          or prompt_file.read_text(encoding="utf-8") != research.prompt(researcher=researcher.name)):
            found.append(f"the prompt of {researcher.name} is not its prompt")
    state = research.state()
    journal = folder / BOOK / "journal.jsonl"
    records = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines()] if journal.exists() else []
    numbers = sorted({r["message"] for r in records if r.get("record") != "round" and isinstance(r.get("message"), int)})
    if numbers != list(range(1, state.messages + 1)):
        found.append(f"the journal's messages {numbers[:3]}…{numbers[-3:]} are not 1…{state.messages}")
    executed = sorted(r["message"] for r in records if r.get("record") == "round" and r.get("message") is not None)
    if len(executed) != len(set(executed)) or not set(executed) <= set(numbers):
        found.append("round records name messages more than once, or ones that did not run")
    check = subprocess.run(COMMAND + ["check", str(folder)], env=ENV, capture_output=True, text=True, timeout=120)
    if check.returncode != 0:
        found.append(f"check: {check.stdout.strip()[:300]}")
    return found


KINDS = {"execute": Execute, "undo": Undo, "run": Run, "parallel": Parallel}


def rounds_recorded(journal: Path) -> int:
    try:
        return journal.read_bytes().count(b'"record": "round"')
    except OSError:
        return 0


def campaign(kind: Kind, runs: int, rng: random.Random, log) -> tuple[Counter, list[str], int]:
    """`runs` runs that the kill interrupted; a run that finished before its kill is checked
    too and run again (at most 3 x `runs` in all). Returns the outcomes, the failures and the
    number of runs made."""
    outcomes: Counter = Counter()
    failures: list[str] = []
    # The kill lands within this window: the reference runs' duration at first, then the
    # quickest run seen to finish (the first, cold run is several times slower than the rest).
    window = kind.duration
    kills = number = 0
    while kills < runs and number < 3 * runs:
        number += 1
        folder = kind.work / f"{kind.name}-run"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(kind.base, folder)
        kind.reset()
        at_commit = rng.random() < 0.5
        process = subprocess.Popen(kind.command(folder), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.perf_counter()
        share = 1.0
        if isinstance(kind, (Run, Parallel)):  # a random round: wait until the rounds before it are recorded
            total = kind.rounds if isinstance(kind, Run) else Parallel.PARTS * Parallel.ROUNDS + 3
            target, share = rng.randint(1, total), 1 / total
            journal = folder / BOOK / "journal.jsonl"
            while process.poll() is None and rounds_recorded(journal) < target - 1:
                time.sleep(0.002)
        if at_commit:  # wait for a commit point, then a little
            pending = folder / BOOK / "pending.json"
            while process.poll() is None and not pending.exists():
                time.sleep(0.0005)
            delay = rng.uniform(0, 0.05)
        else:
            delay = rng.uniform(0, window * share)
        deadline = time.perf_counter() + delay
        while process.poll() is None and time.perf_counter() < deadline:
            time.sleep(0.0005)
        process.send_signal(signal.SIGKILL)
        process.wait()
        killed = process.returncode == -signal.SIGKILL
        if killed:
            kills += 1
        else:
            window = min(window, time.perf_counter() - started)
        try:
            problems = problems_of(folder)
            verdict = kind.judge(folder)
        except Exception as error:  # the research cannot even be opened: a finding
            problems, verdict = [f"{type(error).__name__}: {error}"], None
        label = ("killed" if killed else "finished") + (" at a commit" if at_commit and killed else "")
        outcomes[f"{label} -> {verdict or 'INCONSISTENT'}"] += 1
        if verdict is None or problems:
            kept = kind.work / f"{kind.name}-failure-{number}"
            shutil.copytree(folder, kept)
            failures.append(f"{kind.name} run {number} ({label} after {time.perf_counter() - started:.2f} s): "
                            f"{verdict or 'matches no reference'}; {problems} (kept in {kept})")
            log(f"  FAILURE {failures[-1]}")
        if killed and kills % 100 == 0:
            log(f"  {kind.name}: {kills} runs killed ({number} made), {len(failures)} failures")
    return outcomes, failures, number


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs killed per kind")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--parts", type=int, default=20, help="subproblems and attachments of the large message")
    parser.add_argument("--rounds", type=int, default=len(WHOLE_RESEARCH), help="autopilot rounds per run (at most 5)")
    parser.add_argument("--quick", action="store_true", help="3 kills per kind (1 of parallel), a small message, 1 round (CI)")
    parser.add_argument("kinds", nargs="*", choices=[[], *KINDS], default=[])
    args = parser.parse_args()
    runs, parts, rounds = (3, 5, 1) if args.quick else (args.runs, args.parts, min(args.rounds, len(WHOLE_RESEARCH)))
    rng = random.Random(args.seed)
    total_failures = 0
    with tempfile.TemporaryDirectory(prefix="kill-campaign-") as tmp:
        for name in args.kinds or list(KINDS):
            kind = KINDS[name](Path(tmp), parts, rounds)
            try:
                kind.prepare()
                started = time.perf_counter()
                # --quick: one kill of the parallel research, whose every run resumes all 15 rounds
                kills = 1 if args.quick and name == "parallel" else runs
                outcomes, failures, made = campaign(kind, kills, rng, lambda line: print(line, flush=True))
            finally:
                kind.close()
            total_failures += len(failures)
            killed = sum(count for outcome, count in outcomes.items() if outcome.startswith("killed"))
            print(f"{name}: {killed} runs killed by kill -9, {made - killed} more finished before their kill (checked "
                  f"too), in {time.perf_counter() - started:.0f} s (the first uninterrupted run took "
                  f"{kind.duration:.2f} s): {len(failures)} inconsistent", flush=True)
            for outcome, count in sorted(outcomes.items()):
                print(f"  {count:5d}  {outcome}")
            if failures and args.quick:
                return 1
    return 1 if total_failures else 0


if __name__ == "__main__":
    sys.exit(main())
