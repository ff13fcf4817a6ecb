"""The `mcp` SDK's own client, connected over stdio to a real `deep-research mcp ROOT` process."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests import preload

SERVER = Path(__file__).resolve().parents[2] / "server"


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DEEP_RESEARCH_DEBUG"}
    env["PYTHONPATH"] = str(SERVER) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONIOENCODING"] = "utf-8"
    return env


class Notifications:
    """What the server notified, with a way to wait for one (no sleeps: an event per arrival)."""

    def __init__(self) -> None:
        self.received: list[types.ServerNotification] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            return
        self.received.append(message)
        self._arrived.set()
        self._arrived = anyio.Event()

    def updated(self) -> list[str]:
        return [n.params.uri for n in self.received if isinstance(n, types.ResourceUpdatedNotification)]

    def list_changes(self) -> int:
        return sum(isinstance(n, types.ResourceListChangedNotification) for n in self.received)

    async def wait_for(self, condition, timeout: float = 60) -> None:
        """Until `condition()` holds; the timeout only guards against a hang."""
        with anyio.fail_after(timeout):
            while not condition():
                await self._arrived.wait()


@contextlib.asynccontextmanager
async def connect(root: Path, *, elicitation=None, cwd: Path | None = None, args: list[str] | None = None,
                  ) -> AsyncIterator[tuple[ClientSession, Notifications]]:
    notes = Notifications()
    launch, *rest = preload.command("mcp", *(args or [str(root)]))  # forked from a preloaded process
    params = StdioServerParameters(command=launch, args=rest, cwd=str(cwd or root), env=server_env())
    async with stdio_client(params) as (read, write):
        kwargs: dict[str, Any] = {"message_handler": notes}
        if elicitation is not None:
            kwargs["elicitation_callback"] = elicitation
        async with ClientSession(read, write, **kwargs) as session:
            await session.initialize()
            yield session, notes


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def call(session: ClientSession, tool: str, **arguments: Any) -> str:
    """A call that must succeed: its text."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    return text(result)


async def refused(session: ClientSession, tool: str, arguments: Any) -> str:
    """A call that must be a tool error (or a protocol error, for arguments the SDK itself rejects): its sentence."""
    from mcp.shared.exceptions import MCPError

    try:
        result = await session.call_tool(tool, arguments)
    except MCPError as error:
        return error.message
    assert result.is_error, f"{tool} {str(arguments)[:200]} was not refused: {text(result)[:500]}"
    return text(result)
