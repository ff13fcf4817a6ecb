"""Settings (`workspace/configuration`) and hand edits of the tree (watched files)."""

from __future__ import annotations

import asyncio
import logging
import threading

from lsprotocol import types

from ... import versions
from ..config import Settings
from ..server import DeepResearchServer, warm_up

log = logging.getLogger("deep_research.lsp")
WATCHERS_ID = "deep-research-watchers"


def register(server: DeepResearchServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: DeepResearchServer, params: types.InitializeParams) -> None:
        # Clients without workspace/configuration may pass settings here.
        if params.initialization_options:
            ls.settings = Settings.from_client(params.initialization_options)
            options = params.initialization_options
            ls.reloads_changed_files = isinstance(options, dict) and options.get("reloadsChangedFiles") is True

    @server.feature(types.INITIALIZED)
    async def initialized(ls: DeepResearchServer, params: types.InitializedParams) -> None:
        threading.Thread(target=warm_up, name="warm-up", daemon=True).start()
        await _watch_tree(ls)
        await ls.refresh_settings()
        await _say_versions(ls)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: DeepResearchServer, params: types.DidChangeConfigurationParams) -> None:
        if not await ls.refresh_settings() and isinstance(params.settings, dict):
            ls.settings = Settings.from_client(params.settings)
            log.info("%s", ls.settings.describe())
        ls.refresh_diagnostics()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: DeepResearchServer, params: types.DidChangeWatchedFilesParams) -> None:
        # Reads are validated by file stats, so nothing is stale; the diagnostics of open
        # messages may change, though (a ticked criterion, a renamed subproblem).
        ls.refresh_diagnostics()


async def _say_versions(ls: DeepResearchServer) -> None:
    """What the server runs on, in its log (for a bug report); a library outside its supported
    range also in a message, since a feature that needs it will fail."""
    log.info("%s", await asyncio.to_thread(versions.report))  # the packages' metadata: off the loop
    unfit = versions.unfit()
    if unfit:
        ls.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Warning, message="Deep Research: " + "; ".join(lib.sentence() for lib in unfit) + "."))


async def _watch_tree(ls: DeepResearchServer) -> None:
    if not ls.supports("workspace.did_change_watched_files.dynamic_registration"):
        return
    watchers = [
        types.FileSystemWatcher(glob_pattern="**/*.md"),
        types.FileSystemWatcher(glob_pattern="**/.deep-research/state.json"),
    ]
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations=[
            types.Registration(
                id=WATCHERS_ID,
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
            )
        ]))
    except Exception as error:
        log.warning("could not watch the research files: %s", error)
