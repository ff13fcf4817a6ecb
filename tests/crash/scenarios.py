"""What the crash harness records: each scenario prepares a sandbox (not recorded), then
does one thing to the research in it (recorded). The research is `<sandbox>/research`; a
file of the user's, `<sandbox>/outside/notes.txt`, lies next to it and must never change.

`quick` scenarios are CI's (small messages); the full run (`python -m tests.crash --full`)
uses larger ones: more folders, attachments longer than a disk block, more rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from deep_research.engine.research import Research

RESEARCH = "research"
OUTSIDE = "outside"

ROOT_TITLE = "How fast is tiled matrix multiplication"
DEFINE = (
    "<<< define_problem\n///title\n" + ROOT_TITLE + "\n///content\n"
    "Which tile sizes make matrix multiplication fastest on common CPUs, and why.\n>>>\n"
)


def block(command: str, **sections: str) -> str:
    return f"<<< {command}\n" + "".join(f"///{k}\n{v}\n" for k, v in sections.items()) + ">>>\n"


def wide_message(parts: int, attachment_bytes: int) -> str:
    """A message that makes folders (subproblems, the attachments folder), files in them,
    and changes the root's files: the commit's every kind of write."""
    text = "Breaking the problem down.\n///add_criteria Names a tile size\n"
    for n in range(parts):
        text += block("add_subproblem", title=f"Part {n}", content=f"What part {n} must answer.")
    excerpt = ("Blocking keeps a working set in cache. " * (attachment_bytes // 40 + 1))[:attachment_bytes]
    text += block("add_attachment", name="Measurements", content=excerpt)
    text += block("append_to_problem_definition", content="Scope: double precision only.")
    return text


@dataclass
class Scenario:
    name: str
    what: str  # for people: what is recorded
    # Yields the operation to record, which is given `mark`: a call that names the state at
    # that moment a consistent one too (the autopilot's: after each round).
    prepare: Callable[[Path, bool], contextlib.AbstractContextManager[Callable[[Callable[[], None]], None]]]
    # States other than the references (before, each mark, after) that are consistent for
    # this scenario: their name, given the research's snapshot and the references by name.
    extra: Callable[[dict, dict], str | None] = field(default=lambda now, references: None)
    # Done after the next message in each state: the scenario's operation once more (whatever
    # sweeps its own temporary files).
    again: Callable[[Path], None] = field(default=lambda root: None)
    # Whether the research holds a hand edit (then prompt.md is not yet the prompt: it is
    # written by the next message, which is checked).
    hand_edited: Callable[[dict], bool] = field(default=lambda now: False)
    # Words a `///find` in each state must answer as it would with an index made from nothing
    # (the search index is derived data: any state of it is right if the next find is).
    find: str | None = None
    # An attachment whose parts, in each state it is in, are those of the cutting its file records
    # (`cuts: 2`: engine/retrieval/parts.py), read by `///read` part by part.
    parts: str | None = None


def new_sandbox(sandbox: Path) -> Path:
    (sandbox / OUTSIDE).mkdir(parents=True)
    (sandbox / OUTSIDE / "notes.txt").write_text("The user's own notes, next to the research.\n")
    return sandbox / RESEARCH


def long_prompt(research: Research) -> Research:
    """A prompt over 16 KB: the next message's undo record keeps it by a hard link, made
    before the commit point (engine/undo.py)."""
    notes = "Measured tile sizes and their speed. " * 500
    assert research.execute(block("add_attachment", name="Long notes", content=notes)).executed
    return research


def defined(sandbox: Path) -> Research:
    research = Research.create(new_sandbox(sandbox), "Find the clearest tiling for teaching.",
                               [("Background", "A course on performance.")])
    assert research.execute(DEFINE).executed
    return research


# -- the scenarios ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _execute(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    research = long_prompt(defined(sandbox))
    message = wide_message(6 if full else 2, 9000 if full else 300)
    (research.root / "message.dr").write_text(message)
    yield lambda mark: _run(research.root, message)


def _run(root: Path, message: str) -> None:
    from deep_research.app.execute import execute_sync

    research = Research.open(root)
    result = execute_sync(research, message, consume=root / "message.dr")
    assert result.executed, result.reason


@contextlib.contextmanager
def _focus(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    research = defined(sandbox)
    assert research.execute(wide_message(2, 100)).executed
    message = "The first part first.\n///add_criteria Every part is covered\n///focus_down Part 1\n"
    if full:
        assert research.execute("///focus_down Part 0\n").executed
        assert research.execute("///add_criteria Done\n///mark_criteria_as_done 1\n"
                                + block("write_report", content="Summarized: part 0.\nConclusion: done.")
                                + "///focus_up\n").executed
    yield lambda mark: _run(research.root, message)


@contextlib.contextmanager
def _undo(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    research = long_prompt(defined(sandbox))  # the prompt comes back from a link
    assert research.execute(wide_message(6 if full else 2, 9000 if full else 300),
                            consume=research.root / "message.dr").executed
    if full:  # undo a focus change too: a session file created, then removed
        assert research.execute("///focus_down Part 1\n").executed
        research.undo()
    yield lambda mark: Research.open(research.root).undo()


@contextlib.contextmanager
def _autopilot(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    from deep_research.app.execute import MessageExecutor
    from deep_research.autopilot.client import ModelClient
    from deep_research.autopilot.fleet import Fleet
    from deep_research.autopilot.loop import Observer, Settings
    from tests.scripted_model import BREAK_DOWN, FOCUS_DOWN, MODEL, Say, ScriptedModel

    research = defined(sandbox)
    steps = [BREAK_DOWN, FOCUS_DOWN] if full else [BREAK_DOWN]
    with ScriptedModel([Say(text) for text in steps]) as model:
        async def rounds(mark: Callable[[], None]) -> None:
            class Rounds(Observer):
                def round_ended(self, report) -> None:  # noqa: ANN001
                    mark()  # the research after a whole round is a consistent state

            client = ModelClient(model.base_url, MODEL, None, max_retries=0)
            try:
                settings = Settings(max_rounds=len(steps), grammar="off")
                await Fleet(Research.open(research.root), client, settings, executor=MessageExecutor(),
                            observer=Rounds()).run()
            finally:
                await client.close()

        yield lambda mark: asyncio.run(rounds(mark))


def _autopilot_draft(now: dict, references: dict) -> str | None:
    """A reference state with the model's reply written to message.dr (not durably: it is a
    draft) and not run yet: the autopilot's resume asks about it."""
    from tests.scripted_model import BREAK_DOWN, FOCUS_DOWN

    message = "research/message.dr"
    draft = (now.get(message) or b"").strip()
    if not draft or not any(reply.encode().startswith(draft) for reply in (BREAK_DOWN, FOCUS_DOWN)):
        return None  # (a reply is cut after its focus change: the stream stops there)
    for name, reference in references.items():
        if {**now, message: reference.get(message)} == reference:
            return f"{name}, a reply waiting in message.dr"
    return None


