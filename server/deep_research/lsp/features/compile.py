"""The workspace command `deepResearch.compile`: the research as one report (SPEC §14).

Its one argument is an object: `uri`, any file (or folder) of the research, and `format` (md,
html, docx, odt, pdf, csl-json or bibtex; default md). It writes `<research>/report.<ext>` and
answers its URI: the server writes inside the workspace only, so a research outside every
workspace folder is refused, as `deepResearch.export` refuses a target outside them. The
client opens the file (VS Code: the markdown and HTML in the editor or browser, the rest with
the system's application; Neovim with `vim.ui.open`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from ..arguments import fs_path
from ..executing import relax_collector
from ..progress import Progress
from ..server import DeepResearchServer


def register(server: DeepResearchServer) -> None:
    @server.command("deepResearch.compile")
    async def compile_report(ls: DeepResearchServer, *arguments: Any) -> dict[str, Any]:
        from ...app.compile import Refused, choose_format, compile_report as write_report, research_root

        uri, name = _arguments(arguments)
        path = fs_path(uri)
        folder = path if path.is_dir() else path.parent
        try:
            fmt = choose_format(name)
            root = research_root(folder)
        except Refused as refusal:
            raise JsonRpcInvalidParams(str(refusal)) from None
        if not ls.in_workspace(root):
            raise JsonRpcInvalidParams(f"The research in {root} is outside the workspace folders: the server writes "
                                       "only inside them; nothing was written.")
        progress = await Progress.start(ls, f"Deep Research: compiling the report ({fmt.name})")
        try:
            done = await asyncio.to_thread(write_report, Path(os.path.realpath(root)), fmt)
        except Refused as refusal:
            raise JsonRpcInvalidParams(str(refusal)) from None
        except OSError as error:
            raise JsonRpcInvalidParams(f"the report could not be written: {error}") from None
        finally:
            progress.end()
            relax_collector()
        assert done.path is not None
        return {"uri": from_fs_path(str(done.path)), "format": fmt.name, "problems": done.problems,
                "references": done.references, "errors": done.errors, "bytes": len(done.data),
                "seconds": round(done.seconds, 3), "settled": done.settled}


def _arguments(arguments: tuple[Any, ...]) -> tuple[str, str | None]:
    """`{"uri", "format"}` (SPEC §14); a URI alone, or a URI and a format, are taken too."""
    if len(arguments) == 1 and isinstance(arguments[0], dict):
        given = arguments[0]
        unknown = sorted(set(given) - {"uri", "format"})
        if unknown:
            raise JsonRpcInvalidParams(f"deepResearch.compile takes {{\"uri\", \"format\"}}, not {', '.join(unknown)[:80]}")
        uri, name = given.get("uri"), given.get("format")
    elif 1 <= len(arguments) <= 2:
        uri, name = arguments[0], arguments[1] if len(arguments) == 2 else None
    else:
        raise JsonRpcInvalidParams('deepResearch.compile takes one object: {"uri": <a file of the research>, "format": F}')
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams(f"deepResearch.compile needs the URI of a file of the research, got {uri!r:.80}")
    if name is not None and not isinstance(name, str):
        raise JsonRpcInvalidParams(f"the format is a name (md, html, docx, odt, pdf, csl-json, bibtex), got {name!r:.80}")
    return uri, name
