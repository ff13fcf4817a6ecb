"""Record a scenario, build every crash state the persistence model allows, and check the
research in each (tests/crash/disk.py has the model; docs/decisions.md says why).

For each distinct state (many crash states leave the same disk), in a scratch copy:

1. the research is opened as the next process would (`Research.open`, which finishes an
   interrupted commit);
2. its files (and folders) are exactly those before the recorded operation or after it
   (or a state the scenario names as consistent, e.g. the autopilot's unexecuted reply);
   at the last crash point, when the operation had returned, only "after" will do;
3. the journal parses (only a torn last line may not, and is ignored);
4. the prompt file is the prompt rendered from the research as it is;
5. the next message runs, and the research opens again with a matching prompt;
6. nothing next to the research changed.

Lock files, temporary files and undo's links of a message that never committed are not
part of the research's state (the next commit, or export, removes them: checked).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from deep_research.engine.core.state import Phase
from deep_research.engine.research import NotAResearch, Research
from deep_research.engine.retrieval.index import INDEX_FILE
from deep_research.engine.retrieval.layout_store import FOLDER as LAYOUTS

from .disk import CrashState, Image, crash_states, read_image
from .recorder import Recorder
from .scenarios import RESEARCH, Scenario

BOOK = ".deep-research"
TMP_MARK = ".tmp-dr-"


@dataclass
class Result:
    scenario: str
    operations: int
    states: int = 0  # crash states built
    distinct: int = 0  # distinct disks among them, each checked
    kills: int = 0  # kill points whose recovery was recorded and replayed too
    outcomes: dict[str, int] = field(default_factory=dict)  # distinct states per verdict
    inconsistent: list[str] = field(default_factory=list)  # one line per failing state
    outside: list[str] = field(default_factory=list)  # recorded calls outside the sandbox
    seconds: float = 0.0

    def line(self) -> str:
        verdicts = ", ".join(f"{n} {name}" for name, n in sorted(self.outcomes.items()))
        return (f"{self.scenario:<11} {self.operations:>4} operations {self.kills:>4} recoveries "
                f"{self.states:>7,} crash states {self.distinct:>6,} distinct, checked  "
                f"{len(self.inconsistent)} inconsistent  ({verdicts}; {self.seconds:.1f} s)")


def scratch_base() -> Path:
    """Where crash states are written to be checked: memory if the machine has it (fsync is
    free there, and the checks fsync), else the temporary folder."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def record(scenario: Scenario, folder: Path, full: bool) -> Recorder:
    sandbox = folder / "sandbox"
    with scenario.prepare(sandbox, full) as act:
        recorder = Recorder(sandbox)
        with recorder.recording():
            act(recorder.mark)
    _same_as_model(recorder, sandbox)
    return recorder


def record_recovery(image: Image, folder: Path) -> Recorder:
    """Materialize `image` (what a kill left: the page cache) and record the research being
    opened from it (`Research.open` finishes the interrupted commit)."""
    sandbox = folder / "sandbox"
    shutil.rmtree(sandbox, ignore_errors=True)
    sandbox.mkdir(parents=True)
    image.materialize(sandbox)
    recorder = Recorder(sandbox, image)
    with recorder.recording():
        Research.open(sandbox / RESEARCH)
    _same_as_model(recorder, sandbox)
    return recorder


def _same_as_model(recorder: Recorder, sandbox: Path) -> None:
    real = read_image(sandbox)
    if real.files() != recorder.model.files() or real.folders != recorder.model.folders:
        raise AssertionError(f"the recorder's model differs from the disk in {sandbox}")