@contextlib.contextmanager
def _attachment(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    from pytest_httpserver import HTTPServer

    from tests.pages import CACHE_BLOCKING

    research = defined(sandbox)
    (research.root / "deep-research.toml").write_text("[fetch]\nallow_private_networks = true\n")
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    try:
        body = CACHE_BLOCKING if not full else CACHE_BLOCKING.replace("</article>", "<p>More.</p>" * 800 + "</article>")
        server.expect_request("/cache-blocking").respond_with_data(body, content_type="text/html")
        message = f"Reading the source.\n///attach_url {server.url_for('/cache-blocking')}\n"
        yield lambda mark: _run(research.root, message)
    finally:
        server.clear()
        server.stop()


@contextlib.contextmanager
def _new(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    from deep_research.cli import main

    new_sandbox(sandbox)
    inputs = sandbox / OUTSIDE / "inputs"
    inputs.mkdir()
    (inputs / "course.md").write_text("A course on performance, second year.\n")
    (inputs / "paper.md").write_text("# A paper\n" + "Tiling results. " * (400 if full else 20) + "\n")
    argv = ["new", str(sandbox / RESEARCH), "--instruction", "Find the clearest tiling.",
            "--context", str(inputs / "course.md"), "--attach", str(inputs / "paper.md")]

    def act(mark: Callable[[], None]) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 0

    yield act


def _new_before(now: dict, references: dict) -> str | None:
    """`deep-research new` interrupted before its commit point: the folder holds nothing
    (or only the lock); `new` runs again."""
    return "no research yet" if not [p for p in now if not p.endswith("/")] else None


@contextlib.contextmanager
def _export(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    from deep_research.dossier import export

    research = defined(sandbox)
    export(research.root, research.root / "dossier.html")  # the dossier of an earlier moment
    assert research.execute(wide_message(6 if full else 1, 100)).executed
    yield lambda mark: export(research.root, research.root / "dossier.html")


EDIT = b"A line the user added by hand after the message.\n"
EDITED = f"{RESEARCH}/Problem Definition.md"
SAVE = f"{RESEARCH}/.Problem Definition.md.save"  # the editor's temporary file


@contextlib.contextmanager
def _edit(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    import os

    research = defined(sandbox)
    message = "///add_criteria Names a tile size\n" + block("append_to_problem_definition", content="Scope: doubles.")

    def act(mark: Callable[[], None]) -> None:
        _run(research.root, message)
        mark()  # the message ran, the edit is not made yet
        # The user edits a file the message wrote, and the editor saves it durably (a
        # temporary file, fsynced, renamed over the file, the folder fsynced).
        target = sandbox / EDITED
        saved = sandbox / SAVE
        with open(saved, "wb") as out:
            out.write(target.read_bytes() + EDIT)
            out.flush()
            os.fsync(out.fileno())
        os.replace(saved, target)
        folder = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)

    yield act


def _edit_states(now: dict, references: dict) -> str | None:
    """A reference state with the editor's temporary file of the save beside it."""
    now = {k: v for k, v in now.items() if k != SAVE}
    return next((f"{name}, the editor's temporary file beside" for name, r in references.items() if now == r), None)


def _export_again(root: Path) -> None:
    from deep_research.dossier import export

    export(root, root / "dossier.html")


@contextlib.contextmanager
def _continue(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    from deep_research.cli import main

    research = defined(sandbox)
    assert research.execute("///add_criteria One\n///mark_criteria_as_done 1\n"
                            + block("write_report", content="Summarized: done.\nConclusion: 16x16.")
                            + "///focus_up\n").executed
    (sandbox / OUTSIDE / "more.md").write_text("More context from the user.\n")
    argv = ["continue", str(research.root), "--instruction", "Now also cover GPUs.",
            "--context", str(sandbox / OUTSIDE / "more.md")]

    def act(mark: Callable[[], None]) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 0

    yield act


@contextlib.contextmanager
def _researchers(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    """Two delegated researchers and main commit in turn: one researcher's message writes the
    tree, its session and every researcher's prompt; one ends its researcher (its prompt goes,
    its report reaches main's prompt); main delegates again."""
    research = defined(sandbox)
    assert research.execute(wide_message(3 if full else 2, 100) + "///delegate Part 0\n///delegate Part 1\n").executed
    first = "///add_criteria Sizes measured\n" + block("add_subproblem", title="Deeper", content="One level down.")
    last = (block("write_report", content="Summarized: part 1.\nQ1: Which size?\nA1: 32 KB.\nConclusion: 32 KB.")
            + "///focus_up\n")
    steps = [("Part 0", first), ("Part 1", last)]
    if full:
        steps.append(("main", "///delegate Part 2\n"))

    def act(mark: Callable[[], None]) -> None:
        for index, (researcher, message) in enumerate(steps):
            opened = Research.open(research.root)
            document = opened.document(researcher)
            document.write_text(message)
            assert opened.execute(message, consume=document).executed
            if index < len(steps) - 1:
                mark()  # each researcher's message is a consistent state of its own

    yield act


@contextlib.contextmanager
def _fix(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    """`check --fix` (issue 26): hand edits it repairs in one transaction, a breakdown written
    again and criteria renumbered."""
    from deep_research.engine.views.repair import fix_research

    research = defined(sandbox)
    assert research.execute(wide_message(6 if full else 2, 100) + "///add_criteria Has a sketch\n").executed
    breakdown = research.root / "Breakdown Structure.md"
    breakdown.write_text(breakdown.read_text(encoding="utf-8").replace("Part 1", "Part one"), encoding="utf-8")
    criteria = research.root / "Criteria of Definition of Done.md"
    criteria.write_text(criteria.read_text(encoding="utf-8").replace("] 2. Has", "] 5. Has"), encoding="utf-8")

    def act(mark: Callable[[], None]) -> None:
        assert len(fix_research(Research.open(research.root))) >= 2

    yield act


def _researcher_drafts(now: dict, references: dict) -> str | None:
    """A reference state with a researcher's next message written to its document, not run yet
    (the scenario writes each message to its document first, as a person or the autopilot does)."""
    documents = [k for k in set(now) | {f"{RESEARCH}/message.dr"} if k.endswith("/message.dr")]
    for name, reference in references.items():
        if all(now.get(k) == reference.get(k) for k in set(now) | set(reference) if k not in documents):
            return f"{name}, a message waiting in a researcher's document"
    return None


@contextlib.contextmanager
def _parallel_autopilot(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    """The autopilot's rounds for delegated researchers: each reply is a draft in that
    researcher's document (in its problem's folder) before its transaction runs it."""
    from deep_research.app.execute import MessageExecutor
    from deep_research.autopilot.client import ModelClient
    from deep_research.autopilot.fleet import Fleet
    from deep_research.autopilot.loop import Observer, Settings
    from tests.scripted_model import MODEL, Say, ScriptedModel, by_problem

    research = defined(sandbox)
    assert research.execute(wide_message(2, 100) + "///delegate Part 0\n///delegate Part 1\n").executed
    parts = ("Part 0", "Part 1")
    with ScriptedModel(route=by_problem) as model:
        for part in parts:
            model.add_for(part, Say(f"///add_criteria {part} is measured\n"))
        if full:
            model.add_for(parts[0], Say("///add_criteria And compared\n"))

        async def rounds(mark: Callable[[], None]) -> None:
            class Rounds(Observer):
                def round_ended(self, report) -> None:  # noqa: ANN001
                    mark()

            client = ModelClient(model.base_url, MODEL, None, max_retries=0)
            try:
                settings = Settings(max_rounds=3 if full else 2, grammar="off", parallel=1)
                await Fleet(Research.open(research.root), client, settings, executor=MessageExecutor(),
                            observer=Rounds()).run()
            finally:
                await client.close()

        yield lambda mark: asyncio.run(rounds(mark))


FIND = "blocking working set cache tile"
SURVEY = "Blocking survey"


@contextlib.contextmanager
def _sources(sandbox: Path, full: bool) -> Iterator[Callable[[], None]]:
    """A message that attaches a source, which is then indexed (engine/retrieval/index.py: after the
    transaction, in SQLite's own file, whose writes the recorder sees but whose journal and
    fsyncs, made in C, it does not: so it lets any of those writes be lost or cut, stricter
    than a real disk)."""
    research = defined(sandbox)
    earlier = "Blocking keeps a working set in cache. " * (400 if full else 120)
    assert research.execute(block("add_attachment", name="Earlier notes", content=earlier)).executed  # the index exists
    survey = "".join(f"## Tile {n}\n\nChoose the tile so that the working set of tile {n} fits the cache. " * 3 + "\n\n"
                     + f"Tile {n} in practice\n---------------------\n\n" + "Measured on two machines. " * 12 + "\n\n"
                     for n in range(60 if full else 20))  # `#` and underlined titles: cut by version 2 of the cutting
    message = "Keeping a longer source.\n" + block("add_attachment", name=SURVEY, content=survey)
    yield lambda mark: _run(research.root, message)


SCENARIOS = [
    Scenario("execute", "a message making subproblems, an attachment and criteria", _execute),
    Scenario("focus", "a message that changes the focus (a new session file)", _focus),
    Scenario("undo", "undoing a message that made folders", _undo),
    Scenario("autopilot", "autopilot rounds against a scripted model on loopback", _autopilot, _autopilot_draft),
    Scenario("attachment", "a message with attach_url, the page served on loopback", _attachment),
    Scenario("new", "`deep-research new` with context and an attachment", _new, _new_before),
    Scenario("export", "exporting the dossier over an older one", _export, again=_export_again),
    Scenario("edit", "a message, then the user's durable save of a file it wrote", _edit, _edit_states,
             hand_edited=lambda now: EDIT in (now.get(EDITED) or b"")),
    Scenario("continue", "`deep-research continue` of a finished research: instruction, context, reopen", _continue),
    Scenario("researchers", "messages of two delegated researchers and main, interleaved (parallel research)",
             _researchers, _researcher_drafts),
    Scenario("fix", "`deep-research check --fix` of hand edits: a breakdown and criteria numbers", _fix),
    Scenario("fleet", "autopilot rounds of delegated researchers, drafts in their documents (parallel research)",
             _parallel_autopilot, _researcher_drafts),
    Scenario("sources", "a message that attaches a source with its cutting recorded, indexed for find (SQLite)",
             _sources, find=FIND, parts=SURVEY),
]
