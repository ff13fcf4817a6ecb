"""The language server: a pygls server holding per-document state.

Features live in `features/*.py`, each with a `register(server)` function, and import
this module (pygls resolves their handlers' type hints, so the class must be importable
at run time); `wiring.py` builds a server and registers them. Handlers are thin: they
convert LSP values, call the engine, and convert back.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import importlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable
from urllib.parse import unquote

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from .. import __version__
from ..engine.core.state import MAIN, Phase
from ..engine.core.text import split_lines
from ..engine.language.parser import ParsedMessage, parse, reparse
from ..engine.store import STATE, FileCache, Reads, bookkeeping, recording, watched_stat
from ..engine.store.watch import moment
from .config import SECTION, Settings
from .convert import Positions
from .tree_files import is_tree_markdown

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.language.analysis import Analysis
    from ..engine.language.incremental import DocumentAnalysis
    from ..engine.research import Research
    from ..engine.settings.table import Config
    from ..engine.tree.accounting import Ledger
    from ..engine.views.assist import Snapshot
    from .features.autopilot.run import EditorRun
    from .features.diagnostics import Report

# The rest of the engine (the command table, analysis, the research) is imported where it
# is first used, and warmed up in a thread once `initialize` is answered (see warm_up).

log = logging.getLogger("deep_research.lsp")


class _Later:
    """Engine modules the handlers of every keystroke use, imported on first use: `later.assist`.
    An `import` statement in a handler costs microseconds on every request; an attribute of
    this, once loaded, nothing (the cached property becomes a plain attribute)."""

    @functools.cached_property
    def assist(self):  # type: ignore[no-untyped-def]
        from ..engine.views import assist

        return assist

    @functools.cached_property
    def incremental(self):  # type: ignore[no-untyped-def]
        from ..engine.language import incremental

        return incremental

    @functools.cached_property
    def settings(self):  # type: ignore[no-untyped-def]
        from ..engine.settings import table

        return table


later = _Later()


@dataclass
class Place:
    """Where a document sits: its research and the researcher whose message document it is
    (main's in the research's folder, a delegated researcher's in its problem's folder), or
    why it has none."""

    research: "Research | None"
    root: Path | None
    problem: str | None  # shown as a diagnostic when the document cannot run here
    can_become_research: bool = False  # "Make this folder a research" applies
    researcher: str = MAIN
    # A document in a research's tree that no researcher works from (its researcher ended):
    # nothing runs from it, but the research's views (tree, researchers) still show.
    around: "Research | None" = None

    @property
    def phase(self) -> Phase:
        return self.research.state().phase if self.research else Phase.NO_PROBLEM


@dataclass(frozen=True)
class Document:
    """One open document as the features see it: text, parse, position conversion."""

    uri: str
    version: int | None
    text: str
    parsed: ParsedMessage
    positions: Positions


# What only reads the research: each such message is answered on one look at the disk (with
# the watch on, one read of the inotify descriptor and one stat of the research's root, however
# many results it checks: engine/store/watch.py's `moment`). Nothing here writes to the research.
_READ_ONLY = frozenset({
    types.TEXT_DOCUMENT_COMPLETION, types.COMPLETION_ITEM_RESOLVE, types.TEXT_DOCUMENT_HOVER,
    types.TEXT_DOCUMENT_DIAGNOSTIC, types.TEXT_DOCUMENT_CODE_ACTION, types.TEXT_DOCUMENT_DOCUMENT_SYMBOL,
    types.TEXT_DOCUMENT_FOLDING_RANGE, types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, types.TEXT_DOCUMENT_DEFINITION,
    types.TEXT_DOCUMENT_DID_OPEN, types.TEXT_DOCUMENT_DID_CHANGE,
})


class _Protocol(LanguageServerProtocol):
    """pygls 2.1 keeps the future of every handler it runs under an id of its own (the
    user's async command inside `workspace/executeCommand`, every notification) in
    `_request_futures` and never drops it: each kept its result, ~100 KB per tree page in
    a large research. Before running a handler, forget the ones that are done (replies to
    the client's own requests are sent by their callbacks as before; those pop them too)."""

    def _execute_handler(self, msg_id, handler, callback, args=None, kwargs=None):  # type: ignore[no-untyped-def]
        futures = self._request_futures
        if futures:  # none, mostly: a request answered at once leaves nothing here
            for done in [key for key, future in futures.items() if future.done()]:
                futures.pop(done, None)
        super()._execute_handler(msg_id, handler, callback, args, kwargs)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):  # type: ignore[no-untyped-def]
        """A change to a document that is not open has nothing to apply to (pygls raises
        KeyError inside its workspace): the client's mistake, dropped with a warning."""
        if unquote(params.text_document.uri) not in self.workspace.text_documents:
            log.warning("refused a change to a document that is not open: %s", params.text_document.uri)
            return
        yield from super().lsp_text_document__did_change(params)

    def _handle_request(self, msg_id, method_name, params):  # type: ignore[no-untyped-def]
        if method_name in _READ_ONLY:
            with moment():
                return super()._handle_request(msg_id, method_name, params)
        return super()._handle_request(msg_id, method_name, params)

    def _handle_notification(self, method_name, params):  # type: ignore[no-untyped-def]
        if method_name in _READ_ONLY:
            with moment():
                return super()._handle_notification(method_name, params)
        return super()._handle_notification(method_name, params)

    def structure_message(self, data):  # type: ignore[no-untyped-def]
        """pygls logs a request whose parameters do not fit the method and drops it: the
        client would wait for ever. Answer it with the error (JSON-RPC's Invalid params; pygls
        calls what its converter trips over an internal error, but it is the message's fault)."""
        if "jsonrpc" not in data:  # an object inside the message (JSON's object hook sees each): as pygls does
            return data
        try:
            try:
                return super().structure_message(data)
            except JsonRpcInternalError as error:
                raise JsonRpcInvalidParams() from error
        except JsonRpcException as error:
            ident = data.get("id") if isinstance(data, dict) else None
            if isinstance(data, dict) and "method" in data and isinstance(ident, (int, str)) and not isinstance(ident, bool):
                self._send_response(ident, error=error.to_response_error())
            raise


class DeepResearchServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("deep-research", __version__, protocol_cls=_Protocol)
        self._researches: dict[Path, Research] = {}
        self._analyses: dict[str, DocumentAnalysis] = {}  # by document URI
        self.settings = Settings()
        # root -> (the look at its toml, the config from it, the editor's settings, the two merged)
        self._configs: dict[Path, tuple[Reads, Config, Settings | None, Config | None]] = {}
        self._parses: dict[str, tuple[int | None, str, ParsedMessage, Document]] = {}
        self._places: dict[str, tuple[Place, Reads, tuple]] = {}  # a document's research, its state file, the workspace
        self.reports: dict[str, Report] = {}  # the last diagnostics of each document (features/diagnostics.py)
        # By research (one per root for the server's life) and researcher: what completion and hover know of it
        self._snapshots: dict[tuple[Research, str], _KeptSnapshot] = {}
        # Text each document held when it was executed: that text never runs again,
        # until the document has held something else (then it is a new message). A
        # document is one researcher's, so this guard is kept per researcher too.
        self.executed: dict[str, str] = {}
        # Open documents, by the URI exactly as the client sent it (pygls keys them unquoted).
        self.open_uris: set[str] = set()
        # The autopilot of each message document that has one running or waiting
        # (features/autopilot/); execution and document changes report to it.
        self.autopilots: dict[str, EditorRun] = {}
        # Whether the client re-reads files changed on disk (initializationOptions
        # `reloadsChangedFiles`); if not, the line count of the prompt it was first shown.
        self.reloads_changed_files = False
        self.shown_prompt_lines: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._ledgers: dict[Path, Ledger] = {}
        # What brings every open document's diagnostics up to date (features/diagnostics.py
        # sets it): features that change a research call `refresh_diagnostics`, not that feature.
        self.diagnostics_refresher: Callable[[], None] = lambda: None

    # -- settings ---------------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        """The editor's `deepResearch` settings; the research rules among them (reportMaxWords)
        apply to every research the server holds, and kept analyses are redone under them."""
        self._settings = value
        overrides = value.rule_overrides()
        for research in self._researches.values():
            if research.rule_overrides != overrides:
                research.rule_overrides = overrides
                self._analyses.clear()
                self._snapshots.clear()  # what the budgets refuse depends on the rules too

    async def refresh_settings(self) -> bool:
        """Ask the client for `deepResearch`; False if it cannot answer."""
        if not self.supports("workspace.configuration"):
            return False
        try:
            result = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            )
        except Exception as error:  # a client that fails to answer keeps the old settings
            log.warning("could not read the deepResearch settings: %s", error)
            return False
        self.settings = Settings.from_client(result[0] if result else None)
        log.info("%s", self.settings.describe())
        return True

    def refresh_diagnostics(self) -> None:
        """A research changed under the open documents: bring all their diagnostics up to date."""
        self.diagnostics_refresher()

    # -- errors go to the log, never to popups ------------------------------------------------

    def report_server_error(self, error: Exception, source: object) -> None:
        """pygls reports here both what went wrong in the server and what it refused of the
        client (a method it does not know, parameters that do not fit): only the former is
        an internal error; the latter is the client's mistake, answered as such."""
        where = getattr(source, "__name__", source)
        # pygls's reader reports under JsonRpcException what it could not read as JSON-RPC
        # (the handlers' own failures reach here under other sources).
        if source is JsonRpcException or isinstance(error, JsonRpcException) and not isinstance(error, JsonRpcInternalError):
            log.warning("refused a message from the client (%s): %s: %s", where, type(error).__name__, error)
        else:
            log.error("internal error (%s): %s: %s", where, type(error).__name__, error)

    # -- client capabilities ------------------------------------------------------------------

    def supports(self, path: str) -> bool:
        return bool(get_capability(self.client_capabilities, path, False))

    def capability(self, path: str) -> object:
        """A client capability by its dotted path (None if the client did not say)."""
        return get_capability(self.client_capabilities, path, None)

    @property
    def pulls_diagnostics(self) -> bool:
        return get_capability(self.client_capabilities, "text_document.diagnostic", None) is not None

    @property
    def encoding(self) -> str:
        encoding = self.server_capabilities.position_encoding
        return str(encoding.value if hasattr(encoding, "value") else encoding or types.PositionEncodingKind.Utf16)

    # -- documents ----------------------------------------------------------------------------

    def document(self, uri: str) -> Document | None:
        """The open message document, parsed (cached per version); None for unknown URIs and
        for the research tree's markdown files (lsp/tree_files.py serves those)."""
        # pygls keys them unquoted
        doc: TextDocument | None = self.workspace.text_documents.get(unquote(uri) if "%" in uri else uri)
        if doc is None:
            return None
        text = doc.source
        cached = self._parses.get(uri)  # only message documents are here
        if cached is not None and cached[0] == doc.version and cached[1] is text:
            return cached[3]
        if is_tree_markdown(uri):
            return None
        # Re-parse only what the edit touched (an unchanged command stays the same
        # object, which lets the analysis resume after it).
        parsed = reparse(cached[2], text) if cached is not None else parse(text)
        document = Document(uri, doc.version, text, parsed, Positions(parsed.lines or split_lines(text), self.encoding))
        self._parses[uri] = (doc.version, text, parsed, document)
        return document

    # -- where the server may act ---------------------------------------------------------------

    def workspace_roots(self) -> list[Path]:
        """Where the server may create, write and execute: the client's workspace folders (or
        its root); for a client that opened files without a workspace, their folders."""
        uris = [f.uri for f in self.workspace.folders.values()] or [self.workspace.root_uri or ""]
        if not any(uris):
            uris = sorted(self.open_uris)
            return _real_folders(uris, parent=True)
        return _real_folders(uris, parent=False)

    def in_workspace(self, path: Path) -> bool:
        real = os.path.realpath(path)
        return any(os.path.commonpath([str(root), real]) == str(root) for root in self.workspace_roots())

    def document_lock(self, uri: str) -> asyncio.Lock:
        """Held while a message of the document runs or is undone: one at a time."""
        return self._locks.setdefault(uri, asyncio.Lock())

    def ledger(self, root: Path) -> "Ledger":
        """The accounting of a research, kept up to date with its journal (read incrementally)."""
        from ..engine.tree.accounting import Ledger

        known = self._ledgers.get(root)  # a research's root is already resolved: no walk per request
        if known is not None:
            return known
        root = root.resolve()
        if root not in self._ledgers:
            ledger = self._ledgers[root] = Ledger(root)
            ledger.warm_up()  # a long journal is read in a thread, not in the first hover
        return self._ledgers[root]

    def forget(self, uri: str) -> None:
        self.open_uris.discard(uri)
        self._parses.pop(uri, None)
        self._places.pop(uri, None)
        self._analyses.pop(uri, None)
        self.reports.pop(uri, None)
        self.executed.pop(uri, None)

    def place(self, uri: str) -> Place:
        """Where the document sits. A document in a research stays there while the research's
        state file is unchanged and the workspace folders are the same (one stat per request,
        or none with the watch on, instead of a walk up the folders); a delegated researcher's,
        while that researcher works (the state is read through the file cache: a stat)."""
        workspace = self.workspace
        workspace = (tuple(workspace.folders), workspace.root_uri)
        kept = self._places.get(uri)
        if kept is not None and kept[2] == workspace and kept[1].unchanged() and (
                kept[0].researcher == MAIN or _still_working(kept[0])):
            return kept[0]
        place = self._locate(uri)
        if place.research is not None:
            self._places[uri] = (place, _look_at(bookkeeping(place.research.root) / STATE), workspace)
        else:
            self._places.pop(uri, None)
        return place

    def _locate(self, uri: str) -> Place:
        from ..engine.research import MESSAGE_FILE, Location, NoSuchResearcher, NotAResearch, locate, refuse_as_research

        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path is None:
            return Place(None, None, "This document is not saved in a folder. Save it as a `.dr` file in a "
                                     "research folder to run its messages.")
        folder = Path(path).parent
        if not self.in_workspace(folder):
            return Place(None, None, (
                "This document is outside the editor's workspace folders, so its messages do not run here: "
                "the language server only writes inside the workspace. Open its research folder as a workspace "
                "folder to work on it."))
        where, root = locate(folder)
        if where is Location.NONE:
            return Place(None, folder, (
                f"This folder is not a research, so messages cannot run here. A research lives in the folder of "
                f"its .dr document: make this folder one with the command “Deep Research: New Research” "
                f"(or `deep-research new {folder}`), or move this document into a research folder."),
                can_become_research=refuse_as_research(folder) is None)
        try:
            research = self.research(root)
            if where is Location.RESEARCH:
                return Place(research, root, None)
            # Inside the tree: the message document of a delegated researcher, or nobody's.
            return Place(research, root, None, researcher=research.researcher_of(Path(path)))
        except NoSuchResearcher:
            return Place(None, root, around=self._researches.get(root.resolve()), problem=(
                f"No researcher works from this document: it is inside the problem tree of the research in "
                f"{root}. Messages run from a .dr document in the research's own folder ({root}), or from one "
                f"(its {MESSAGE_FILE}) in the folder of a delegated problem while its researcher works (the command "
                f"“Deep Research: Researchers” lists them). A delegated researcher's document stays after it "
                f"ends, but runs nothing."))
        except (NotAResearch, OSError) as error:
            return Place(None, root, f"The research in {root} cannot be opened: {error}")

    def research(self, root: Path) -> "Research":
        """One Research per folder for the server's life: its file cache is shared by documents."""
        from ..engine.research import Research

        root = root.resolve()
        if root not in self._researches:
            research = self._researches[root] = Research.open(root, FileCache())
            research.rule_overrides = self.settings.rule_overrides()
        return self._researches[root]

    def config(self, root: Path) -> "Config":
        """The research's deep-research.toml (the research's own reading: once per change of
        the file; its mistakes logged once) under the editor's settings, which override it."""
        cached = self._configs.get(root)
        settings = self._settings
        if cached is not None and cached[2] is settings and cached[0].unchanged():
            return cached[3]
        if cached is None or not cached[0].unchanged():
            read = later.settings.read
            research = self._researches.get(root) or self._researches.get(root.resolve())
            # Through the research's file cache (a folder that is not a research yet: read afresh),
            # noting the look at the file, so that nothing is read again until it changes.
            with recording() as looked:
                config, problems = read(research.root, research.cache) if research is not None else read(root)
            for problem in problems:
                log.warning("%s", problem)
            cached = (looked, config, None, None)
        # Merged once per file version and settings (replaced, never changed, on a change):
        # completion and diagnostics ask on every keystroke.
        looked, config = cached[0], cached[1]
        self._configs[root] = cached = (looked, config, settings, config.merged(**settings.overrides()))
        return cached[3]

    def snapshot(self, place: Place) -> "Snapshot":
        """What completion and hover need of the research. The phase is read now (a few
        stats); the focus and its subproblems only if the request needs them, and read
        again only when one of the files they came from changed. The same snapshot object
        serves while the phase, the held subproblems and the config are the same objects."""
        research = place.research
        if research is None:
            return later.assist.Snapshot(Phase.NO_PROBLEM)
        config = self.config(research.root)
        key = (research, place.researcher)  # by the object: a path's hash is a Python call, an object's is not
        kept = self._snapshots.get(key)
        if kept is None or kept.cache is not research.cache:
            kept = self._snapshots[key] = _KeptSnapshot(research, place.researcher)
        return kept.snapshot(config, self.ledger)

    def analysis(self, doc: Document, place: Place) -> "Analysis | None":
        """The document's analysis: kept between requests, resumed after an edit."""
        DocumentAnalysis = later.incremental.DocumentAnalysis
        if place.research is None:
            return None
        roots = tuple(self.config(place.research.root).fetch.allowed_roots)
        kept = self._analyses.get(doc.uri)
        if (kept is None or kept.research is not place.research or kept.roots != roots
                or kept.researcher != place.researcher):
            kept = self._analyses[doc.uri] = DocumentAnalysis(place.research, roots=roots, researcher=place.researcher)
        return kept.analyze(doc.parsed)


class _KeptSnapshot:
    """A researcher's snapshot of a research, kept between requests: the phase and held
    subproblems (`_standing`) and the problem part (`_problems`) come from memos, each read
    again only when a file it came from changed."""

    def __init__(self, research: "Research", researcher: str) -> None:
        Memo = later.incremental.Memo
        self.research, self.cache = research, research.cache
        self.standing = Memo(research.cache, lambda: _standing(research, researcher))
        self.problems = Memo(research.cache, lambda: _problems(research, researcher))
        self._made: tuple[object, object, "Snapshot"] | None = None  # (standing, config, the snapshot)

    def snapshot(self, config: "Config", ledger: Callable[[Path], "Ledger"]) -> "Snapshot":
        standing = self.standing.get()
        made = self._made
        if made is not None and made[0] is standing and made[1] is config:
            made[2].forget()  # asked anew: the part is read again (through its memo) if a request needs it
            return made[2]
        Snapshot = later.assist.Snapshot
        phase, held = standing
        sources = dict(root=self.research.root, roots=tuple(config.fetch.allowed_roots),
                       search_provider=later.settings.search_provider(config))
        if phase is Phase.NO_PROBLEM:
            snapshot = Snapshot(phase, **sources)
        else:
            snapshot = Snapshot(phase, load=self.problems.get, figures=ledger(self.research.root).total_if_ready, held=held,
                                **sources)
        self._made = (standing, config, snapshot)
        return snapshot


def _look_at(path: Path) -> Reads:
    """A look at one file (or its absence), to tell later whether it changed."""
    with recording() as reads:
        try:
            watched_stat(path)
        except OSError:
            pass
    return reads


def _still_working(place: Place) -> bool:
    """A delegated researcher's document stays its place while that researcher works."""
    if place.research is None or place.researcher == MAIN:
        return True
    return place.research.state().find(place.researcher) is not None


def _standing(research: "Research", researcher: str) -> tuple[Phase, frozenset[str]]:
    """What every completion and hover needs: the researcher's phase and the subproblems of its
    focus that others hold."""
    state = research.state(researcher)
    return state.phase, _held(research, state) if state.phase is not Phase.NO_PROBLEM else frozenset()


def _held(research: "Research", state) -> frozenset[str]:
    """Titles of the subproblems of `state`'s focus that other researchers hold (completion
    leaves them out): a cached read of each delegated subproblem, none when there are none."""
    found = (research.tree.problem(seat.root, report=False) for seat in state.delegations(state.focus))
    return frozenset(problem.title for problem in found if problem is not None)


def _problems(research: "Research", researcher: str = MAIN) -> tuple:
    """The focus, its subproblems and their folders, the attachments a citation may name
    (the focus's and its parents', nearest first, with their files), what the research's
    budgets refuse there, the context items (what `///read` may name besides) and the research's
    part_chars (what NAME#N means), for completion and hover."""
    state = research.state(researcher)
    tree = research.tree
    focus = tree.problem(state.focus)
    children = tuple(tree.children(state.focus))
    cited = tuple(
        (attachment, file) for depth in range(len(state.focus), -1, -1)
        for attachment, file in tree.attachment_files(state.focus[:depth]))
    from ..engine.store import CONTEXT
    from ..engine.tree.reader import attachment_files

    context = tuple(attachment_files(bookkeeping(research.root) / CONTEXT, research.cache))
    return (focus, children, {c.title: tree.folder(c.path) for c in children}, cited, research.refusals(state), context,
            research.rules().part_chars)


def _real_folders(uris: list[str], *, parent: bool) -> list[Path]:
    folders = []
    for uri in uris:
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path:
            folders.append(Path(os.path.realpath(Path(path).parent if parent else path)))
    return folders


def warm_up() -> None:
    """Import the rest of the engine while the client gets ready (call it once `initialize`
    is answered), then keep it out of the cyclic collector's way (see cli._serve); what
    the imports left in cycles is collected first, or freezing would keep it for good."""
    for module in ("language.analysis", "views.assist", "language.incremental", "tree_view", "research"):
        importlib.import_module(f"deep_research.engine.{module}")
    gc.collect()
    gc.freeze()
