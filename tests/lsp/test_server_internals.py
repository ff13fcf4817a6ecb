"""What a long-lived server must not accumulate: pygls's record of finished handlers."""

from __future__ import annotations

import asyncio

from deep_research.lsp.wiring import create_server


async def test_finished_handlers_are_forgotten() -> None:
    """pygls 2.1 files the future of every handler it runs under an id of its own (an async
    command inside workspace/executeCommand, every notification) and never drops it, with
    its result: a large research's tree pages piled up by the hundred kilobytes."""
    server = create_server()
    protocol = server.protocol
    results = []

    async def command(n: int) -> bytes:
        return b"x" * 100_000

    for n in range(50):
        protocol._execute_handler(f"inner-{n}", command, callback=results.append, args=(n,))
        await asyncio.sleep(0)  # let it finish: the loop runs it
    await asyncio.sleep(0)
    assert len(results) == 50 and all(f.result() == b"x" * 100_000 for f in results)
    assert len(protocol._request_futures) <= 1  # only the last, until the next message
