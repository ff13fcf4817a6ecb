"""The workspace command `deepResearch.export`: the research as one HTML file.

It writes inside the workspace only: `<research>/dossier.html` by default, or the file
URI given as a second argument if that is an `.html` file in a workspace folder. The
client opens the file (the VS Code extension in the browser, with `env.openExternal`).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from ..arguments import fs_path, research_of
from ..executing import relax_collector
from ..progress import Progress
from ..server import DeepResearchServer


def register(server: DeepResearchServer) -> None:
    @server.command("deepResearch.export")
    async def export(ls: DeepResearchServer, uri: str, *target: Any) -> dict[str, Any]:
        from ...dossier import DEFAULT_NAME
        from ...dossier import export as write_dossier

        research = research_of(ls, uri)
        if len(target) > 1:
            raise JsonRpcInvalidParams("deepResearch.export takes the document URI and, optionally, the target file URI")
        out = _target(ls, target[0]) if target and target[0] is not None else research.root / DEFAULT_NAME
        progress = await Progress.start(ls, "Deep Research: exporting the dossier")
        started = time.perf_counter()
        try:
            result = await asyncio.to_thread(write_dossier, research.root, out)  # never over someone's file
        except OSError as error:
            raise JsonRpcInvalidParams(f"the dossier could not be written to {out}: {error}") from None
        finally:
            progress.end()
            relax_collector()
        return {"uri": from_fs_path(str(result.path)), "problems": result.problems, "bytes": result.bytes,
                "seconds": round(time.perf_counter() - started, 3), "settled": result.settled}


def _target(ls: DeepResearchServer, target: object) -> Path:
    if not isinstance(target, str):
        raise JsonRpcInvalidParams(f"the dossier's target must be a file URI, got {target!r}")
    path = fs_path(target)
    if path.suffix.lower() not in (".html", ".htm"):
        raise JsonRpcInvalidParams(f"the dossier is an HTML file: {target} does not end in .html")
    if not path.parent.is_dir() or path.is_dir():
        raise JsonRpcInvalidParams(f"cannot write the dossier to {target}: no such folder, or a folder is in the way")
    if not ls.in_workspace(path.parent):
        raise JsonRpcInvalidParams(f"{target} is outside the workspace folders: the server writes only inside them")
    return path
