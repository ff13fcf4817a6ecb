"""Compiling a research into one report: what `deep-research compile`, the language server's
`deepResearch.compile`, MCP's `compile_report` and the terminal mock's `:compile` do.

    fmt = choose_format("pdf", None)                   # or from a file name; Refused if unknown
    done = compile_report(folder, fmt, target)          # target None: <research>/report.<ext>

The content is built from the tree (compiled/build.py) and rendered in the format; nothing of
the research is written, and no lock is taken (a save never waits for a compile). A message
executed or undone meanwhile changes the state or the journal: then it is compiled again from
the start, up to `ATTEMPTS` times, so that the report shows one moment of the research. The
file is written whole, atomically; the default file (`<research>/report.<ext>`) is replaced
only if a compile wrote it (`is_compiled`), as the dossier keeps someone's `dossier.html`.
"""

from __future__ import annotations

import io
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..compiled import FORMATS, ConversionFailed, Format, NothingToCompile, ToolMissing, build, format_of_name, render
from ..engine.store import atomic_write, moment

DEFAULT_STEM = "report"
ATTEMPTS = 3
MARK = "deep-research"  # what every compiled file holds where `is_compiled` looks


# What each text format a compile writes holds near its start (md.py, page.py, bibliography.py).
_TEXT_MARKS = {
    "md": (b"*Compiled from the research ", b", by deep-research.*"),
    "html": (b'<meta name="generator" content="deep-research ', b' compile">'),
    "bibtex": (b"% The references of ", b"compiled by deep-research."),
}


class Refused(Exception):
    """The report cannot be compiled or written as asked; nothing was written. The text is the sentence."""


@dataclass
class Compiled:
    format: Format
    data: bytes
    path: Path | None  # where it was written (None: the caller shows `data`)
    problems: int
    references: int
    errors: int  # the Citation check's errors
    settled: bool  # False: messages kept running while it was compiled (every attempt)
    seconds: float


def choose_format(name: str | None, target: Path | None = None) -> Format:
    """The format asked for by name, else by the target's extension, else markdown."""
    if name:
        found = FORMATS.get(name.strip().lower())
        if found is None:
            raise Refused(f"Unknown format “{name[:40]}”: choose one of {', '.join(FORMATS)}; nothing was written.")
        return found
    if target is not None:
        found = format_of_name(target.name)
        if found is None:
            raise Refused(f"{target.name[:80]} does not say a format by its extension: name one with --format "
                          f"({', '.join(FORMATS)}), or end the file name in one of "
                          f"{', '.join(f.extension for f in FORMATS.values())}; nothing was written.")
        return found
    return FORMATS["md"]


def default_target(root: Path, fmt: Format) -> Path:
    return root / f"{DEFAULT_STEM}{fmt.extension}"


def research_root(folder: Path) -> Path:
    """The research `folder` is (or is inside); Refused if it is in none."""
    from ..engine.research import Location, locate

    where, root = locate(folder)
    if where is Location.NONE:
        raise Refused(f"{folder} is not a research (no .deep-research/ folder and no Problem Definition.md); "
                      "nothing was written.")
    return root


def compile_report(folder: Path, fmt: Format, target: Path | None = None, *, write: bool = True,
                   replace_any: bool = False) -> Compiled:
    """The research at (or around) `folder` compiled in `fmt`; written to `target` (default
    `<research>/report.<ext>`) unless `write` is False. An existing file is replaced only with
    `replace_any` (the user named it) or if a compile wrote it."""
    started = time.perf_counter()
    root = research_root(folder)
    if write:
        target = Path(os.path.abspath(target if target is not None else default_target(root, fmt)))
        _check_target(target, fmt, replace_any)
    for attempt in range(1, ATTEMPTS + 1):
        before = moment(root)
        try:
            compilation = build(root)
            data = render(compilation, fmt.name)
        except (NothingToCompile, ToolMissing, ConversionFailed) as error:
            raise Refused(str(error)) from None
        settled = moment(root) == before
        if settled:
            break
    if write:
        assert target is not None
        _check_target(target, fmt, replace_any)  # again: it may have appeared meanwhile
        atomic_write(target, data, durable=True)
    return Compiled(fmt, data, target if write else None, len(compilation.sections), len(compilation.references),
                    compilation.check.errors, settled, time.perf_counter() - started)


def _check_target(target: Path, fmt: Format, replace_any: bool) -> None:
    if target.is_dir():
        raise Refused(f"{target} is a folder; give the file to write, e.g. {target / (DEFAULT_STEM + fmt.extension)}.")
    if not target.parent.is_dir():
        raise Refused(f"{target.parent}: no such folder; nothing was written.")
    if target.is_symlink() or (target.exists() and not target.is_file()):
        raise Refused(f"{target} is not a file that may be replaced; nothing was written.")
    if target.exists() and not replace_any and not is_compiled(target, fmt):
        raise Refused(f"{target} exists and was not written by a compile; it was left alone. Remove it, or name "
                      "another file to write.")


def is_compiled(path: Path, fmt: Format) -> bool:
    """Whether `path` holds a report a compile wrote (so replacing it loses nothing)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(64 * 1024 * 1024 if fmt.binary else 64 * 1024)
    except OSError:
        return False
    mark = MARK.encode("ascii")
    if not fmt.binary:
        head = data[:4096] if fmt.name != "md" else data[: data.find(b"\n") + 4096]  # after the title's line
        if fmt.name == "csl-json":  # a list of items, each saying where it comes from; an empty one loses nothing
            return b'"source": "deep-research compile"' in data or data.strip() == b"[]"
        return all(part in head for part in _TEXT_MARKS[fmt.name])
    if fmt.name == "pdf":
        try:
            from pypdf import PdfReader

            meta = PdfReader(io.BytesIO(data)).metadata or {}
        except Exception:  # noqa: BLE001 - someone's damaged PDF is not ours
            return False
        return MARK in str(meta.get("/Creator", ""))
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            inner = "word/document.xml" if fmt.name == "docx" else "content.xml"
            return mark in archive.read(inner)
    except (zipfile.BadZipFile, KeyError, OSError):
        return False
