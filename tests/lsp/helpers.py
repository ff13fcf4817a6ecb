"""Small steps a test takes as an editor would: open, change, save, execute."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

DEFINE = """<<< define_problem
///title
Tiled matrix multiplication
///content
Find the best 16x16 tiled matmul in C for teaching.
>>>
///add_criteria Cites three sources
<<< add_subproblem
///title
Cache sizes
///content
Which tile sizes fit L1?
>>>
"""


def open_doc(client: LanguageClient, path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    client.documents[uri] = (1, text)  # type: ignore[attr-defined]
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="deep-research", version=1, text=text)
    ))
    return uri


def change_doc(client: LanguageClient, uri: str, text: str) -> None:
    version = client.documents[uri][0] + 1  # type: ignore[attr-defined]
    client.documents[uri] = (version, text)  # type: ignore[attr-defined]
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
    ))


def text_of(client: LanguageClient, uri: str) -> str:
    return client.documents[uri][1]  # type: ignore[attr-defined]


async def diagnostics(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    """The document's current diagnostics, pulled or pushed as the client would get them."""
    if client.preset == "neovim":  # type: ignore[attr-defined]  # pulls
        report = await client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        return list(report.items)
    version = client.documents[uri][0]  # type: ignore[attr-defined]
    while True:  # pushed: wait for the notification for this version
        current = client.diagnostics.get(uri)
        pushed_version = client.diagnostic_versions.get(uri)  # type: ignore[attr-defined]
        if current is not None and pushed_version is not None and pushed_version >= version:
            return list(current)
        await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)


async def execute(client: LanguageClient, uri: str, command: str = "deepResearch.execute") -> dict:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=[uri])
    )


async def configure(client: LanguageClient, **settings: object) -> None:
    """Change the client's deepResearch settings and wait until the server has applied them."""
    client.set_configuration(settings, section="deepResearch")
    expected = [f"{key}={str(value).lower() if isinstance(value, str) else value}" for key, value in settings.items()]
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    while True:
        params = await client.wait_for_notification(types.WINDOW_LOG_MESSAGE)
        if params.message.startswith("Settings:") and all(e in params.message for e in expected):
            return
