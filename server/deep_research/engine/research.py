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
import logging
import os
import shutil
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from . import undo as undoing
from .core.names import free_title, name_key, title_key, unique_component
from .core.state import MAIN, ROOT, Phase, ProblemPath, Seat, State, now
from .core.state import Status as RootStatus
from .core.text import clean_text, refuse_not_text
from .execution.draft import BREAKDOWN_ASPECT, Draft
from .execution.evidence import Evidence
from .language import budgets
from .language.analysis import Analysis, Status, analyze
from .language.commands import ApprovalMode
from .language.parser import ParsedMessage, parse
from .retrieval.index import Index, Source, source_key
from .retrieval.parts import layout
from .settings.rules import Rules, rules_of
from .settings.table import Config
from .settings.table import read as read_settings
from .store import (
    ATTACHMENTS, BOOKKEEPING, CONTEXT, DEFINITION, INSTRUCTION, JOURNAL, PENDING_ATTACHMENTS, PROMPT, STATE,
    SUBPROBLEMS, FileCache, Reads, Transaction, bookkeeping, content_digest, locked, make_folders, pending_path,
    recover, researcher_folder, session_file,
)
from .store import MESSAGE_FILE, is_message_document  # the message document: callers find them here too
from .tree import formats
from .tree.model import Attachment, Problem
from .tree.reader import Tree, attachment_files, ordered_attachments, problem_name, read_attachments
from .views.prompt import (
    Bookkeeping, Conversation, Entry, Fit, Section, render_conversation, render_prompt, view_sections,
)
from .views.session import Recent, read_recent
from .views.session import parse as parse_session
from .views.reply import render_reply


log = logging.getLogger("deep_research.engine")


class NotAResearch(Exception):
    """The folder holds neither a research nor a problem tree to adopt."""


class NotAMessageDocument(ValueError):
    """Only `.dr` documents are executed or consumed; this path is something else."""


class NoSuchResearcher(LookupError):
    """No researcher of that name (or for that document) is working: the text says which exist."""


@dataclass(frozen=True)
class Researcher:
    """One researcher that has not ended, as `deep-research researchers` lists it (SPEC §12)."""

    name: str  # MAIN, or the titles below the root down to its root problem, joined by " / "
    document: Path  # its message document
    focus: str  # the titles below the root down to its current problem, joined the same way
    state: str  # "working", or "waiting" for its own delegations to end
    seat: Seat

    def to_json(self) -> dict:
        return {"name": self.name, "document": str(self.document), "focus": self.focus, "state": self.state}


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
    researcher: str = MAIN  # whose message it was


@dataclass(frozen=True)
class DryRun:
    """A message checked and analysed outside the lock (`Research.dry_run`): what executing it
    would do as the research was then, and everything that analysis read (`reads`)."""

    text: str  # checked and cleaned (`checked_message`)
    researcher: str | None
    consume: Path | None = None
    roots: tuple[Path, ...] = ()  # the folders attach_file may read besides the research
    analysis: Analysis | None = None  # None for an empty message
    reads: Reads | None = None

    def reusable(self, before: State) -> Analysis | None:
        """The analysis, if execution may take it as it is: the researcher's state is still
        `before`, nothing it read changed, and it needs nothing from outside (a message that
        does is analysed again with what was gathered), nor searches (a `find`, which a dry run
        leaves to execution)."""
        analysis = self.analysis
        if analysis is None or self.reads is None or analysis.needs or analysis.searches or analysis.before != before:
            return None
        return analysis if self.reads.unchanged() else None


def checked_message(text: str, consume: Path | None = None) -> str:
    """The one check of a message before anything runs: only a `.dr` document is executed
    (NotAMessageDocument), and a message that is not text runs nothing (NotText); the text
    cleaned of what cannot be written (`text.clean_text`)."""
    checked_document(consume)
    refuse_not_text(text)  # NotText: a binary document runs nothing and is left as it is
    return clean_text(text)


def checked_document(consume: Path | None) -> Path | None:
    """`consume` if it may be executed and emptied (only `.dr` documents are); NotAMessageDocument if not."""
    if consume is not None and not is_message_document(consume):
        raise NotAMessageDocument(f"{consume} is not a message document (.dr): only .dr documents are executed")
    return consume


