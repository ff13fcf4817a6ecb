"""The outside world: web pages, workspace files and web search, for the evidence commands.

The engine stays offline: its analysis lists what a message needs (`engine/execution/evidence.py::Need`),
and this package gets it before the message's transaction (the use case `app/execute.py` runs both). Modules:

- `guard`   — which addresses a fetch may connect to (SSRF protection), DNS resolved here.
- `fetch`   — one guarded HTTP GET: http/https only, pinned to the checked address,
              timeouts, a size cap, redirects followed by hand and each one re-checked.
- `extract` — bytes to text: HTML to markdown (trafilatura), PDF to text (pypdf), text
              types as they are, with charset handling; other types refused.
- `reader`  — `extract` in worker processes, killed when a reading runs past its limit.
- `files`   — reading a workspace file behind the root guard, or a file the user gave.
- `search`  — web search providers (SearXNG, Tavily, Brave) behind one small interface.
- `inputs`  — what the user gives a new research (context and attachments, files or
              URLs), all read and fetched before it is created.
- `gather`  — gathers a message's needs concurrently (bounded, cancellable, with progress).

Nothing here knows LSP. Every failure becomes a sentence for the Errors Report
(`SourceError`), never a traceback.
"""


class SourceError(Exception):
    """Something from outside cannot be attached; the message says why, for the assistant."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
