"""Hostile research folders: links out of the research in every position the engine reads,
links that stay inside, link loops, FIFOs, unreadable and undecodable files. Used by the tests
of the read guard (import it as `tests.hostile`) and by `benchmarks/hostile_research.py`.

Everything outside the research holds `SENTINEL`; a reader that shows it, or writes it into
the research, has read outside. A research built with `build` never holds it itself.

    outside = make_outside(tmp_path / "outside")
    research = build(tmp_path / "research")
    plant(research, outside, "attachment")          # Attachments/Leak.md -> outside/secret.md
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

SENTINEL = "SENTINEL-OUTSIDE-4b1d9e"  # only ever outside the research

BOOK = ".deep-research"
DEFINITION = "Problem Definition.md"
CRITERIA = "Criteria of Definition of Done.md"
BREAKDOWN = "Breakdown Structure.md"
REPORT = "Report 3 Pager.md"
SUBS = "Subproblems"
ATTACHMENTS = "Attachments"

REPORT_TEXT = ("Summarized problem definition: tiles.\nQ1: Which size?\nA1: 32, see [[Notes]].\n"
               "Conclusion: 32.")


def make_outside(folder: Path) -> Path:
    """A folder beside the research whose every file holds SENTINEL, shaped like the files a
    research has (a problem folder, attachments, bookkeeping), so a leak would read as data."""
    S = SENTINEL
    files = {
        "secret.md": f"---\nname: Secret {S}\n---\n\n{S} attachment text\n",
        "secret.txt": f"{S} plain text\n",
        "secret.toml": f'model = "{S}"\nreport_max_words = 100\n',
        "message.dr": f"<<< add_attachment\n///name\nLeaked {S}\n///content\n{S}\n>>>\n",
        "state.json": json.dumps({"phase": "in_focus", "focus": [S], "session": 1, "messages": 3}),
        "journal.jsonl": json.dumps({"message": 1, "session": 1, "command": "add_criteria", "kind": "create",
                                     "arguments": {"criteria": S}, "problem": [], "started": "2025-01-01T00:00:00",
                                     "ended": "2025-01-01T00:00:01", "status": "ok", "result": S}) + "\n",
        "session.jsonl": json.dumps({"role": "assistant", "text": f"{S} said", "at": "2025-01-01T00:00:00"}) + "\n",
        "pending.json": json.dumps({"writes": {"Attachments/Pending.md": f"{S}\n"}, "clears": {}, "appends": []}),
        "problem/" + DEFINITION: f"---\nstatus: open\norder: 9\n---\n\n# Outside {S}\n\n{S} definition\n",
        "problem/" + CRITERIA: f"# Criteria of Definition of Done\n\n- [ ] 1. {S} criterion\n",
        "problem/" + REPORT: f"{S} report\n",
        "problem/" + ATTACHMENTS + "/Secret.md": f"{S} nested attachment\n",
        "problem/" + SUBS + "/Deep/" + DEFINITION: f"# Deep {S}\n\n{S}\n",
        "problems/Stolen/" + DEFINITION: f"# Stolen {S}\n\n{S}\n",
        "attachments/Secret.md": f"{S} in an attachments folder\n",
        "book/state.json": json.dumps({"phase": "in_focus", "focus": [], "session": 1, "messages": 1}),
        "book/instruction.md": f"{S} instruction\n",
        "book/context/Secret.md": f"{S} context\n",
        "book/sessions/0001.jsonl": json.dumps({"role": "assistant", "text": S, "at": "2025-01-01T00:00:00"}) + "\n",
        "book/journal.jsonl": json.dumps({"message": 1, "command": S, "status": "ok"}) + "\n",
        "context/Secret.md": f"{S} context folder\n",
    }
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder


def build(root: Path) -> Path:
    """A small research: a root with criteria, an attachment, subproblems A (with a report
    that cites it, and an attachment of its own) and B; in focus at the root."""
    from deep_research.engine.research import Research

    research = Research.create(root, "Find the fastest tile size.", [("Background", "Caches are small.")])

    def run(text: str) -> None:
        result = research.execute(text)
        assert result.executed and result.analysis is not None, result.reason
        assert all(o.status.value == "ok" for o in result.analysis.outcomes), result.reply

    run("<<< define_problem\n///title\nTiles\n///content\nWhich tile size is fastest?\n>>>\n"
        "///add_criteria Names a size\n"
        "<<< add_attachment\n///name\nNotes\n///content\nL1 is 32 KB.\n>>>\n"
        "<<< add_subproblem\n///title\nA\n///content\nMeasure A.\n>>>\n"
        "<<< add_subproblem\n///title\nB\n///content\nMeasure B.\n>>>\n"
        "///focus_down A\n")
    run("<<< add_attachment\n///name\nA notes\n///content\nA measured.\n>>>\n"
        f"<<< write_report\n///content\n{REPORT_TEXT}\n>>>\n///focus_up\n")
    return Path(research.root)


def _link(at: Path, target: Path) -> None:
    if at.is_symlink() or at.is_file():
        at.unlink()
    elif at.is_dir():
        import shutil

        shutil.rmtree(at)
    at.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(target, at.parent), at)


def _in(root: Path, *parts: str) -> Path:
    return root.joinpath(*parts)


A = (SUBS, "A")
B = (SUBS, "B")

# Where a link out of the research can be planted, and what it points to.
OUT_LINKS: dict[str, Callable[[Path, Path], None]] = {
    "definition": lambda r, o: _link(_in(r, DEFINITION), o / "problem" / DEFINITION),
    "criteria": lambda r, o: _link(_in(r, CRITERIA), o / "problem" / CRITERIA),
    "breakdown": lambda r, o: _link(_in(r, BREAKDOWN), o / "secret.txt"),
    "report": lambda r, o: _link(_in(r, REPORT), o / "problem" / REPORT),
    "attachment": lambda r, o: _link(_in(r, ATTACHMENTS, "Leak.md"), o / "secret.md"),
    "attachments folder": lambda r, o: _link(_in(r, *A, ATTACHMENTS), o / "attachments"),
    "subproblem folder": lambda r, o: _link(_in(r, SUBS, "Linked"), o / "problem"),
    "subproblems folder": lambda r, o: _link(_in(r, *B, SUBS), o / "problems"),
    "child definition": lambda r, o: _link(_in(r, *B, DEFINITION), o / "problem" / DEFINITION),
    "child criteria": lambda r, o: _link(_in(r, *A, CRITERIA), o / "problem" / CRITERIA),
    "child report": lambda r, o: _link(_in(r, *A, REPORT), o / "problem" / REPORT),
    "child attachment": lambda r, o: _link(_in(r, *A, ATTACHMENTS, "Leak.md"), o / "secret.md"),
    "instruction": lambda r, o: _link(_in(r, BOOK, "instruction.md"), o / "book" / "instruction.md"),
    "context": lambda r, o: _link(_in(r, BOOK, "context", "Leak.md"), o / "secret.md"),
    "context folder": lambda r, o: _link(_in(r, BOOK, "context"), o / "context"),
    "session": lambda r, o: _link(_in(r, BOOK, "sessions", "0002.jsonl"), o / "session.jsonl"),
    "state": lambda r, o: _link(_in(r, BOOK, "state.json"), o / "state.json"),
    "journal": lambda r, o: _link(_in(r, BOOK, "journal.jsonl"), o / "journal.jsonl"),
    "config": lambda r, o: _link(_in(r, "deep-research.toml"), o / "secret.toml"),
    "message document": lambda r, o: _link(_in(r, "message.dr"), o / "message.dr"),
    "undo record": lambda r, o: _undo_record(r, o),
}


def _undo_record(root: Path, outside: Path) -> None:
    """The newest undo record made to restore an outside file's bytes into the tree."""
    folder = root / BOOK / "undo"
    records = sorted(folder.glob("*.json"))
    record = json.loads(records[-1].read_text(encoding="utf-8"))
    for entry in record["files"].values():
        if any(isinstance(entry.get(key), str) for key in ("before", "before_base64", "before_file")):  # it existed
            entry.pop("before", None)
            entry.pop("before_base64", None)
            entry["before_file"] = os.path.relpath(outside / "secret.md", root)
    records[-1].write_text(json.dumps(record), encoding="utf-8")


