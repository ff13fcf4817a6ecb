"""`deep-research mcp [ROOT]`: the Model Context Protocol server on stdio.

Built on the official SDK's low-level `Server` (mcp 2.x): the tool list, the schemas and
the resource list are ours to write, and `resources/subscribe` is served. Every tool is
glue over the engine's facade, as the language server and the command line are: messages
run through `app/execute.py`, replies are the command line's text
(`printouts`). A tool that cannot do what it was asked answers with `isError` and one
sentence; a failed command inside a message is part of the reply instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPError

from .. import __version__
from ..app.embed import keep_embedding
from ..engine.core.text import NotText
from ..engine.research import MAIN, NoSuchResearcher, NotAResearch
from ..engine.undo import UndoRefused
from ..printouts import (
    compile_printout, execution_printout, export_printout, prompt_printout, undo_printout, unsettled_export_warning,
)
from . import approval, resources
from .tools import TOOLS, BadArguments, ToolFailure, ToolSpec, check_arguments
from .workspace import Refusal, Workspace

log = logging.getLogger("deep_research.mcp")

MAX_SUBSCRIPTIONS = 200
WATCH_SECONDS = 1.0  # how often subscribed resources are checked for what others wrote

INSTRUCTIONS = """\
Deep Research: you are the researcher of a research kept on disk as a tree of problems. \
Work in turns: call get_prompt and read it (it explains the message language and shows the problem in focus), \
write a message of commands, send it with execute_message, read the reply, and call get_prompt again. \
Define the problem and its criteria of done, break it into subproblems, focus down into each, collect evidence \
(attachments), write a report and focus up, until focus_up at the root finishes the research. \
Start with new_research, or continue an existing research folder with get_prompt. \
Researches are folders inside this server's root; name them relative to it. \
A message may delegate independent subproblems (///delegate TITLE): each gets a researcher of its own, \
listed by list_researchers. If you can start sub-agents, give each delegated researcher to one, which calls \
get_prompt and execute_message with its `researcher` name until it focuses up from its problem; \
calls for different researchers may run at the same time."""


