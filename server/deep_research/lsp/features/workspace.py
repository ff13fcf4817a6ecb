"""Settings (`workspace/configuration`) and hand edits of the tree (watched files)."""

from __future__ import annotations

import logging
import threading

from lsprotocol import types

from ..config import SECTION, Settings
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
        await refresh_settings(ls)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: DeepResearchServer, params: types.DidChangeConfigurationParams) -> None:
        if not await refresh_settings(ls) and isinstance(params.settings, dict):
            ls.settings = Settings.from_client(params.settings)
            log.info("%s", ls.settings.describe())
        from .diagnostics import refresh_diagnostics

        refresh_diagnostics(ls)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: DeepResearchServer, params: types.DidChangeWatchedFilesParams) -> None:
        # Reads are validated by file stats, so nothing is stale; the diagnostics of open
        # messages may change, though (a ticked criterion, a renamed subproblem).
        from .diagnostics import refresh_diagnostics

        refresh_diagnostics(ls)


async def refresh_settings(ls: DeepResearchServer) -> bool:
    """Ask the client for `deepResearch`; False if it cannot answer."""
    if not ls.supports("workspace.configuration"):
        return False
    try:
        result = await ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        )
    except Exception as error:  # a client that fails to answer keeps the old settings
        log.warning("could not read the deepResearch settings: %s", error)
        return False
    ls.settings = Settings.from_client(result[0] if result else None)
    log.info("%s", ls.settings.describe())
    return True


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
