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

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from ...engine.text import control_sentence
from ..arguments import fs_path
from ..progress import Progress
from ..server import DeepResearchServer
from .diagnostics import refresh_diagnostics

if TYPE_CHECKING:  # pragma: no cover
    from ...engine.research import Research
    from ...sources.inputs import Inputs, Prepared

OPTIONS = {"instruction": str, "context": list, "contextText": list, "attachments": list}
MAX_INSTRUCTION_CHARS = 100_000


def register(server: DeepResearchServer) -> None:
    @server.command("deepResearch.newResearch")
    async def new_research(ls: DeepResearchServer, uri: str, *options: Any) -> dict[str, Any]:
        from ...engine.research import Location, locate

        folder, document = _folder_of(ls, uri)
        inputs = _inputs(options, "deepResearch.newResearch")
        if not options:  # as before options came: the folder made a research (an existing one left as it is)
            research = _create(folder, exist_ok=True)
            refresh_diagnostics(ls)
            answer = _answer(research, document, created=True)
            return {"root": answer["root"], "document": answer["document"]}
        if folder.is_dir() and locate(folder)[0] is Location.RESEARCH:
            raise JsonRpcInvalidParams(f"{folder} already holds a research; continue it instead "
                                       "(Deep Research: Continue Research…, deepResearch.continueResearch).")
        prepared = await _prepare(ls, folder, inputs, "Nothing was created.")
        if prepared is None:
            return {"created": False, "reason": "cancelled"}
        research = await asyncio.to_thread(
            _create, folder, prepared.instruction, prepared.context, prepared.attachments)
        refresh_diagnostics(ls)
        return _answer(research, document, created=True, prepared=prepared)

    @server.command("deepResearch.continueResearch")
    async def continue_research(ls: DeepResearchServer, uri: str, *options: Any) -> dict[str, Any]:
        from ...engine.research import Location, locate

        folder, document = _folder_of(ls, uri)
        if not folder.is_dir() or locate(folder)[0] is not Location.RESEARCH:
            raise JsonRpcInvalidParams(f"{folder} is not a research: start one with Deep Research: New Research "
                                       "(deepResearch.newResearch).")
        inputs = _inputs(options, "deepResearch.continueResearch")
        prepared = await _prepare(ls, folder, inputs, "Nothing was changed.")
        if prepared is None:
            return {"created": False, "reason": "cancelled"}
        research = ls.research(folder)

        def apply() -> bool:  # one transaction, as `deep-research continue`
            try:
                return research.continue_with(prepared.instruction, prepared.context, prepared.attachments)
            except OSError as error:
                raise JsonRpcInvalidParams(f"cannot continue the research in {folder}: {error}. Nothing was changed.") from None

        reopened = await asyncio.to_thread(apply)
        refresh_diagnostics(ls)
        return {**_answer(research, document, created=False, prepared=prepared), "reopened": reopened}


def _folder_of(ls: DeepResearchServer, uri: object) -> tuple[Path, Path | None]:
    """The research folder `uri` names (a folder, or a `.dr` document in it) and the document
    named, if any; refused unless it is inside the workspace and may be a research."""
    from ...engine.research import is_message_document, refuse_as_research

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
    refusal = refuse_as_research(folder)
    if refusal is not None:
        raise JsonRpcInvalidParams(refusal)
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
    if len(instruction) > MAX_INSTRUCTION_CHARS:
        raise JsonRpcInvalidParams(f"the instruction is {len(instruction):,} characters long; at most "
                                   f"{MAX_INSTRUCTION_CHARS:,} are kept. Put the rest in a context file.")

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


async def _prepare(ls: DeepResearchServer, folder: Path, inputs: Inputs, outcome: str) -> Prepared | None:
    """Every file read and every page fetched, before anything is written; None if cancelled."""
    from ...sources.inputs import InputError, prepare

    config = ls.config(folder)
    roots = [Path(os.path.realpath(r)) for r in config.fetch.allowed_roots]

    def may_read(real: Path) -> str | None:
        if ls.in_workspace(real) or any(real == r or r in real.parents for r in roots):
            return None
        return (f"{real} is outside the workspace folders: the server reads only files inside them (or in the "
                f"research's [fetch] allowed_roots). {outcome}")

    progress = await Progress.start(ls, "Deep Research: reading the sources")
    try:
        return await prepare(inputs, root=folder, config=config, may_read=may_read, progress=progress.sources,
                             cancelled=progress.cancelled)
    except InputError as error:
        message = error.message if error.message.endswith(outcome) else f"{error.message} {outcome}"
        raise JsonRpcInvalidParams(message) from None
    finally:
        progress.end()


def _create(folder: Path, *args: Any, **kwargs: Any) -> Research:
    """`Research.create`, its failures as sentences for the client."""
    from ...engine.research import NotAResearch, Research

    try:
        return Research.create(folder, *args, **kwargs)
    except FileExistsError as error:
        raise JsonRpcInvalidParams(str(error)) from None
    except (OSError, ValueError) as error:
        raise JsonRpcInvalidParams(f"cannot make {folder} a research: {error}. Nothing was half-made.") from None
    except NotAResearch as error:  # inside another research
        raise JsonRpcInvalidParams(str(error)) from None


def _answer(research: Research, document: Path | None, *, created: bool, prepared: Prepared | None = None
            ) -> dict[str, Any]:
    """The answer; `notes` holds what is worth saying of the sources, a sentence for each folder
    given (its files attached, those skipped and why), and `folders` the whole of it."""
    from ...engine.research import MESSAGE_FILE

    folders = prepared.folders if prepared is not None else []
    return {
        "created": created,
        "root": from_fs_path(str(research.root)),
        "document": from_fs_path(str(document if document is not None else research.root / MESSAGE_FILE)),
        "promptUri": from_fs_path(str(research.prompt_path)),
        "notes": [*(prepared.notes if prepared is not None else []), *(f.summary() for f in folders)],
        "folders": [{"folder": f.given, "attached": f.attached, "skipped": [{"path": p, "why": w} for p, w in f.skipped]}
                    for f in folders],
    }
