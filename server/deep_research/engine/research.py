"""A research folder, as the command line and the language server use it.

    research = Research.open(folder)          # or Research.create(folder, …)
    research.analyze(text)                    # diagnostics: a dry run, writes nothing
    research.execute(text)                    # runs the message, writes one transaction
    research.prompt()                         # what the assistant sees now

The folder that holds the `.dr` document is the root problem's folder. Its
`.deep-research/` holds the bookkeeping; a folder with the tree but without it is
adopted (focus at the root, a new session) the first time a message runs.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from . import budgets, formats
from . import undo as undoing
from .analysis import Analysis, Status, analyze
from .commands import ApprovalMode
from .draft import BREAKDOWN_ASPECT, Draft
from .evidence import Evidence
from .model import Attachment, Problem
from .names import name_key, unique_component
from .parser import ParsedMessage, parse
from .prompt import Bookkeeping, Conversation, Entry, render_conversation, render_prompt, render_update
from .reply import render_reply
from .rules import Rules, read_rules
from .state import ROOT, Phase, State, now
from .state import Status as RootStatus
from .store import MESSAGE_FILE, is_message_document  # the message document: callers find them here too
from .store import (
    ATTACHMENTS, BOOKKEEPING, CONTEXT, DEFINITION, INSTRUCTION, JOURNAL, PENDING_ATTACHMENTS, PROMPT, STATE,
    SUBPROBLEMS, FileCache, Transaction, bookkeeping, content_digest, locked, make_folders, pending_path,
    recover, session_file,
)
from .text import clean_text, refuse_not_text
from .tree import Tree, attachment_files, ordered_attachments, read_attachments


class NotAResearch(Exception):
    """The folder holds neither a research nor a problem tree to adopt."""


class NotAMessageDocument(ValueError):
    """Only `.dr` documents are executed or consumed; this path is something else."""


class Location(Enum):
    RESEARCH = "research"  # the folder holds .deep-research/
    ADOPTABLE = "adoptable"  # a problem tree without bookkeeping
    INSIDE = "inside"  # a folder inside another research's tree
    NONE = "none"


def locate(folder: Path) -> tuple[Location, Path]:
    """What `folder` (the folder of a `.dr` document) is, and the research root it concerns.

    A folder is inside a research only if it is part of its tree: a problem folder under
    `Subproblems/`, a `Subproblems/` or `Attachments/` folder, or the bookkeeping. Any
    other folder below a research root (`notes/code/`) is not the research's business.
    """
    folder = folder.resolve()
    if _is_research(folder):
        return Location.RESEARCH, folder
    for parent in folder.parents:
        if _is_research(parent) and in_tree(folder.relative_to(parent).parts):
            return Location.INSIDE, parent
    if (folder / DEFINITION).is_file():
        return Location.ADOPTABLE, folder
    return Location.NONE, folder


def _is_research(folder: Path) -> bool:
    """A folder with bookkeeping, or whose creation was interrupted after its commit point
    (the pending file; opening it finishes the creation)."""
    return (bookkeeping(folder) / STATE).is_file() or pending_path(folder).is_file()


def in_tree(parts: tuple[str, ...]) -> bool:
    """Whether a folder at `parts` below a research root belongs to the research."""
    if parts[:1] == (BOOKKEEPING,):
        return True
    index = 0
    while index < len(parts):
        if parts[index] == ATTACHMENTS:
            return index == len(parts) - 1
        if parts[index] != SUBPROBLEMS:
            return False
        index += 2  # Subproblems/<problem folder>
    return True



def refuse_as_research(folder: Path) -> str | None:
    """Why `folder` must never become a research (the file system's root, the home folder), or None."""
    real = Path(os.path.realpath(folder))
    if real == Path(real.anchor):
        return f"{folder} is the root of the file system; make the research in a folder of its own"
    home = Path(os.path.realpath(Path.home()))
    if real == home:
        return f"{folder} is your home folder; make the research in a folder of its own, e.g. {home / 'research'}"
    return None


@dataclass
class Execution:
    executed: bool
    reason: str | None  # why nothing ran: "empty", "needs-approval"
    analysis: Analysis | None = None
    reply: str = ""
    prompt: str = ""
    changed: list[Path] = field(default_factory=list)
    consumed: bool = False  # the message document was emptied (see Research.execute)


class Research:
    def __init__(self, root: Path, cache: FileCache | None = None) -> None:
        self.root = root.resolve()
        self.cache = cache if cache is not None else FileCache()
        self.tree = Tree(self.root, self.cache)
        self.guard = self.tree.guard  # what of the folder may be read (store.Guard): every reader uses it
        self.durable = True  # fsync at commit; benchmarks may turn it off to measure the rest
        # Rules an editor's settings set over the research's deep-research.toml (engine/rules.py).
        self.rule_overrides: dict[str, object] = {}
        self._rounds: tuple[tuple, int] | None = None  # (journal stat, session, focus) -> rounds there

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def open(cls, root: Path, cache: FileCache | None = None) -> Research:
        where, found = locate(root)
        if where is Location.NONE or (where is Location.INSIDE and found != root.resolve()):
            raise NotAResearch(_not_a_research(root, where, found))
        research = cls(found, cache)
        if pending_path(found).exists():
            with locked(found):
                recover(found, research.cache)
        return research

    @classmethod
    def create(
        cls,
        root: Path,
        instruction: str = "",
        context: Sequence[tuple[str, str] | Attachment] | None = None,
        attachments: Sequence[tuple[str, str] | Attachment] | None = None,
        *,
        exist_ok: bool = False,
    ) -> Research:
        """Make `root` a research: bookkeeping, an empty message document, the first prompt,
        in one transaction (with `exist_ok`, a research there gets what is given). Context and
        attachments are `(name, text)` pairs or `Attachment`s (a fetched page keeps its
        source). A folder this call made is removed again if it fails: nothing half-made is left."""
        refusal = refuse_as_research(root)
        if refusal is not None:
            raise NotAResearch(refusal)
        made = not root.exists()
        make_folders(root.absolute(), durable=True)
        try:
            return cls._create(root, instruction, _named(context), _named(attachments), exist_ok)
        except BaseException:
            if made:
                shutil.rmtree(root, ignore_errors=True)
            raise

    @classmethod
    def _create(cls, root: Path, instruction: str, context: list[Attachment], attachments: list[Attachment],
                exist_ok: bool) -> Research:
        where, found = locate(root)
        if where is Location.INSIDE:
            raise NotAResearch(_not_a_research(root, where, found))
        research = cls(root)
        if where is Location.RESEARCH and not exist_ok:
            raise FileExistsError(f"{root} already holds a research; continue it instead of creating it again")
        with locked(research.root):
            recover(research.root, research.cache)
            research._give(instruction, context, attachments, new=where is not Location.RESEARCH)
        return research

    def continue_with(
        self, instruction: str = "", context: Sequence[tuple[str, str] | Attachment] | None = None,
        attachments: Sequence[tuple[str, str] | Attachment] | None = None,
    ) -> bool:
        """`deep-research continue`: what the user gives (a new instruction, more context or
        attachments, as `create` takes them) and, for a finished or shut-down research, the
        reopening, in one transaction. True if it reopened the research."""
        with locked(self.root):
            recover(self.root, self.cache)
            return self._give(instruction, _named(context), _named(attachments), new=False, reopen=True)

    def reopen(self) -> bool:
        """Continue a finished or shut-down research: the root is open again and in focus, in
        a new session. False if the research had not ended (nothing to do)."""
        with locked(self.root):
            recover(self.root, self.cache)
            if self.state().phase not in (Phase.FINISHED, Phase.SHUT_DOWN):
                return False
            return self._give("", [], [], new=False, reopen=True)

    def _give(
        self, instruction: str, context: list[Attachment], attachments: list[Attachment], *,
        new: bool, reopen: bool = False,
    ) -> bool:
        """One transaction (under the lock): the bookkeeping of a new research, or what the user
        gives an existing one, and with `reopen` an ended research reopened; the prompt that
        results is rendered from the same values, so it is in the transaction too."""
        before = state = self.state()
        tx = Transaction(self.root, durable=self.durable)
        book = bookkeeping(self.root)
        draft = Draft(self.tree, before)
        if new:
            tx.write(book / STATE, before.to_json())
        given = instruction.strip() + "\n" if instruction.strip() else ""
        if given or new:
            tx.write(book / INSTRUCTION, given)
        else:
            given = self.instruction()
        context_now = self._add_named(tx, book / CONTEXT, context)
        if before.phase is Phase.NO_PROBLEM:
            pending_now = self._add_named(tx, book / PENDING_ATTACHMENTS, attachments)
        else:
            pending_now = self.pending_attachments()
            for item in attachments:  # once the problem exists they go to the root (a name it has is skipped)
                if not draft.attachment_taken(ROOT, item.name):
                    draft.add_attachment(ROOT, item.name, item.content, **item.origin())
        message = self.root / MESSAGE_FILE
        if not message.exists():
            tx.write(message, "")
        transcript = self.transcript(before.session)
        reopened = reopen and before.phase in (Phase.FINISHED, Phase.SHUT_DOWN)
        if reopened:
            draft.set_status(ROOT, RootStatus.OPEN)
            state = before.evolve(phase=Phase.IN_FOCUS, focus=ROOT, session=before.session + 1)
            note = Entry("system", (
                f"The user reopened the research (it had {'finished' if before.phase is Phase.FINISHED else 'been shut down'}). "
                "A new session starts at the root problem: read the instruction and the context again, they may have changed."
            ), now())
            transcript = [note]
            tx.write(book / STATE, state.to_json())
            tx.append(session_file(self.root, state.session), note.to_json())
            record = {"message": state.messages, "session": state.session, "command": "reopen", "kind": "update",
                      "started": note.at, "ended": now(), "status": "ok", "result": note.text, "error": None}
            tx.append(book / JOURNAL, json.dumps(record, ensure_ascii=False) + "\n")
        for path, content in draft.files().items():
            tx.write(path, content)
        tx.write(book / PROMPT, render_prompt(draft, state, Bookkeeping(given, context_now, pending_now, transcript,
                                                                        self.rules())))
        if not new and (instruction.strip() or context or attachments or reopened):
            undoing.forget_all(tx)  # what the user gave changes the prompt: see engine/undo.py
        tx.commit(self.cache)
        return reopened

    def _add_named(self, tx: Transaction, folder: Path, items: list[Attachment]) -> list[Attachment]:
        """Add `items` to `tx` as attachment files in `folder`; the folder's attachments as
        they will read back once it is committed."""
        present = attachment_files(folder, self.cache)
        taken = {name_key(p.name) for p in folder.glob("*.md")} if folder.is_dir() else set()
        for item in items:
            file_name = unique_component(item.name, taken, suffix=".md")
            taken.add(name_key(file_name))
            text = formats.render_attachment(item)
            tx.write(folder / file_name, text)
            present.append((formats.parse_attachment(text, fallback_name=file_name[:-3]), folder / file_name))
        return [item for item, _ in ordered_attachments(present)]

    # -- reading ----------------------------------------------------------------------------

    def state(self) -> State:
        """The persisted state, reconciled with the tree as it is on disk now."""
        stored = self.cache.read(bookkeeping(self.root) / STATE, State.from_json)
        state = stored or State(phase=Phase.IN_FOCUS if self.tree.exists(ROOT) else Phase.NO_PROBLEM)
        return self._reconcile(state)

    def _reconcile(self, state: State) -> State:
        has_root = self.tree.exists(ROOT)
        if state.phase is Phase.NO_PROBLEM and has_root:
            return state.evolve(phase=Phase.IN_FOCUS, focus=ROOT)
        if state.phase is not Phase.NO_PROBLEM and not has_root:
            return state.evolve(phase=Phase.NO_PROBLEM, focus=ROOT)
        focus = state.focus
        while focus and not self.tree.exists(focus):  # renamed or deleted by hand
            focus = focus[:-1]
        return state if focus == state.focus else state.evolve(focus=focus)

    def focus(self) -> Problem | None:
        state = self.state()
        return self.tree.problem(state.focus) if state.phase is not Phase.NO_PROBLEM else None

    def rules(self) -> Rules:
        """The research's limits: its deep-research.toml, under `rule_overrides`."""
        rules = read_rules(self.root, self.cache)
        return replace(rules, **self.rule_overrides) if self.rule_overrides else rules

    def rounds(self, state: State | None = None) -> int:
        """The autopilot's rounds at the focus in its current visit (engine/budgets.py), from the
        journal: a stat per call (noted for kept analyses), its tail read when it changed."""
        state = state or self.state()
        journal = bookkeeping(self.root) / JOURNAL
        st = self.cache.stat(journal)
        if st is None:
            return 0
        key = (st.st_ino, st.st_size, st.st_mtime_ns, state.session, state.focus)
        if self._rounds is None or self._rounds[0] != key:
            self._rounds = (key, budgets.rounds_in_session(journal, state.session, state.focus))
        return self._rounds[1]

    def refusals(self, state: State | None = None) -> budgets.Refusals:
        """What the research's budgets refuse at the focus now (engine/budgets.py)."""
        state = state or self.state()
        if state.phase is not Phase.IN_FOCUS:
            return budgets.Refusals()
        return budgets.refusals(self.tree.problem(state.focus), self.tree.children(state.focus), self.rules(),
                                self.rounds(state))

    def instruction(self) -> str:
        return self.guard.read_text(bookkeeping(self.root) / INSTRUCTION) or ""

    def context(self) -> list[Attachment]:
        return read_attachments(bookkeeping(self.root) / CONTEXT, self.cache)

    def pending_attachments(self) -> list[Attachment]:
        return read_attachments(bookkeeping(self.root) / PENDING_ATTACHMENTS, self.cache)

    def transcript(self, session: int | None = None) -> list[Entry]:
        number = self.state().session if session is None else session
        entries = self.cache.read(session_file(self.root, number), _parse_transcript)
        return list(entries or [])

    def bookkeeping(self, transcript: list[Entry] | None = None) -> Bookkeeping:
        return Bookkeeping(
            self.instruction(), self.context(), self.pending_attachments(),
            self.transcript() if transcript is None else transcript, self.rules(),
        )

    def prompt(self, max_tokens: int | None = None) -> str:
        """What the assistant sees now; with `max_tokens`, shortened to fit (SPEC §10)."""
        return render_prompt(self.tree, self.state(), self.bookkeeping(), max_tokens)

    def conversation(self, max_tokens: int | None = None) -> Conversation:
        """The prompt as chat turns for a model endpoint (engine.prompt.render_conversation)."""
        return render_conversation(self.tree, self.state(), self.bookkeeping(), max_tokens)

    def update(self, shown: str) -> str:
        """The current problem's parts that changed since a conversation showed `shown`
        (engine.prompt.render_update)."""
        return render_update(self.tree, self.state(), shown, self.rules())

    def write_prompt(self) -> Path:
        target = bookkeeping(self.root) / PROMPT
        tx = Transaction(self.root, durable=self.durable)
        tx.write(target, self.prompt())
        with locked(self.root):
            tx.commit(self.cache)
        return target

    @property
    def prompt_path(self) -> Path:
        return bookkeeping(self.root) / PROMPT

    # -- running messages ------------------------------------------------------------------------

    def analyze(
        self, text: str, state: State | None = None, parsed: ParsedMessage | None = None,
        *, roots: Sequence[Path] = (), evidence: Evidence | None = None,
    ) -> Analysis:
        """Everything executing `text` would do, without doing it. `parsed` is `parse(text)`
        if the caller already has it (an editor parses on every keystroke). `roots` are the
        folders `attach_file` may read besides the research (`fetch.allowed_roots`);
        `Analysis.needs` lists what the message needs from outside. With `evidence` the
        commands that need it use its results instead (what execution does)."""
        state = state or self.state()
        return analyze(parsed or parse(text), self.tree, state, self.pending_attachments,
                       evidence=evidence, roots=roots, rules=self.rules(), rounds=self.rounds(state))

    def execute(
        self,
        text: str,
        *,
        mode: ApprovalMode = ApprovalMode.DELETE,
        consume: Path | None = None,
        cancelled: Callable[[], bool] | None = None,
        evidence: Evidence | None = None,
        journal: Iterable[Mapping[str, object]] = (),
    ) -> Execution:
        """Run a message: every change it makes lands in one all-or-nothing transaction.

        `mode` says which command kinds may run; if any command needs more, nothing runs.
        `consume` is the message document (a `.dr` file), emptied in the same transaction
        if it still holds the executed text then (someone may have changed it meanwhile:
        then it is left as it is; `Execution.consumed` says which).
        `cancelled` is asked once more just before the commit; after it, nothing stops.
        `evidence` holds what was gathered from outside for this message, before the call
        (`sources.gather.gather_and_execute` does both); a command whose need has no result
        fails with a clear reason, and so do they all without it.
        `journal` holds extra records (the autopilot's round record) appended after the
        command records in the same transaction; one without a `message` key gets the
        message's number.
        """
        if consume is not None and not is_message_document(consume):
            raise NotAMessageDocument(f"{consume} is not a message document (.dr): only .dr documents are executed")
        refuse_not_text(text)  # NotText: a binary document runs nothing and is left as it is
        text = clean_text(text)
        if not text.strip():
            return Execution(False, "empty")
        with locked(self.root):
            recover(self.root, self.cache)
            before = self.state()
            analysis = self.analyze(text, before, evidence=evidence if evidence is not None else Evidence())
            if analysis.needing_approval(mode):
                return Execution(False, "needs-approval", analysis)
            if cancelled is not None and cancelled():
                return Execution(False, "cancelled", analysis)
            return self._commit(text, analysis, before, consume, journal)

    def record(self, journal: Iterable[Mapping[str, object]], transcript: Iterable[Entry] = ()) -> None:
        """Append journal records (and entries to the current session's transcript) when no
        message runs, e.g. an autopilot round whose reply was empty or cut off. One
        transaction, under the lock; the prompt is rewritten if the transcript grew."""
        entries = list(transcript)
        with locked(self.root):
            recover(self.root, self.cache)
            state = self.state()
            tx = Transaction(self.root, durable=self.durable)
            book = bookkeeping(self.root)
            tx.append(book / JOURNAL, "".join(_dumps(r) for r in journal))
            if entries:
                tx.append(session_file(self.root, state.session), "".join(e.to_json() for e in entries))
                transcript_now = self.transcript(state.session) + entries
                tx.write(book / PROMPT, render_prompt(self.tree, state, self.bookkeeping(transcript_now)))
            tx.commit(self.cache)

    def _commit(
        self, text: str, analysis: Analysis, before: State, consume: Path | None,
        journal: Iterable[Mapping[str, object]] = (),
    ) -> Execution:
        draft = analysis.draft
        after = analysis.after.evolve(messages=before.messages + 1, last_message=message_digest(text))
        focus = draft.problem(after.focus) if after.phase is not Phase.NO_PROBLEM else None
        reply = render_reply(analysis, focus.title if focus else None)
        for path in {before.focus, after.focus}:
            # Self-healing: a breakdown made stale by a hand edit of a subproblem is
            # regenerated; the transaction skips it when nothing changed.
            if draft.problem(path) is not None:
                draft.mark(path, BREAKDOWN_ASPECT)
        tx = Transaction(self.root, durable=self.durable)
        for path, content in draft.files().items():
            tx.write(path, content)
        book = bookkeeping(self.root)
        tx.write(book / STATE, after.to_json())
        turn = [Entry("assistant", text.rstrip(), now()), Entry("system", reply, now())]
        tx.append(session_file(self.root, before.session), "".join(e.to_json() for e in turn))
        if after.session != before.session:
            transcript = [Entry("system", _session_note(analysis, before, after), now())]
            tx.append(session_file(self.root, after.session), transcript[0].to_json())
        else:
            transcript = self.transcript(before.session) + turn
        extra = [_dumps({**record, "message": record.get("message", after.messages)}) for record in journal]
        tx.append(book / JOURNAL, "".join(_journal_records(analysis, before, after) + extra))
        prompt = render_prompt(draft, after, self.bookkeeping(transcript))
        tx.write(book / PROMPT, prompt)
        if consume is not None:
            tx.clear_if_unchanged(consume, text)
        undoing.remember(tx, text=text, before=before, after=after, document=consume)  # last: it reads tx
        changed = tx.commit(self.cache)
        consumed = consume is not None and Path(os.path.realpath(consume)) in changed
        return Execution(True, None, analysis, reply, prompt, changed, consumed)


    def undo(self, *, document: object = undoing.RECORDED) -> undoing.Undone:
        """Take back the last executed message (see engine/undo.py); raises undo.UndoRefused
        (nothing changed) when that would lose a hand edit or nothing is left to undo."""
        return undoing.revert(self, document=document)


def _named(items: Sequence[tuple[str, str] | Attachment] | None) -> list[Attachment]:
    stamp = now()
    return [item if isinstance(item, Attachment) and item.added else
            replace(item, added=stamp) if isinstance(item, Attachment) else Attachment(item[0], item[1], stamp)
            for item in items or ()]


def message_digest(text: str) -> str:
    """Identifies a message's text, ignoring trailing whitespace and line-break style."""
    return content_digest(clean_text(text))


def _parse_transcript(text: str) -> list[Entry]:
    entries = (Entry.from_json(line) for line in text.splitlines() if line.strip())
    return [e for e in entries if e is not None]


def _session_note(analysis: Analysis, before: State, after: State) -> str:
    """The first entry of a new session: how the assistant got here, and what of the last
    message did not run (the old session, where its reply went, is no longer shown)."""
    note = _arrival(analysis.draft, before, after)
    lost = [o for o in analysis.outcomes if o.status is not Status.OK]
    if lost:
        note += "\n\nThese commands of your last message did not run; send them again if they still apply:\n"
        note += "\n".join(f"- Line {o.line}, `{o.label}`: {o.summary}" for o in lost)
    return note


def _arrival(draft: Draft, before: State, after: State) -> str:
    if after.phase is not Phase.IN_FOCUS:
        return "The session ended."
    if before.phase is Phase.NO_PROBLEM:
        return "The research problem is defined. This is the first session working on it."
    left = draft.problem(before.focus)
    came = _title(left)
    if len(after.focus) > len(before.focus):
        return f"A new session started: you moved down from {came} into this subproblem."
    status = left.status.value if left else "left"
    return (
        f"A new session started: you came back up from {came}, now {status}. "
        "Its report, if it wrote one, is under Completed Reports."
    )


def _title(problem: Problem | None) -> str:
    return f'"{problem.title}"' if problem else "a subproblem"


def _journal_records(analysis: Analysis, before: State, after: State) -> list[str]:
    records = []
    for index, outcome in enumerate(analysis.outcomes, 1):
        records.append({
            "message": after.messages,
            "session": before.session,
            "index": index,
            "line": outcome.line,
            "command": outcome.command.name,
            "kind": outcome.kind.label if outcome.kind else None,
            "arguments": {k: a.value for k, a in (outcome.args or {}).items()},
            "problem": list(before.focus),
            "started": outcome.started,
            "ended": outcome.ended,
            "status": outcome.status.value,
            "result": outcome.summary if outcome.status is Status.OK else None,
            "error": outcome.summary if outcome.status is not Status.OK else None,
            "warnings": outcome.warnings,
        })
    if analysis.shutdown:
        records.append({
            "message": after.messages, "session": before.session, "command": "SHUT_DOWN_DEEP_RESEARCHER",
            "kind": "update", "started": now(), "ended": now(), "status": "ok",
            "result": "The research was shut down.", "error": None,
        })
    return [json.dumps(r, ensure_ascii=False) + "\n" for r in records]


def _dumps(record: Mapping[str, object]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def _not_a_research(folder: Path, where: Location, found: Path) -> str:
    if where is Location.INSIDE:
        return (
            f"{folder} is inside the research at {found}: messages must be written in a .dr document "
            f"in that research's own folder ({found})."
        )
    return (
        f"{folder} is not a research: it has no {bookkeeping(folder).name}/ folder and no "
        f"{DEFINITION}. Create one with `deep-research new {folder}`."
    )

