"""Starting a research and steering it: `new` and `continue`, the same for every front end.

    check_new(folder, show=str, continue_hint="…")        # refused before anything is read or fetched
    made = await new_research(folder, inputs, config=…, show=…, continue_hint=…,
                              may_read=…, progress=…, cancelled=…)
    check_continue(folder, show=str, new_hint="…")
    made = await continue_research(research, inputs, config=…, may_read=…, …)

A front end converts its own forms into `sources.inputs.Inputs` (the command line's
options, the editor's options object of URIs, an MCP tool's arguments), says what it lets
be read (`may_read`: the language server reads only inside its workspace, MCP only inside
its root; the command line anything its user can), how it names a folder (`show`) and its
own commands (the hints), and turns `Refused` into its own error. The rest is here, once:
which folders may become a research (checked before anything is read or fetched), the
limits on what the user gives (`sources/inputs.py`), every file read and page fetched
before anything is written, one transaction, and the sentences.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..engine.core.text import control_sentence
from ..engine.research import Location, NotAResearch, Research, locate, refuse_as_research
from ..sources.inputs import Folder, InputError, Inputs, prepare

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.settings.table import Config
    from ..sources.gather import Progress

NOT_CREATED = "Nothing was created."
NOT_CHANGED = "Nothing was changed."

Show = Callable[[Path], str]  # how a front end names a folder in its sentences


class Refused(Exception):
    """The research cannot be set up as asked; nothing was written. The text is the sentence."""


@dataclass(frozen=True)
class SetUp:
    """A research made or continued, with what is worth telling the user (a page cut short …)."""

    research: Research
    notes: list[str] = field(default_factory=list)
    reopened: bool = False  # continue: a finished or shut-down research was reopened at its root
    folders: list[Folder] = field(default_factory=list)  # what each folder given as an attachment brought


def check_new(folder: Path, *, show: Show = str, continue_hint: str, exist_ok: bool = False) -> None:
    """Why `folder` cannot become a new research, as `Refused`: a name that would fool a
    terminal, the file system's root or the home folder, a file, a folder of another
    research's tree, or (unless `exist_ok`) a research already."""
    shown = show(folder)
    refusal = control_sentence(f"The folder name {str(folder)!r}", str(folder), name=True)
    if refusal:  # a newline or an escape in a name would fool every listing and terminal that shows it
        raise Refused(f"{refusal} {NOT_CREATED}")
    refusal = refuse_as_research(folder)
    if refusal is not None:
        raise Refused(f"{refusal}. {NOT_CREATED}")
    if folder.exists() and not folder.is_dir():
        raise Refused(f"{shown} exists and is not a folder. {NOT_CREATED}")
    where, found = locate(folder)
    if where is Location.RESEARCH and not exist_ok:
        raise Refused(_existing(shown, continue_hint))
    if where is Location.INSIDE:
        raise Refused(_inside(shown, show(found)))


def check_continue(folder: Path, *, show: Show = str, new_hint: str) -> None:
    """Why `folder` cannot be continued, as `Refused`: it is not a research (a problem tree
    without bookkeeping becomes one with `new`, which adopts it)."""
    if not folder.is_dir() or locate(folder)[0] is not Location.RESEARCH:
        raise Refused(f"{show(folder)} is not a research: start one with {new_hint}.")


async def new_research(
    folder: Path, inputs: Inputs | Callable[[], Inputs], *, config: Config | Callable[[], Config],
    show: Show = str, continue_hint: str,
    may_read: Callable[[Path], str | None] | None = None, progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None, exist_ok: bool = False,
) -> SetUp | None:
    """Make `folder` a research with what the user gives: checked first, then every file read
    and every page fetched, then one transaction (`Research.create`). None if cancelled
    (nothing written). `config` is the research's settings as the front end has them (its
    `[fetch]` table applies to pages); `exist_ok`: a research there gets what is given.
    `inputs` and `config` may be functions, called once the folder is checked (a file to
    read, a settings file to warn about)."""
    check_new(folder, show=show, continue_hint=continue_hint, exist_ok=exist_ok)
    prepared = await _prepare(folder, _value(inputs), _value(config), may_read, progress, cancelled, NOT_CREATED)
    if prepared is None:
        return None

    def create() -> Research:
        try:
            return Research.create(folder, prepared.instruction, prepared.context, prepared.attachments,
                                   exist_ok=exist_ok)
        except FileExistsError:  # made meanwhile, by someone else
            raise Refused(_existing(show(folder), continue_hint)) from None
        except NotAResearch as error:  # inside another research (made meanwhile)
            raise Refused(f"{str(error).rstrip('.')}. {NOT_CREATED}") from None

    return SetUp(await asyncio.to_thread(create), list(prepared.notes), folders=list(prepared.folders))


async def continue_research(
    research: Research, inputs: Inputs, *, config: Config,
    may_read: Callable[[Path], str | None] | None = None, progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> SetUp | None:
    """What the user gives an existing research (a new instruction, more context or
    attachments) and, for a finished or shut-down research, its reopening: every source had
    first, then one transaction (`Research.continue_with`). None if cancelled."""
    prepared = await _prepare(research.root, inputs, config, may_read, progress, cancelled, NOT_CHANGED)
    if prepared is None:
        return None
    reopened = await asyncio.to_thread(
        research.continue_with, prepared.instruction, prepared.context, prepared.attachments)
    return SetUp(research, list(prepared.notes), reopened, list(prepared.folders))


def new_research_sync(folder: Path, inputs: Inputs, **options) -> SetUp:  # type: ignore[no-untyped-def]
    """`new_research` for callers without an event loop (the command line; nothing cancels it)."""
    made = asyncio.run(new_research(folder, inputs, **options))
    assert made is not None
    return made


def continue_research_sync(research: Research, inputs: Inputs, **options) -> SetUp:  # type: ignore[no-untyped-def]
    """`continue_research` for callers without an event loop."""
    made = asyncio.run(continue_research(research, inputs, **options))
    assert made is not None
    return made


async def _prepare(folder: Path, inputs: Inputs, config: Config, may_read, progress, cancelled, outcome: str):  # type: ignore[no-untyped-def]
    """Every file read and every page fetched, before anything is written; None if cancelled."""
    try:
        return await prepare(inputs, root=folder, config=config, may_read=may_read, progress=progress,
                             cancelled=cancelled)
    except InputError as error:
        message = error.message if error.message.endswith(outcome) else f"{error.message} {outcome}"
        raise Refused(message) from None


def _value(given):  # type: ignore[no-untyped-def]
    return given() if callable(given) else given


def _existing(shown: str, continue_hint: str) -> str:
    return f"{shown} already holds a research; continue it instead ({continue_hint}). {NOT_CREATED}"


def _inside(shown: str, research: str) -> str:
    return (f"{shown} is inside the research at {research}: it is a folder inside the tree of the research. Make "
            f"a new research in a folder of its own. {NOT_CREATED}")