class Research:
    def __init__(self, root: Path, cache: FileCache | None = None) -> None:
        self.root = root.resolve()
        self.cache = cache if cache is not None else FileCache()
        self.tree = Tree(self.root, self.cache)
        self.guard = self.tree.guard  # what of the folder may be read (store.Guard): every reader uses it
        self.durable = True  # fsync at commit; benchmarks may turn it off to measure the rest
        # Rules an editor's settings set over the research's deep-research.toml (engine/settings/rules.py).
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
    def of_document(cls, document: Path, cache: FileCache | None = None) -> tuple[Research, str]:
        """The research a message document belongs to, and the researcher whose document it is:
        main's in the research's folder, a delegated researcher's in its problem's folder.
        Raises NotAResearch or NoSuchResearcher with a sentence."""
        folder = Path(os.path.realpath(document)).parent
        where, found = locate(folder)
        if where is Location.INSIDE:
            research = cls.open(found, cache)
            return research, research.researcher_of(document)
        return cls.open(folder, cache), MAIN

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
            for item in attachments:  # once the problem exists they go to the root
                if not _given_again(item, draft.attachments(ROOT)):
                    draft.add_attachment(ROOT, draft.free_attachment_name(ROOT, item.name), item.content,
                                         **item.origin())
        message = self.root / MESSAGE_FILE
        if not message.exists():
            tx.write(message, "")
        transcript = self.recent(before.session)
        reopened = reopen and before.phase in (Phase.FINISHED, Phase.SHUT_DOWN)
        if reopened:
            draft.set_status(ROOT, RootStatus.OPEN)
            state = before.new_session(phase=Phase.IN_FOCUS, focus=ROOT)
            note = Entry("system", (
                f"The user reopened the research (it had {'finished' if before.phase is Phase.FINISHED else 'been shut down'}). "
                "A new session starts at the root problem: read the instruction and the context again, they may have changed."
            ), now())
            transcript = Recent([note])
            tx.write(book / STATE, state.to_json())
            tx.append(session_file(self.root, state.session), note.to_json())
            record = {"message": state.messages, "session": state.session, "command": "reopen", "kind": "update",
                      "started": note.at, "ended": now(), "status": "ok", "result": note.text, "error": None}
            tx.append(book / JOURNAL, json.dumps(record, ensure_ascii=False) + "\n")
        for path, content in draft.files().items():
            tx.write(path, content)
        self._write_prompts(tx, draft, state, {MAIN: transcript},
                            Bookkeeping(given, context_now, pending_now, [], self.rules()))
        if not new and (instruction.strip() or context or attachments or reopened):
            undoing.forget_all(tx)  # what the user gave changes the prompt: see engine/undo.py
        tx.commit(self.cache)
        if context or draft.new_attachments:  # indexed for `find` as they are added (engine/retrieval/index.py)
            index = Index(self.root, self.guard, durable=self.durable)
            try:
                self._index_new(index, attachment_files(book / CONTEXT, self.cache) + self._added(draft))
            finally:
                index.close()
        return reopened

    def _add_named(self, tx: Transaction, folder: Path, items: list[Attachment]) -> list[Attachment]:
        """Add `items` to `tx` as attachment files in `folder`; the folder's attachments as
        they will read back once it is committed."""
        present = attachment_files(folder, self.cache)
        taken = {name_key(p.name) for p in folder.glob("*.md")} if folder.is_dir() else set()
        names = {title_key(a.name) for a, _ in present}
        for item in items:
            if _given_again(item, [a for a, _ in present]):
                continue
            item = replace(item, name=free_title(item.name, lambda name: title_key(name) in names)).attached()
            names.add(title_key(item.name))
            file_name = unique_component(item.name, taken, suffix=".md")
            taken.add(name_key(file_name))
            text = formats.render_attachment(item)
            tx.write(folder / file_name, text)
            present.append((formats.parse_attachment(text, fallback_name=file_name[:-3]), folder / file_name))
        return [item for item, _ in ordered_attachments(present)]

    # -- reading ----------------------------------------------------------------------------

    def state(self, researcher: str = MAIN) -> State:
        """The persisted state as `researcher` sees it, reconciled with the tree as it is on disk
        now. Raises NoSuchResearcher if no researcher of that name is working."""
        stored = self.cache.read(bookkeeping(self.root) / STATE, State.from_json)
        state = self._reconcile(stored or State(phase=Phase.IN_FOCUS if self.tree.exists(ROOT) else Phase.NO_PROBLEM))
        if researcher == MAIN:
            return state
        view = state.view(self.researcher_named(researcher, state))
        assert view is not None
        return view

    def _reconcile(self, state: State) -> State:
        has_root = self.tree.exists(ROOT)
        if state.phase is Phase.NO_PROBLEM and has_root:
            return state.evolve(phase=Phase.IN_FOCUS, focus=ROOT, others=())
        if state.phase is not Phase.NO_PROBLEM and not has_root:
            return state.evolve(phase=Phase.NO_PROBLEM, focus=ROOT, others=())
        focus = self._existing(state.focus, ROOT)
        seats = []
        for seat in state.others:  # a delegated problem deleted or renamed by hand ends its researcher
            if self.tree.exists(seat.root):
                seats.append(replace(seat, focus=self._existing(seat.focus, seat.root)))
        if focus == state.focus and seats == list(state.others):
            return state
        return state.evolve(focus=focus, others=tuple(seats))

    def _existing(self, focus: ProblemPath, root: ProblemPath) -> ProblemPath:
        """`focus`, or the nearest problem above it (not above `root`) that still exists."""
        while len(focus) > len(root) and not self.tree.exists(focus):  # renamed or deleted by hand
            focus = focus[:-1]
        return focus

    # -- researchers ------------------------------------------------------------------------

    def researchers(self) -> list[Researcher]:
        """Every researcher that has not ended, main first (SPEC §12)."""
        state = self.state()
        if state.phase is Phase.NO_PROBLEM:
            return [Researcher(MAIN, self.document(MAIN), "", "working", state.seat)]
        out = []
        for seat in state.seats():
            waiting = any(other.root[:-1] == seat.focus for other in state.delegated() if other.name != seat.name)
            out.append(Researcher(seat.name, self.document(seat.name, state), self.titles(seat.focus),
                                  "waiting" if waiting else "working", seat))
        return out

    def researcher_named(self, name: str, state: State | None = None) -> str:
        """The name of the working researcher `name` designates: exactly, or with titles that
        differ only in case, spacing or normalisation. Raises NoSuchResearcher, listing them."""
        state = state or self.state()
        seats = state.seats() if state.phase is not Phase.NO_PROBLEM else [state.seat]
        if any(seat.name == name for seat in seats):
            return name
        wanted = _name_key(name)
        for seat in seats:
            if _name_key(seat.name) == wanted:
                return seat.name
        listing = ", ".join(f'"{seat.name}"' for seat in seats)
        raise NoSuchResearcher(f"No researcher called \"{name}\" is working on this research; the researchers are: {listing}.")

    def document(self, researcher: str = MAIN, state: State | None = None) -> Path:
        """A researcher's message document: main's is the research's `message.dr`; a delegated
        one's is `message.dr` in its problem's folder (the folder that holds a researcher's
        document is its root problem's folder, as for the research itself)."""
        if researcher == MAIN:
            return self.root / MESSAGE_FILE
        seat = (state or self.state()).find(researcher)
        if seat is None:
            raise NoSuchResearcher(f"No researcher called \"{researcher}\" is working on this research.")
        return self.tree.folder(seat.root) / MESSAGE_FILE

    def researcher_of(self, document: Path) -> str:
        """The researcher whose message document `document` is: main for a `.dr` document in
        the research's folder, the delegated researcher of a problem for one in that problem's
        folder. Raises NoSuchResearcher (saying why) for any other place."""
        folder = Path(os.path.realpath(document)).parent
        if folder == self.root:
            return MAIN
        state = self.state()
        for seat in state.delegated():
            if Path(os.path.realpath(self.tree.folder(seat.root))) == folder:
                return seat.name
        raise NoSuchResearcher(
            f"No researcher works from {document}: a message document belongs in the research's own folder "
            f"({self.root / MESSAGE_FILE}) or in the folder of a delegated problem whose researcher is still working "
            "(`deep-research researchers` lists them). A delegated researcher's document stays after it ends, "
            "but runs nothing.")

    def titles(self, path: ProblemPath) -> str:
        """The titles below the root down to `path`, joined by " / " (a researcher's name, a focus)."""
        return problem_name(self.tree, path)

    def prompt_file(self, researcher: str = MAIN, state: State | None = None) -> Path:
        """Where a researcher's prompt is written (main's is `.deep-research/prompt.md`)."""
        if researcher == MAIN:
            return bookkeeping(self.root) / PROMPT
        seat = (state or self.state()).find(researcher)
        if seat is None:
            raise NoSuchResearcher(f"No researcher called \"{researcher}\" is working on this research.")
        return researcher_folder(self.root, seat.root) / PROMPT

    def focus(self) -> Problem | None:
        state = self.state()
        return self.tree.problem(state.focus) if state.phase is not Phase.NO_PROBLEM else None

    def config(self) -> Config:
        """The research's settings: its deep-research.toml over the table's defaults, read
        through the file cache (parsed once per change of the file). A front end merges its
        own over them (the editor's settings, `run`'s options: `Config.merged`)."""
        return read_settings(self.root, self.cache)[0]

    def config_problems(self) -> tuple[str, ...]:
        """What is wrong in the research's deep-research.toml, one sentence each (for a front end to show)."""
        return read_settings(self.root, self.cache)[1]

    def rules(self) -> Rules:
        """The research's limits: its deep-research.toml, under `rule_overrides`."""
        rules = rules_of(self.config())
        return replace(rules, **self.rule_overrides) if self.rule_overrides else rules

    def rounds(self, state: State | None = None) -> int:
        """The autopilot's rounds at the focus in its current visit (engine/language/budgets.py), from the
        journal: a stat per call (noted for kept analyses), its tail read when it changed."""
        state = state or self.state()
        journal = bookkeeping(self.root) / JOURNAL
        st = self.cache.stat(journal)
        if st is None:
            return 0
        key = (st.st_ino, st.st_size, st.st_mtime_ns, state.researcher, state.session, state.focus)
        if self._rounds is None or self._rounds[0] != key:
            self._rounds = (key, budgets.rounds_in_session(journal, state.session, state.focus, state.researcher))
        return self._rounds[1]

    def refusals(self, state: State | None = None) -> budgets.Refusals:
        """What the research's budgets refuse at the focus now (engine/language/budgets.py)."""
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
        """The whole session (the current one by default), every entry of its log."""
        number = self.state().session if session is None else session
        entries = self.cache.read(session_file(self.root, number), parse_session)
        return list(entries or [])

    def recent(self, session: int | None = None) -> Recent:
        """The end of the session (the current one by default) that its prompt can show: its log
        read from its end only (engine/views/session.py)."""
        number = self.state().session if session is None else session
        return read_recent(self.guard, session_file(self.root, number))

    def bookkeeping(self, session: Recent | list[Entry] | None = None, researcher: str = MAIN) -> Bookkeeping:
        """What the user gave, and the session (by default the end of `researcher`'s)."""
        if session is None:
            session = self.recent(self.state(researcher).session)
        if isinstance(session, list):
            session = Recent(session)
        return Bookkeeping(self.instruction(), self.context(), self.pending_attachments(), session.entries,
                           self.rules(), session.earlier, session.earlier_messages)

    def prompt(self, max_tokens: int | None = None, researcher: str = MAIN) -> str:
        """What the assistant (researcher `researcher`) sees now; with `max_tokens`, shortened
        to fit (SPEC §10)."""
        return render_prompt(self.tree, self.state(researcher), self.bookkeeping(researcher=researcher), max_tokens)

    def conversation(self, max_tokens: int | None = None, researcher: str = MAIN) -> Conversation:
        """The prompt as chat turns for a model endpoint (engine.prompt.render_conversation)."""
        state = self.state(researcher)
        return render_conversation(self.tree, state, self.bookkeeping(self.transcript(state.session), researcher),
                                   max_tokens)

    def sections(self, researcher: str = MAIN, fit: Fit = Fit()) -> list[Section]:
        """What the researcher's prompt shows of its view, section by section, its parts cut as
        `fit` says (engine.prompt.view_sections; for engine.prompt.render_update)."""
        return view_sections(self.tree, self.state(researcher), self.bookkeeping([], researcher), fit)

    def write_prompt(self, researcher: str = MAIN) -> Path:
        target = self.prompt_file(researcher)
        tx = Transaction(self.root, durable=self.durable)
        tx.write(target, self.prompt(researcher=researcher))
        with locked(self.root):
            tx.commit(self.cache)
        return target

    @property
    def prompt_path(self) -> Path:
        return bookkeeping(self.root) / PROMPT

    # -- running messages ------------------------------------------------------------------------

    def analyze(
        self, text: str, state: State | None = None, parsed: ParsedMessage | None = None,
        *, roots: Sequence[Path] = (), evidence: Evidence | None = None, index: Index | None = None,
    ) -> Analysis:
        """Everything executing `text` would do, without doing it. `parsed` is `parse(text)`
        if the caller already has it (an editor parses on every keystroke). `roots` are the
        folders `attach_file` may read besides the research (`fetch.allowed_roots`);
        `Analysis.needs` lists what the message needs from outside. With `evidence` the
        commands that need it use its results instead (what execution does)."""
        state = state or self.state()
        return analyze(parsed or parse(text), self.tree, state, self.pending_attachments,
                       evidence=evidence, roots=roots, rules=self.rules(), rounds=self.rounds(state), index=index)

    def dry_run(
        self, text: str, *, consume: Path | None = None, researcher: str | None = None, roots: Sequence[Path] = (),
    ) -> DryRun:
        """Check a message once and analyse it, writing nothing, outside the lock: what it
        needs from outside and which of its commands need approval. `execute` takes the result
        and reuses its analysis when nothing it read has changed since (and the message needs
        nothing from outside). Raises NotAMessageDocument for a `consume` that is not a `.dr`
        document, NotText for a message that is not text, NoSuchResearcher (see `execute`)."""
        text = checked_message(text, consume)
        name = researcher if researcher is not None else self.researcher_of(consume) if consume is not None else MAIN
        if not text.strip():
            return DryRun(text, name, consume, tuple(roots))
        with self.cache.recording() as reads:
            analysis = self.analyze(text, self.state(name), roots=roots)
        return DryRun(text, name, consume, tuple(roots), analysis, reads)

    def execute(
        self,
        text: str | DryRun,
        *,
        mode: ApprovalMode = ApprovalMode.DELETE,
        consume: Path | None = None,
        cancelled: Callable[[], bool] | None = None,
        evidence: Evidence | None = None,
        journal: Iterable[Mapping[str, object]] = (),
        researcher: str | None = None,
    ) -> Execution:
        """Run a message: every change it makes lands in one all-or-nothing transaction.

        `text` is the message, or its `dry_run` (then `consume` and `researcher` are the dry
        run's, and its analysis is reused if it still holds).
        `researcher` is whose message it is: by default the researcher whose document
        `consume` is (`researcher_of`), else main. Raises NoSuchResearcher if it is not working.
        `mode` says which command kinds may run; if any command needs more, nothing runs.
        `consume` is the message document (a `.dr` file), emptied in the same transaction
        if it still holds the executed text then (someone may have changed it meanwhile:
        then it is left as it is; `Execution.consumed` says which). A message that this
        researcher has just run and that its document no longer holds is not run again
        (two processes executing one document at once: it runs once; reason "already-run").
        `cancelled` is asked once more just before the commit; after it, nothing stops.
        `evidence` holds what was gathered from outside for this message, before the call
        (`app/execute.py::execute` does both); a command whose need has no result
        fails with a clear reason, and so do they all without it.
        `journal` holds extra records (the autopilot's round record) appended after the
        command records in the same transaction; one without a `message` key gets the
        message's number.
        """
        if isinstance(text, DryRun):
            dry = text
        else:  # checked here, once (a dry run was checked when it was made)
            message = checked_message(text, consume)
            dry = DryRun(message, researcher, consume, tuple(evidence.roots) if evidence is not None else ())
        text, consume = dry.text, dry.consume
        if not text.strip():
            return Execution(False, "empty")
        with locked(self.root):
            recover(self.root, self.cache)
            name = dry.researcher if dry.researcher is not None else \
                self.researcher_of(consume) if consume is not None else MAIN
            before = self.state(name)
            if consume is not None and _already_run(text, before, self.guard.read_text(consume)):
                return Execution(False, "already-run", researcher=before.researcher)
            index = Index(self.root, self.guard, durable=self.durable)  # opened by the first `find`, if any
            try:
                analysis = dry.reusable(before)
                if analysis is None:
                    analysis = self.analyze(text, before, evidence=evidence if evidence is not None else Evidence(),
                                            roots=dry.roots, index=index)
                if analysis.needing_approval(mode):
                    return Execution(False, "needs-approval", analysis, researcher=before.researcher)
                if cancelled is not None and cancelled():
                    return Execution(False, "cancelled", analysis, researcher=before.researcher)
                execution = self._commit(text, analysis, before, consume, journal)
                self._index_new(index, self._added(analysis.draft))
                return execution
            finally:
                index.close()

    def record(self, journal: Iterable[Mapping[str, object]], transcript: Iterable[Entry] = (),
               researcher: str = MAIN) -> None:
        """Append journal records (and entries to a researcher's current session transcript)
        when no message runs, e.g. an autopilot round whose reply was empty or cut off. One
        transaction, under the lock; that researcher's prompt is rewritten if the transcript grew."""
        entries = list(transcript)
        with locked(self.root):
            recover(self.root, self.cache)
            state = self.state(researcher)
            tx = Transaction(self.root, durable=self.durable)
            book = bookkeeping(self.root)
            tx.append(book / JOURNAL, "".join(_dumps(r) for r in journal))
            if entries:
                tx.append(session_file(self.root, state.session), "".join(e.to_json() for e in entries))
                tx.write(self.prompt_file(researcher, state),
                         render_prompt(self.tree, state, self.bookkeeping(self.recent(state.session).plus(entries),
                                                                          researcher)))
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
        transcripts: dict[str, Recent] = {}
        if after.session != before.session and not after.ended:
            note = Entry("system", _session_note(analysis, before, after), now())
            transcript = Recent([note])
            tx.append(session_file(self.root, after.session), note.to_json())
        else:
            transcript = self.recent(before.session).plus(turn)
        transcripts[after.researcher] = transcript
        known = {seat.name for seat in before.seats()}
        for seat in after.delegated():
            if seat.name in known:
                continue
            # A delegation: the new researcher's document, its first session and its prompt.
            document = self.tree.folder(seat.root) / MESSAGE_FILE
            if not document.exists():
                tx.write(document, "")
            opening = Entry("system", _delegation_note(draft, after, seat), now())
            tx.append(session_file(self.root, seat.session), opening.to_json())
            transcripts[seat.name] = Recent([opening])
        extra = [_dumps({**record, "message": record.get("message", after.messages)}) for record in journal]
        tx.append(book / JOURNAL, "".join(_journal_records(analysis, before, after) + extra))
        prompt = self._write_prompts(tx, draft, after, transcripts)
        if after.ended:
            tx.delete(researcher_folder(self.root, before.root) / PROMPT)
        if consume is not None:
            tx.clear_if_unchanged(consume, text)
        undoing.remember(tx, text=text, before=before, after=after, document=consume)  # last: it reads tx
        changed = tx.commit(self.cache)
        consumed = consume is not None and Path(os.path.realpath(consume)) in changed
        return Execution(True, None, analysis, reply, prompt, changed, consumed, after.researcher)

    def _added(self, draft: Draft) -> list[tuple[Attachment, Path]]:
        """The attachments `draft` adds, with the files they are written to."""
        return [(item.attachment, self.tree.folder(item.path) / ATTACHMENTS / item.file_name)
                for item in draft.new_attachments]

    def _index_new(self, index: Index, added: Sequence[tuple[Attachment, Path]]) -> None:
        """Index what a transaction just added (after it, under the lock: engine/retrieval/index.py says why).
        A failure loses nothing: the next `find` sees the index behind and brings it up to date."""
        if not added:
            return
        part_chars = self.rules().part_chars
        try:
            index.sync([Source(key, item.content, layout(item.content, part_chars, item.reading), file,
                               partial(_body, fallback=file.stem))
                        for item, file, key in ((a, f, source_key(self.root, f)) for a, f in added)], prune=False)
        except Exception:  # derived data: never the reason a message fails
            log.exception("indexing the new attachments of %s failed; the next find will", self.root)

    def _write_prompts(self, tx: Transaction, draft: Draft, after: State, transcripts: dict[str, Recent],
                       book: Bookkeeping | None = None) -> str:
        """Write every working researcher's prompt as it is after the message into `tx` (a
        message may change what the others see: a report they wait for, a parent they show);
        the transaction leaves a prompt that did not change alone. `transcripts` are the
        sessions the message changed, by researcher; `book` what the user gave, if it changes
        in the same transaction. Returns the writer's own prompt."""
        book = book or self.bookkeeping([])
        views = [after] if after.ended else []
        views += [after.view(seat.name) for seat in after.seats()]
        own = ""
        for view in views:
            if view is None:
                continue
            session = transcripts.get(view.researcher)
            if session is None:
                session = self.recent(view.session)
            text = render_prompt(draft, view, replace(book, transcript=session.entries, earlier=session.earlier,
                                                      earlier_messages=session.earlier_messages))
            if view.researcher == after.researcher:
                own = text
            if not view.ended:
                tx.write(self.prompt_file(view.researcher, after), text)
        return own

    def undo(self, *, document: object = undoing.RECORDED) -> undoing.Undone:
        """Take back the last executed message (see engine/undo.py); raises undo.UndoRefused
        (nothing changed) when that would lose a hand edit or nothing is left to undo."""
        return undoing.revert(self, document=document)


