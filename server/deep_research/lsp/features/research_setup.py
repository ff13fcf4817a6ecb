"""Starting and steering a research from the editor: `deepResearch.newResearch(uri, options?)`
and `deepResearch.continueResearch(uri, options)`, what `deep-research new` and `continue` do.

`options` may hold `instruction` (a string), `context` (file URIs), `contextText` (strings)
and `attachments` (file URIs or http(s) URLs). Everything comes from a client, so all of it
is checked before anything is touched: the folder must be inside the workspace, every file
inside the workspace (or the research's `[fetch] allowed_roots`), every URL goes through the
address guard with the research's `[fetch]` settings under the editor's. Every file is read
and every page fetched first (`sources.inputs.prepare`, with progress and Cancel); a source
that cannot be had is one sentence and nothing is written. Then one transaction.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from ...engine.core.text import control_sentence
from ..arguments import fs_path
from ..progress import Progress
from ..server import DeepResearchServer

if TYPE_CHECKING:  # pragma: no cover
    from ...app.setup import SetUp
    from ...engine.research import Research
    from ...sources.inputs import Inputs

OPTIONS = {"instruction": str, "context": list, "contextText": list, "attachments": list}


def register(server: DeepResearchServer) -> None:
    @server.command("deepResearch.newResearch")
    async def new_research(ls: DeepResearchServer, uri: str, *options: Any) -> dict[str, Any]:
        from ...app.setup import new_research

        folder, document = _folder_of(ls, uri)
        inputs = _inputs(options, "deepResearch.newResearch")
        # Without options (as before options came) the folder is made a research, an existing one
        # left as it is; with them an existing research is refused (that is continueResearch).
        made = await _set_up(
            ls, f"cannot make {folder} a research: {{}}. Nothing was half-made.",
            "Deep Research: reading the sources" if options else None,
            lambda progress: new_research(
                folder, inputs, config=lambda: ls.config(folder), continue_hint=CONTINUE_HINT,
                may_read=_may_read(ls, folder), progress=progress.sources if progress else None,
                cancelled=progress.cancelled if progress else None, exist_ok=not options))
        if made is None:
            return {"created": False, "reason": "cancelled"}
        answer = _answer(made.research, document, created=True, made=made)
        return answer if options else {"root": answer["root"], "document": answer["document"]}

    @server.command("deepResearch.continueResearch")
    async def continue_research(ls: DeepResearchServer, uri: str, *options: Any) -> dict[str, Any]:
        from ...app.setup import Refused, check_continue, continue_research

        folder, document = _folder_of(ls, uri)
        try:
            check_continue(folder, new_hint=NEW_HINT)
        except Refused as refusal:
            raise JsonRpcInvalidParams(str(refusal)) from None
        inputs = _inputs(options, "deepResearch.continueResearch")
        research = ls.research(folder)
        made = await _set_up(ls, f"cannot continue the research in {folder}: {{}}. Nothing was changed.",
                             "Deep Research: reading the sources",
                             lambda progress: continue_research(
                                 research, inputs, config=ls.config(folder), may_read=_may_read(ls, folder),
                                 progress=progress.sources, cancelled=progress.cancelled))
        if made is None:
            return {"created": False, "reason": "cancelled"}
        return {**_answer(research, document, created=False, made=made), "reopened": made.reopened}


NEW_HINT = "Deep Research: New Research (deepResearch.newResearch)"
CONTINUE_HINT = "Deep Research: Continue Research…, deepResearch.continueResearch"


async def _set_up(ls: DeepResearchServer, failed: str, title: str | None,
                  work: Callable[[Progress | None], Awaitable[SetUp | None]]) -> SetUp | None:
    """A setup (with progress and Cancel under `title`, if given), its refusals as the client's
    errors (`failed`: the sentence when the file system refuses, `{}` its error); the
    diagnostics of open documents refreshed after it (their folder may be a research now)."""
    from ...app.setup import Refused

    progress = await Progress.start(ls, title) if title is not None else None
    try:
        made = await work(progress)
    except Refused as refusal:
        raise JsonRpcInvalidParams(str(refusal)) from None
    except (OSError, ValueError) as error:
        raise JsonRpcInvalidParams(failed.format(error)) from None
    finally:
        if progress is not None:
            progress.end()
    if made is not None:
        ls.refresh_diagnostics()
    return made


def _may_read(ls: DeepResearchServer, folder: Path) -> Callable[[Path], str | None]:
    """The server reads the user's files only inside its workspace (or the research's `[fetch]
    allowed_roots`)."""
    roots = [Path(os.path.realpath(r)) for r in ls.config(folder).fetch.allowed_roots]

    def may_read(real: Path) -> str | None:
        if ls.in_workspace(real) or any(real == r or r in real.parents for r in roots):
            return None
        return (f"{real} is outside the workspace folders: the server reads only files inside them (or in the "
                f"research's [fetch] allowed_roots).")

    return may_read


def _folder_of(ls: DeepResearchServer, uri: object) -> tuple[Path, Path | None]:
    """The research folder `uri` names (a folder, or a `.dr` document in it) and the document
    named, if any; refused unless it is inside the workspace and may be a research."""
    from ...engine.research import is_message_document

    if not isinstance(uri, str):
        raise JsonRpcInvalidParams(f"expected a folder or .dr document URI, got {uri!r}")
    path = fs_path(uri)
    refusal = control_sentence(f"The path {uri!r}", str(path), name=True)
    if refusal:  # a name with a newline or an escape would fool every listing and terminal that shows it
        raise JsonRpcInvalidParams(refusal)
    try:
        is_folder = path.is_dir() or (not path.exists() and not path.suffix)
    except OSError as error:  # a name too long for the file system …
        raise JsonRpcInvalidParams(f"cannot make a research at {uri}: {error.strerror}") from None
    if is_folder:
        folder, document = path, None  # a folder, made if missing
    elif is_message_document(path):
        folder, document = path.parent, path
    else:
        raise JsonRpcInvalidParams(
            f"{uri} is neither a folder nor a .dr message document: a research is made from its folder "
            "or from the .dr document that will hold its messages")
    if not ls.in_workspace(folder):
        raise JsonRpcInvalidParams(f"{folder} is outside the workspace folders: the server makes researches only inside them")
    return folder, document


def _inputs(options: tuple[Any, ...], command: str) -> Inputs:
    """The options object, checked: known keys, the right types, URIs for files."""
    from ...sources.inputs import Inputs, is_url

    if len(options) > 1:
        raise JsonRpcInvalidParams(f"{command} takes a folder or document URI and one options object")
    given = options[0] if options else None
    if given is None:
        return Inputs()
    if not isinstance(given, dict):
        raise JsonRpcInvalidParams(f"{command}: the options must be an object, got {type(given).__name__}")
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:
        raise JsonRpcInvalidParams(f"{command}: unknown option {unknown[0]!r}; the options are {', '.join(OPTIONS)}")
    for key, kind in OPTIONS.items():
        value = given.get(key)
        if value is not None and (not isinstance(value, kind) or
                                  (kind is list and not all(isinstance(v, str) for v in value))):
            wanted = "a string" if kind is str else "a list of strings"
            raise JsonRpcInvalidParams(f"{command}: `{key}` must be {wanted}")
    instruction = given.get("instruction") or ""

    def file(value: str, key: str) -> Path:
        if value.startswith("file:"):
            return fs_path(value)
        raise JsonRpcInvalidParams(f"`{key}` holds {value[:200]!r}, which is not a file URI"
                                   + (" (or an http(s) URL)" if key == "attachments" else ""))

    attachments: list[str | Path] = [
        value.strip() if is_url(value) and not value.startswith("file:") else file(value, "attachments")
        for value in given.get("attachments") or []]
    return Inputs(instruction, [file(v, "context") for v in given.get("context") or []],
                  list(given.get("contextText") or []), attachments)


def _answer(research: Research, document: Path | None, *, created: bool, made: SetUp) -> dict[str, Any]:
    """The answer; `notes` holds what is worth saying of the sources, a sentence for each folder
    given (its files attached, those skipped and why), and `folders` the whole of it."""
    from ...engine.research import MESSAGE_FILE

    return {
        "created": created,
        "root": from_fs_path(str(research.root)),
        "document": from_fs_path(str(document if document is not None else research.root / MESSAGE_FILE)),
        "promptUri": from_fs_path(str(research.prompt_path)),
        "notes": [*made.notes, *(f.summary() for f in made.folders)],
        "folders": [{"folder": f.given, "attached": f.attached, "skipped": [{"path": p, "why": w} for p, w in f.skipped]}
                    for f in made.folders],
    }