class DeepResearchMCP:
    """One server process: its root folder, its researches and its client's subscriptions."""

    def __init__(self, root: Path) -> None:
        self.workspace = Workspace(root)
        self.subscribed: dict[str, str] = {}  # resource URI -> digest of what the client last heard of
        self.watcher: asyncio.Task | None = None  # checks the subscribed resources for what others wrote
        self.calls = 0  # tool calls in progress (they announce what they change themselves)
        # Per research root: why the last message sent was not executed (approval), and whose it was
        # (sub-agents share the research), so that an undo right after it says that it takes back
        # the message before (a hint for the reply only).
        self.not_executed: dict[Path, str] = {}
        self.bus = InMemorySubscriptionBus()  # the 2026-07-28 protocol's subscriptions/listen
        self.server: Server[Any] = Server(
            "deep-research", version=__version__, title="Deep Research", instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_resources=self._list_resources, on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource, on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe, on_subscriptions_listen=ListenHandler(self.bus),
        )

    async def run_stdio(self) -> None:
        options = self.server.create_initialization_options(NotificationOptions(resources_changed=True))
        async with stdio_server() as (read, write):
            try:
                await self.server.run(read, write, options)
            finally:
                if self.watcher is not None:
                    self.watcher.cancel()

    # -- tools -------------------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(spec) for spec in TOOLS.values()])

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = TOOLS.get(params.name)
        if spec is None:
            return _error(f"There is no tool {params.name[:100]!r}; the tools are {', '.join(TOOLS)}.")
        self.calls += 1
        try:
            arguments = check_arguments(spec, params.arguments)
            text, structured = await getattr(self, f"_tool_{spec.name}")(ctx, arguments)
        except (BadArguments, Refusal, ToolFailure, UndoRefused, NotText) as failure:
            return _error(str(failure))
        except (NotAResearch, NoSuchResearcher) as error:
            return _error(str(error))
        except OSError as error:  # the file system refused: every change is one transaction
            where = f": {error.filename}" if getattr(error, "filename", None) else ""
            return _error(f"The file system refused: {error.strerror or error}{where}. Nothing was half-written.")
        except Exception as error:  # never a crash: the agent gets a sentence, the log the traceback
            log.exception("%s failed", spec.name)
            return _error(f"Internal error in {spec.name}: {type(error).__name__}: {str(error)[:300]}. Nothing was "
                          "half-written (every change is one transaction); please report it.")
        finally:
            self.calls -= 1
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)

    async def _tool_new_research(self, ctx: Any, args: dict[str, Any]) -> tuple[str, None]:
        from ..app.setup import Refused, new_research
        from .inputs import inputs_of, may_read, settings_for

        folder = self.workspace.folder(args["research"])
        root = self.workspace.root
        config = settings_for(folder, root)
        async with self.workspace.lock(folder, None):
            try:
                made = await new_research(
                    folder, inputs_of(args, root), config=config, may_read=may_read(root, config),
                    show=lambda path: repr(self.workspace.name(path)),
                    continue_hint="call get_prompt and execute_message with it")
            except Refused as refusal:
                raise Refusal(str(refusal)) from None
        assert made is not None  # nothing cancels it
        research = made.research
        name = self.workspace.name(research.root)
        self.workspace.forget(research.root)
        self.workspace.used(research.root)
        await self._changed(ctx)
        # what is worth saying of the sources (a page cut short …) and of each folder given: its
        # files attached, those skipped and why; as the CLI and the editors say it
        folders = [replace(f, given=self.workspace.name(Path(f.given))) for f in made.folders]  # named as the agent did
        said = "".join(f"{line}\n" for line in (*made.notes, *(f.summary() for f in folders)))
        return (f"Created a research in {research.root} (research {name!r}).\n{said}Next: call get_prompt with "
                f"research {name!r} and define the problem as it says.\n"), None

    async def _tool_get_prompt(self, ctx: Any, args: dict[str, Any]) -> tuple[str, None]:
        research = self.workspace.open(args["research"])
        researcher = await asyncio.to_thread(research.researcher_named, args.get("researcher", MAIN))
        async with self.workspace.lock(research.root, researcher):
            return await asyncio.to_thread(prompt_printout, research, None, researcher), None

    async def _tool_list_researchers(self, ctx: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        research = self.workspace.open(args["research"])
        found = await asyncio.to_thread(research.researchers)
        answer = {"research": self.workspace.name(research.root), "researchers": [item.to_json() for item in found]}
        return json.dumps(answer, ensure_ascii=False, indent=1), answer

    async def _tool_execute_message(self, ctx: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        from ..app.execute import execute

        research = self.workspace.open(args["research"])
        text: str = args["message"]
        researcher = await asyncio.to_thread(research.researcher_named, args.get("researcher", MAIN))
        name = self.workspace.name(research.root)
        # Messages of different researchers overlap (gathering sources, asking for approval);
        # the engine's lock makes their transactions one at a time, each on the state before it.
        async with self.workspace.lock(research.root, researcher):
            config = research.config()
            for problem in research.config_problems():
                log.warning("%s", problem)
            mode = approval.mode_of(config)
            result = await execute(research, text, config, mode=mode, researcher=researcher,
                                   approver=approval.Elicitation(ctx.session, ctx.request_id, name))
            if result.reason in ("needs-approval", "declined") and result.analysis is not None:
                waiting = result.analysis.needing_approval(mode)
                if result.reason == "needs-approval":  # the client cannot ask its user
                    self.not_executed[research.root] = _not_run(researcher, "it waits for approval")
                    document = await asyncio.to_thread(research.document, researcher)
                    return (approval.needs_approval_reply(research.root, waiting, mode, document),
                            _summary(None, "needs-approval", researcher))
                self.not_executed[research.root] = _not_run(researcher, "the user declined it")
                return approval.declined_reply(waiting, mode), _summary(None, "declined", researcher)
            if not result.executed:
                raise ToolFailure({
                    "empty": "The message is empty: write commands (see get_prompt).",
                    "cancelled": "The message was cancelled before it ran; nothing was changed.",
                }.get(result.reason or "", f"The message did not run ({result.reason}); nothing was changed."))
            self.not_executed.pop(research.root, None)
            reply = execution_printout(result, research, next_prompt=_next_prompt(name, researcher))
        await self._changed(ctx)
        return reply, _summary(result, "executed", researcher)

    async def _tool_research_tree(self, ctx: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        from ..engine.tree_view import is_folder_name, page, page_json, view, view_json

        research = self.workspace.open(args["research"])
        name = self.workspace.name(research.root)
        # A researcher's view: its own subtree, its focus marked (NoSuchResearcher names the others).
        researcher = await asyncio.to_thread(research.researcher_named, args.get("researcher", MAIN))

        def definition(node: Any) -> dict[str, str]:
            return {"definition": resources.problem_uri(name, node.path, "definition")}

        path = args.get("path")
        if path is None:
            if "offset" in args:
                raise BadArguments("`offset` pages a problem's children: give the problem's `path` too.")
            shown = await asyncio.to_thread(view, research, researcher, own=True)
            answer: dict[str, Any] = {"research": name, "researcher": researcher, **view_json(shown, definition)}
        else:
            if not all(is_folder_name(n) for n in path):
                raise BadArguments("`path` holds a problem's folder names from the root, as research_tree gives them "
                                   "(no empty names, no / or \\, none starting with a dot).")
            found = await asyncio.to_thread(page, research, tuple(path), args.get("offset", 0),
                                            researcher=researcher)
            if found is None:
                raise ToolFailure(f"There is no problem at {path!r} in the research {name!r}.")
            answer = {"research": name, "researcher": researcher, **page_json(found, definition)}
        return json.dumps(answer, ensure_ascii=False, indent=1), answer

    async def _tool_undo_message(self, ctx: Any, args: dict[str, Any]) -> tuple[str, None]:
        research = self.workspace.open(args["research"])
        async with self.workspace.lock(research.root, None):
            undone = await asyncio.to_thread(research.undo, document=None)
            name = self.workspace.name(research.root)
            text = undo_printout(
                research, undone, put_back=False, not_executed=self.not_executed.pop(research.root, None),
                prompt=f"The prompt is back as it was: call get_prompt (research {name!r}) to read it.")
        await self._changed(ctx)
        return text, None

    async def _tool_export_dossier(self, ctx: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        from ..dossier import export

        research = self.workspace.open(args["research"])
        target = research.root / "dossier.html"
        async with self.workspace.lock(research.root, None):
            if target.is_symlink() or (target.exists() and not target.is_file()):
                raise ToolFailure(f"{target} is not a file this server may replace; nothing was written.")
            started = time.perf_counter()
            try:
                result = await asyncio.to_thread(export, research.root, target)
            except FileExistsError as error:
                raise ToolFailure(f"{error}; nothing was written.") from None
        text = export_printout(target, result, time.perf_counter() - started)
        warning = unsettled_export_warning(result)
        if warning:
            text += f"Note: {warning}\n"
        return text, {"path": str(target), "problems": result.problems, "bytes": result.bytes}

    async def _tool_compile_report(self, ctx: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        from ..app.compile import Refused, choose_format, compile_report

        research = self.workspace.open(args["research"])
        try:
            fmt = choose_format(args.get("format"))
            done = await asyncio.to_thread(compile_report, research.root, fmt)
        except Refused as refusal:
            raise ToolFailure(str(refusal)) from None
        text = compile_printout(done) + "\n"
        if not done.settled:
            text += ("Note: messages kept running while the report was compiled; it may mix two moments of the "
                     "research. Compile again when they stop.\n")
        return text, {"path": str(done.path), "format": fmt.name, "problems": done.problems,
                      "references": done.references, "errors": done.errors, "bytes": len(done.data)}

    # -- resources ---------------------------------------------------------------------------

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await asyncio.to_thread(resources.listing, self.workspace))

    async def _list_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=resources.TEMPLATES)

    async def _read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            text = await asyncio.to_thread(resources.read, self.workspace, resources.parse(uri))
        except resources.ResourceMissing as missing:
            raise MCPError(types.INVALID_PARAMS, str(missing), {"uri": uri[:1000]}) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text, mime_type=resources.MARKDOWN)])

    async def _subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        try:
            resources.parse(uri)
        except resources.ResourceMissing as missing:
            raise MCPError(types.INVALID_PARAMS, str(missing)) from None
        if uri not in self.subscribed and len(self.subscribed) >= MAX_SUBSCRIPTIONS:
            raise MCPError(types.INVALID_PARAMS, f"At most {MAX_SUBSCRIPTIONS} resources can be subscribed at once; "
                                                 "unsubscribe from some first.")
        self.subscribed[uri] = await asyncio.to_thread(resources.digest, self.workspace, uri)
        if self.watcher is None or self.watcher.done():
            self.watcher = asyncio.get_running_loop().create_task(self._watch(ctx))
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self.subscribed.pop(str(params.uri), None)
        return types.EmptyResult()

    async def _changed(self, ctx: Any) -> None:
        """After a message (or an undo, a new research): the list changed; subscribed resources
        whose content changed are announced."""
        await self._announce(ctx, await self._updated())

    async def _watch(self, ctx: Any) -> None:
        """While the client holds subscriptions, what others write (another process's messages:
        `deep-research run`, an editor, another agent's server; hand edits) is announced within
        WATCH_SECONDS, as this server's own calls announce what they change (not while one runs:
        it announces its own once it ends)."""
        while self.subscribed:
            await asyncio.sleep(WATCH_SECONDS)
            if self.calls:
                continue
            try:
                updated = await self._updated()
                if updated:
                    await self._announce(ctx, updated)
            except Exception:  # never the end of the server: the next call announces what changed
                log.exception("checking the subscribed resources failed")

    async def _updated(self) -> list[str]:
        """The subscribed resources whose content is not what the client last heard of (it is now)."""
        changed = []
        for uri in list(self.subscribed):
            now = await asyncio.to_thread(resources.digest, self.workspace, uri)
            if uri in self.subscribed and self.subscribed[uri] != now:
                self.subscribed[uri] = now
                changed.append(uri)
        return changed

    async def _announce(self, ctx: Any, updated: list[str]) -> None:
        """The list changed (a message may move the focus, whose neighbourhood is listed), and so did
        the `updated` resources."""
        try:
            await ctx.session.send_resource_list_changed()
            for uri in updated:
                await ctx.session.send_resource_updated(uri)
        except Exception as error:  # a client gone or a protocol without these notifications
            log.info("could not notify the client of changed resources: %s", error)
        await self.bus.publish(ResourcesListChanged())
        for uri in updated:
            await self.bus.publish(ResourceUpdated(uri=uri))


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name, title=spec.title, description=spec.description, input_schema=spec.schema,
        annotations=types.ToolAnnotations(
            title=spec.title, read_only_hint=spec.read_only, destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent, open_world_hint=spec.open_world,
        ),
    )