# Links that stay inside the research (read: they are fine) and links that loop.
IN_LINKS: dict[str, Callable[[Path], None]] = {
    "attachment inside": lambda r: _link(_in(r, ATTACHMENTS, "Alias.md"), _in(r, *A, ATTACHMENTS, "A notes.md")),
    "subproblem inside": lambda r: _link(_in(r, SUBS, "Alias"), _in(r, *A)),
    "subproblem to root": lambda r: _link(_in(r, *A, SUBS, "Up"), r),
    "subproblems to parent": lambda r: _link(_in(r, *B, SUBS), _in(r, SUBS)),
    "attachment loop": lambda r: _loop(_in(r, ATTACHMENTS, "Loop.md")),
    "definition loop": lambda r: _loop(_in(r, *B, DEFINITION)),
}


def _loop(at: Path) -> None:
    if at.exists() or at.is_symlink():
        at.unlink()
    os.symlink(at.name + ".2", at)
    os.symlink(at.name, at.parent / (at.name + ".2"))


# Files that are not regular, readable text where the engine reads.
SPECIAL: dict[str, Callable[[Path], None]] = {
    "fifo attachment": lambda r: os.mkfifo(_in(r, ATTACHMENTS, "Pipe.md")),
    "fifo report": lambda r: _fifo(_in(r, *B, REPORT)),
    "fifo definition": lambda r: _fifo(_in(r, *B, DEFINITION)),
    "fifo config": lambda r: _fifo(_in(r, "deep-research.toml")),
    "fifo instruction": lambda r: _fifo(_in(r, BOOK, "instruction.md")),
    "fifo journal": lambda r: _fifo(_in(r, BOOK, "journal.jsonl")),
    "device attachment": lambda r: os.symlink("/dev/zero", _in(r, ATTACHMENTS, "Zero.md")),
    "invalid utf-8 definition": lambda r: _bytes(_in(r, *B, DEFINITION), b"# B \xff\xfe\n\nMeasure \xc3(B.\n"),
    "nul in criteria": lambda r: _bytes(_in(r, CRITERIA), b"# Criteria\n\n- [ ] 1. Names\x00 a size\n"),
}


def _fifo(at: Path) -> None:
    if at.exists() or at.is_symlink():
        at.unlink()
    os.mkfifo(at)


def _bytes(at: Path, data: bytes) -> None:
    if at.is_symlink() or at.exists():
        at.unlink()  # a FIFO planted there would block the write; a link would write elsewhere
    at.write_bytes(data)


def plant(root: Path, outside: Path, position: str) -> None:
    """Plant the hostile thing named `position` (a key of OUT_LINKS, IN_LINKS or SPECIAL)."""
    if position in OUT_LINKS:
        OUT_LINKS[position](root, outside)
    elif position in IN_LINKS:
        IN_LINKS[position](root)
    else:
        SPECIAL[position](root)


def leaked(text: str | bytes) -> bool:
    return (SENTINEL.encode() if isinstance(text, bytes) else SENTINEL) in text


def leaks_in_files(root: Path) -> list[str]:
    """Files of the research (links not followed, special files passed over) holding SENTINEL."""
    found = []
    for current, dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(current, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as handle:
                if leaked(handle.read()):
                    found.append(os.path.relpath(path, root))
    return found