def run(scenario: Scenario, *, full: bool = False, kill_stride: int | None = 8,
        log: Callable[[str], None] = print, max_failures: int = 5) -> Result:
    """Record the scenario and check every crash state. With `kill_stride`, also every
    `kill_stride`-th point at which a kill leaves a pending commit (1: all of them): the
    recovery that the next open does is recorded after the kill, and a power loss at any
    point of it is replayed too."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"crash-{scenario.name}-") as recorded, \
            tempfile.TemporaryDirectory(prefix=f"crash-{scenario.name}-", dir=scratch_base()) as scratch:
        recorder = record(scenario, Path(recorded), full)
        ops, initial = recorder.ops, recorder.initial
        result = Result(scenario.name, len(ops), outside=list(recorder.outside))
        marks = {f"after mark {n}": CrashState(k).build(initial, ops) for n, k in enumerate(recorder.marks, 1)
                 if k < len(ops)}
        checker = Checker(scenario, Path(scratch), initial, recorder.model, marks)
        seen: set[str] = set()  # disks checked
        checked: set[tuple[str, str]] = set()  # (disk, what it had to be: "" if anything consistent)

        def check_all(sequence: list, points: range | None, done: int, end: Snapshot) -> None:
            """`done`: the crash point from which the operation had returned, and `end` what
            the research must then be."""
            end_key = _digest(end)
            for state in crash_states(sequence, points):
                result.states += 1
                image = state.build(initial, sequence)
                key = image.digest()
                final = state.point >= done
                task = (key, end_key if final else "")
                if task in checked:
                    continue
                checked.add(task)
                first = key not in seen
                seen.add(key)
                verdict, problems = checker.check(image, end if final else None)
                if first:
                    result.outcomes[verdict] = result.outcomes.get(verdict, 0) + 1
                if problems:
                    result.inconsistent.append(f"{state.explain(sequence, initial)}: {'; '.join(problems)}")
                    if len(result.inconsistent) <= max_failures:
                        log(f"  INCONSISTENT {scenario.name}: {result.inconsistent[-1]}")

        check_all(ops, None, len(ops), checker.after)
        if kill_stride:
            pending = f"{RESEARCH}/{BOOK}/pending.json"
            killed = [k for k in range(len(ops) + 1) if pending in CrashState(k).build(initial, ops).names]
            for k in killed[::kill_stride]:
                recovery = record_recovery(CrashState(k).build(initial, ops), Path(recorded) / "recovery")
                result.outside += recovery.outside
                sequence = ops[:k] + recovery.ops
                end = checker.reference(CrashState(len(sequence)).build(initial, sequence))[0]
                check_all(sequence, range(k + 1, len(sequence) + 1), len(sequence), end)
                result.kills += 1
        result.distinct = len(seen)
    result.seconds = time.perf_counter() - started
    return result


# -- checking one state ---------------------------------------------------------------------------------


Snapshot = dict  # path relative to the sandbox -> bytes (a folder: path + "/" -> None)


def snapshot(sandbox: Path, *, garbage: bool = False) -> Snapshot:
    out: Snapshot = {}
    spare = set(_spare_links(sandbox / RESEARCH)) if not garbage else set()
    for current, dirs, files in os.walk(sandbox):
        rel = os.path.relpath(current, sandbox)
        if rel != "." and (garbage or not _garbage(rel + "/")):
            out[rel + "/"] = None
        for name in files:
            path = os.path.join(rel, name) if rel != "." else name
            if not garbage and (_garbage(path) or path in spare):
                continue
            with open(os.path.join(sandbox, path), "rb") as handle:
                out[path] = handle.read()
    return out


def _digest(snap: Snapshot) -> str:
    h = hashlib.sha256()
    for path, data in sorted(snap.items()):
        h.update(path.encode() + b"\0" + (b"D" if data is None else b"F" + hashlib.sha256(data).digest()))
    return h.hexdigest()


def _garbage(path: str) -> bool:
    """Not state: the lock, temporary files (the engine's, swept by the next commit; the
    dossier's, swept by the next export: `_leftovers` checks they are swept), and the search
    index and the parts' layouts, derived data (`_find_problems` checks that the next find
    answers right; a layout is checked against its text whenever it is read)."""
    return (path == f"{RESEARCH}/{BOOK}/lock" or _temporary(os.path.basename(path))
            or path.startswith(f"{RESEARCH}/{BOOK}/{INDEX_FILE}") or path.startswith(f"{RESEARCH}/{BOOK}/{LAYOUTS}/"))


def _temporary(name: str) -> bool:
    return name.startswith(TMP_MARK) or (name.startswith(".dossier.html.") and name.endswith(".tmp"))


def _spare_links(root: Path) -> list[str]:
    """Undo's links of a message that never committed (made before its commit point; the
    next message removes them): paths relative to the sandbox."""
    folder = root / BOOK / "undo"
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    records = {n.partition(".")[0] for n in names if n.endswith(".json")}
    return [f"{RESEARCH}/{BOOK}/undo/{n}" for n in names if n.endswith(".before") and n.partition(".")[0] not in records]


def _leftovers(root: Path) -> list[str]:
    temporaries = [os.path.relpath(os.path.join(current, name), root)
                   for current, _, files in os.walk(root) for name in files if _temporary(name)]
    return sorted(temporaries + _spare_links(root))


def split(snap: Snapshot) -> tuple[Snapshot, Snapshot]:
    """(the research's entries, everything else in the sandbox)"""
    inside = {k: v for k, v in snap.items() if k == RESEARCH + "/" or k.startswith(RESEARCH + "/")}
    return inside, {k: v for k, v in snap.items() if k not in inside}


class Checker:
    def __init__(self, scenario: Scenario, scratch: Path, before: Image, after: Image,
                 marks: dict[str, Image] | None = None) -> None:
        self.scenario = scenario
        self.scratch = scratch
        self.count = 0
        self.used: dict[str, list[str]] = {}  # a disk as opened -> what was wrong when it was used
        self.before, self.outside = self.reference(before)
        self.after, _ = self.reference(after)
        self.references = {"before": self.before,
                           **{name: self.reference(image)[0] for name, image in (marks or {}).items()},
                           "after": self.after}

    def reference(self, image: Image) -> tuple[Snapshot, Snapshot]:
        """The snapshots (research, the rest) of `image` once opened."""
        with self._materialized(image) as sandbox:
            with contextlib.suppress(NotAResearch):
                Research.open(sandbox / RESEARCH)
            return split(snapshot(sandbox))

    @contextlib.contextmanager
    def _materialized(self, image: Image):
        self.count += 1
        sandbox = self.scratch / f"state{self.count}"
        sandbox.mkdir()
        try:
            image.materialize(sandbox)
            yield sandbox
        finally:
            shutil.rmtree(sandbox, ignore_errors=True)

    def check(self, image: Image, end: Snapshot | None) -> tuple[str, list[str]]:
        """(which state it is, what is wrong with it). `end`: what the research must be, once
        opened, because the operation had returned (None: it had not)."""
        with self._materialized(image) as sandbox:
            try:
                return self._check(sandbox, end)
            except Exception as error:  # a crash of the engine on this disk is a finding too
                return "crashed", [f"{type(error).__name__}: {error}"]

    def _check(self, sandbox: Path, end: Snapshot | None) -> tuple[str, list[str]]:
        root = sandbox / RESEARCH
        problems: list[str] = []
        try:
            research: Research | None = Research.open(root)
        except NotAResearch:
            research = None
        inside, outside = split(snapshot(sandbox))
        verdict = self.same_as(inside)
        if verdict is None:
            problems.append("neither before nor after: " + self._difference(inside))
            verdict = "half"
        elif end is not None and inside != end:
            problems.append(f"the operation had returned, yet the disk is {verdict!r}: " + self._difference(inside))
        if outside != self.outside:
            problems.append("something outside the research changed: "
                            + ", ".join(sorted(set(outside) ^ set(self.outside)) or ["contents"]))
        # What follows depends only on the disk as opened, temporary files included: many
        # crash states come to the same one (then it is checked once).
        opened = _digest(snapshot(sandbox, garbage=True))
        if opened not in self.used:
            self.used[opened] = self._use(root, research, verdict, inside)
        return verdict, problems + self.used[opened]

    def _use(self, root: Path, research: Research | None, verdict: str, inside: Snapshot) -> list[str]:
        """The research as it is used next: its journal and prompt, the next message, the
        scenario's operation again; no temporary file is left after them."""
        problems = []
        if research is None:
            if verdict == "after" or self.after.get(f"{RESEARCH}/{BOOK}/state.json") is None:
                problems.append("the research cannot be opened")
            Research.create(root, "Again.")  # `deep-research new` again: must work
            research = Research.open(root)
        problems += _journal_problems(root)
        if not self.scenario.hand_edited(inside) and not _prompt_matches(research):
            problems.append("prompt.md is not the prompt of the research as it is")
        if self.scenario.find is not None:
            problems += _find_problems(root, self.scenario.find)
        if self.scenario.parts is not None:
            problems += _parts_problems(root, self.scenario.parts)
        probe = _probe(research)
        if probe:
            problems.append(probe)
        self.scenario.again(root)
        left = _leftovers(root)
        if left:
            problems.append(f"temporary files are left after the next message: {left[:3]}")
        return problems

    def same_as(self, inside: Snapshot) -> str | None:
        for name, reference in self.references.items():
            if inside == reference:
                return name
        return self.scenario.extra(inside, self.references)

    def _difference(self, inside: Snapshot) -> str:
        def diff(reference: Snapshot) -> str:
            missing = sorted(set(reference) - set(inside))
            extra = sorted(set(inside) - set(reference))
            changed = sorted(k for k in set(inside) & set(reference) if inside[k] != reference[k])
            parts = [f"{label} {names[:4]}{' …' if len(names) > 4 else ''}"
                     for label, names in (("missing", missing), ("extra", extra), ("changed", changed)) if names]
            return ", ".join(parts) or "same"
        return f"vs before: {diff(self.before)}; vs after: {diff(self.after)}"


def _journal_problems(root: Path) -> list[str]:
    path = root / BOOK / "journal.jsonl"
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError:
        return []
    if lines and lines[-1] == b"":
        lines.pop()
    for number, line in enumerate(lines[:-1], 1):  # the last line may be torn
        try:
            json.loads(line)
        except ValueError:
            return [f"journal line {number} of {len(lines)} does not parse"]
    return []


def _prompt_matches(research: Research) -> bool:
    """Every working researcher's prompt file is its prompt (main's is prompt.md)."""
    for researcher in research.researchers():
        path = research.prompt_file(researcher.name)
        stored = path.read_text(encoding="utf-8") if path.exists() else None
        if stored != research.prompt(researcher=researcher.name):
            return False
    return True


def _parts_problems(root: Path, name: str) -> list[str]:
    """The attachment `name`, if it is there, records the cutting its parts were made by (`cuts: 2`,
    which cuts it elsewhere than version 1 does) and `///read` answers each part as that cutting
    divides its text (the prompt read its layout from a record that may be torn: derived data)."""
    import re

    from deep_research.engine.retrieval.parts import CUTS, LEGACY_CUTS, Reading, layout

    research = Research.open(root)
    research.durable = False
    found = next((a for a in research.tree.attachments(()) if a.name == name), None) if research.tree.exists(()) else None
    if found is None:
        return []
    if found.cuts != str(CUTS):
        return [f"{name} records the cutting {found.cuts!r}, not {CUTS}"]
    shape = layout(found.content, research.rules().part_chars, found.reading)
    if shape.starts == layout(found.content, research.rules().part_chars, Reading(LEGACY_CUTS, found.reading.form)).starts:
        return [f"{name} is cut alike by both versions: the check would see nothing"]
    problems = []
    for first in range(1, shape.count + 1, 5):
        last = min(shape.count, first + 4)
        reply = research.execute(f"///read {name}#{first}-{last}\n").reply
        for number in range(first, last + 1):
            match = re.search(rf'<part name="{re.escape(name)}#{number}" of="(\d+)">\n(.*?)\n</part>', reply, re.S)
            if match is None or int(match.group(1)) != shape.count or match.group(2) != shape.text(found.content, number):
                problems.append(f"{name}#{number} is not the part its recorded cutting makes")
                return problems
    return problems


def _find_problems(root: Path, query: str) -> list[str]:
    """The next find answers as if the index had always been right: as it does in a copy of the
    research without its index (made from nothing there)."""
    import re

    def passages(folder: Path) -> list[tuple[str, str]]:
        research = Research.open(folder)
        research.durable = False
        if research.state().phase is not Phase.IN_FOCUS:
            return []
        reply = research.execute(f"///find {query}\n").reply
        return re.findall(r'<passage part="([^"]+)" rank="\d+">\n(.*?)\n</passage>', reply, re.S)

    fresh = root.parent / "without-index"
    shutil.copytree(root, fresh, ignore=shutil.ignore_patterns(INDEX_FILE + "*"))
    try:
        expected = passages(fresh)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    found = passages(root)
    if found != expected:
        return [f"find answers {[p for p, _ in found]}, an index made from nothing {[p for p, _ in expected]}"]
    return []


def _probe(research: Research) -> str | None:
    """Run a next message (not durably: its durability is not what is checked here)."""
    research.durable = False
    phase = research.state().phase
    if phase in (Phase.FINISHED, Phase.SHUT_DOWN):
        research.reopen()
    message = "///add_criteria Survives a power cut\n" if phase is not Phase.NO_PROBLEM else (
        "<<< define_problem\n///title\nA problem\n///content\nWhat to find.\n>>>\n")
    result = research.execute(message)
    if not result.executed or result.analysis is None or not result.analysis.ran:
        return f"the next message did not run ({result.reason}): {result.reply[:200]}"
    again = Research.open(research.root)
    if not _prompt_matches(again):
        return "after the next message, prompt.md is not the research's prompt"
    problems = _journal_problems(research.root)
    return problems[0] if problems else None
