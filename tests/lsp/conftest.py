"""pytest-lsp fixtures: the real server over stdio, with VS Code's and Neovim's capabilities.

- `client`: a fresh server per test (twice: VS Code's and Neovim's capabilities), its
  workspace the test's `tmp_path`. Cheap: the server is forked from the session's preloaded
  process (tests/preload.py: `SERVER` is `preload.command("serve")`), about a fork instead of
  ~0.5 s of imports, so there is no need to share a server between tests and their state.
- `research`: a research made in `tmp_path/research` (no fsync: tests/conftest.py).
- `make_client()`, `capabilities(preset)`, `ENV`, `SERVER`: for a fixture of a test module's own
  (a different workspace, no workspace, one preset); clients share one converter.

Spec violations (a request the client did not advertise support for) are errors
(pyproject.toml turns LspSpecificationWarning into an error).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from deep_research.engine.research import Research
from deep_research.lsp.client_support import converter_factory
from tests import preload

REPO = Path(__file__).resolve().parents[2]
PRESETS = ["visual-studio-code", "neovim"]
SERVER = preload.command("serve")  # `python -m deep_research serve`, forked from a preloaded process (tests/preload.py)
ENV = {**os.environ, "PYTHONPATH": str(REPO / "server")}


@functools.lru_cache(maxsize=None)
def shared_converter():
    """One converter for every client of the test process: cattrs writes and compiles a
    structure and an unstructure function per message type the first time a converter meets
    it, which took each test's new client about a second of CPU."""
    return converter_factory()


@functools.lru_cache(maxsize=None)
def capabilities(preset: str) -> types.ClientCapabilities:
    """An editor's capabilities (pytest-lsp's `client_capabilities`, which reads and converts
    its JSON file each time), once per preset. Tests only read them."""
    return client_capabilities(preset)


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=shared_converter)
    client.diagnostic_versions = {}  # type: ignore[attr-defined]

    def publish_diagnostics(ls: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        ls.diagnostics[params.uri] = params.diagnostics
        ls.diagnostic_versions[params.uri] = params.version  # type: ignore[attr-defined]

    client.cancel_on_begin = False  # type: ignore[attr-defined]
    record_progress = DEFAULT_CLIENT_FEATURES[types.PROGRESS]

    def progress(ls: LanguageClient, params: types.ProgressParams) -> None:
        """Record it as the stock client does; like a user pressing Cancel, if a test asks."""
        record_progress(ls, params)
        value = params.value
        kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
        if kind == "begin" and ls.cancel_on_begin:  # type: ignore[attr-defined]
            ls.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=params.token))

    features = {
        **DEFAULT_CLIENT_FEATURES,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish_diagnostics,
        types.PROGRESS: progress,
    }
    register_lsp_features(client, features)
    client.applied_edits = []  # type: ignore[attr-defined]
    client.executed_notifications = []  # type: ignore[attr-defined]

    client.edit_waiters = []  # type: ignore[attr-defined]  # futures resolved by the next applyEdit

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        client.applied_edits.append(params)  # type: ignore[attr-defined]
        for change in params.edit.document_changes or []:
            if isinstance(change, types.TextDocumentEdit):
                _apply_to_open_document(client, change.text_document.uri, change.edits)
        for uri, edits in (params.edit.changes or {}).items():
            _apply_to_open_document(client, uri, edits)
        waiters, client.edit_waiters = client.edit_waiters, []  # type: ignore[attr-defined]
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        return types.ApplyWorkspaceEditResult(applied=True)

    client.registrations = []  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)  # type: ignore[attr-defined]

    @client.feature("deepResearch/didExecute")
    def did_execute(params) -> None:
        client.executed_notifications.append(params)  # type: ignore[attr-defined]

    client.autopilot_notifications = []  # type: ignore[attr-defined]

    @client.feature("deepResearch/autopilot")
    def autopilot(params) -> None:
        client.autopilot_notifications.append(params)  # type: ignore[attr-defined]

    return client


def _apply_to_open_document(client: LanguageClient, uri: str, edits) -> None:
    """Behave like an editor: apply the edit to our copy and tell the server (didChange)."""
    docs = client.documents  # type: ignore[attr-defined]
    if uri not in docs:
        return
    version, text = docs[uri]
    lines = text.split("\n")
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = _offset(lines, edit.range.start, client)
        end = _offset(lines, edit.range.end, client)
        text = text[:start] + edit.new_text + text[end:]
        lines = text.split("\n")
    docs[uri] = (version + 1, text)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
    ))


def _offset(lines: list[str], position: types.Position, client: LanguageClient) -> int:
    encoding = client.encoding  # type: ignore[attr-defined]
    offset = sum(len(line) + 1 for line in lines[: position.line])
    if position.line >= len(lines):
        return offset
    line, units, index = lines[position.line], 0, 0
    while index < len(line) and units < position.character:
        char = line[index]
        units += len(char.encode("utf-8")) if encoding == "utf-8" else len(char.encode("utf-16-le")) // 2
        index += 1
    return offset + index


@pytest_lsp.fixture(
    params=PRESETS,
    config=ClientServerConfig(server_command=SERVER, client_factory=make_client, server_env=ENV),
)
async def client(request, lsp_client: LanguageClient, tmp_path: Path):
    await start_session(lsp_client, request.param, tmp_path)
    yield
    await lsp_client.shutdown_session()


async def start_session(client: LanguageClient, preset: str, folder: Path | None,
                        name: str = "research") -> types.InitializeResult:
    """What every test's editor does first: the preset's capabilities, `folder` its one workspace
    folder (None: no workspace, as Neovim in single-file mode), the initialization options VS Code
    and editors/nvim send, and the approval mode answered from its settings."""
    client.documents = {}  # type: ignore[attr-defined]
    client.preset = preset  # type: ignore[attr-defined]
    client.set_configuration({"approvalMode": "update"}, section="deepResearch")
    result = await client.initialize_session(types.InitializeParams(
        capabilities=capabilities(preset),
        root_uri=folder.as_uri() if folder is not None else None,
        workspace_folders=[types.WorkspaceFolder(uri=folder.as_uri(), name=name)] if folder is not None else None,
        initialization_options={"reloadsChangedFiles": True},  # as VS Code and editors/nvim declare
    ))
    client.init_result = result  # type: ignore[attr-defined]
    encoding = result.capabilities.position_encoding
    client.encoding = getattr(encoding, "value", encoding) or "utf-16"  # type: ignore[attr-defined]
    return result


@pytest.fixture
def research(tmp_path: Path) -> Path:
    """A fresh research folder made by the real command line."""
    folder = tmp_path / "research"
    Research.create(folder, "Study tiling")
    return folder