def _body(text: str, fallback: str) -> str:
    """An attachment file's text as the attachment's content (what the index holds of it)."""
    return formats.parse_attachment(text, fallback_name=fallback).content


def _given_again(item: Attachment, present: Sequence[Attachment]) -> bool:
    """Whether `item`'s text is already there (a file given twice is kept once, whatever its name).
    Another text under a name that is taken is kept too, under a name of its own (`free_title`)."""
    text = formats.parse_attachment(formats.render_attachment(item), item.name).content  # as it would read back
    return any(a.content == text for a in present)


def _named(items: Sequence[tuple[str, str] | Attachment] | None) -> list[Attachment]:
    stamp = now()
    return [item if isinstance(item, Attachment) and item.added else
            replace(item, added=stamp) if isinstance(item, Attachment) else Attachment(item[0], item[1], stamp)
            for item in items or ()]


def _name_key(name: str) -> str:
    """A researcher's name (or a problem's, as titles joined by " / ") as names compare."""
    return "/".join(title_key(part) for part in name.split("/"))  # the one comparison of titles (names.py)


def message_digest(text: str) -> str:
    """Identifies a message's text, ignoring trailing whitespace and line-break style."""
    return content_digest(clean_text(text))


def _already_run(text: str, before: State, held: str | None) -> bool:
    """The researcher's last message was this text and its document (`held`, what it holds now)
    no longer holds it: another process (or editor) ran it meanwhile, so it must not run again."""
    if before.last_message != message_digest(text):
        return False
    return held is None or message_digest(held) != before.last_message


def _delegation_note(draft: Draft, after: State, seat: Seat) -> str:
    """The first entry of a delegated researcher's first session."""
    problem = draft.problem(seat.root)
    parent = draft.problem(seat.root[:-1])
    title = f'"{problem.title}"' if problem else "this problem"
    above = f'"{parent.title}"' if parent else "its parent"
    return (
        f"The researcher \"{after.researcher}\" delegated {title} to you: you are its researcher, and you work at "
        "the same time as other researchers on other parts of the research. Your root problem is "
        f"{title}: the problems above it are shown as context, and you cannot change them or focus up beyond it. "
        f"When it is solved, write its report and focus up (`///focus_up`): that ends your work, and your report "
        f"goes to {above}. If it cannot be solved, use `///fail_task_and_focus_up` with the reason. "
        "This is the first session."
    )


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
    records: list[dict] = []
    for index, outcome in enumerate(analysis.outcomes, 1):
        records.append({
            "message": after.messages,
            "researcher": before.researcher,
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
            "message": after.messages, "researcher": before.researcher, "session": before.session,
            "command": "SHUT_DOWN_DEEP_RESEARCHER",
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