def _error(sentence: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=sentence)], is_error=True)


def _next_prompt(name: str, researcher: str = MAIN) -> str:
    """Where an agent finds the next prompt: a tool, not a file (it may not read the disk)."""
    whose = f", researcher {researcher!r}" if researcher != MAIN else ""
    return f"Call get_prompt (research {name!r}{whose}) for the prompt of your next message."


def _not_run(researcher: str, why: str) -> str:
    """Why the last message sent was not executed, naming a delegated researcher's (an undo may come
    from another sub-agent)."""
    whose = "Your" if researcher == MAIN else f"The researcher “{researcher}”’s"
    return f"{whose} last message was not executed: {why}."


def _summary(result: Any, outcome: str, researcher: str) -> dict[str, Any]:
    """The structured result of execute_message: the counts of an executed message's commands."""
    from ..app.execute import summary

    return {"outcome": outcome, "researcher": researcher, **summary(result).to_json()}


def run(root: Path) -> int:
    """Serve on stdio until the client closes it."""
    import anyio

    logging.basicConfig(level=os.environ.get("DEEP_RESEARCH_MCP_LOG", "WARNING").upper(),
                        format="deep-research mcp: %(levelname)s %(message)s")
    keep_embedding()
    anyio.run(DeepResearchMCP(root).run_stdio)
    return 0
