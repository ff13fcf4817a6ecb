"""The compiled report: the whole research as one document to read and pass on (SPEC §14).

    compilation = build(root)              # build.py: the content, from the tree, no model
    data = render(compilation, "pdf")      # one of FORMATS

`build.py` assembles it (sections depth first, references numbered by first citation, the
Citation check); `md.py` writes the canonical markdown, `page.py` the one-file HTML page that
`convert.py` makes into Word, OpenDocument (pandoc, sandboxed) and PDF (WeasyPrint, fetching
nothing); `bibliography.py` the references alone. The use case (where it is written, which
format a file name asks for) is app/compile.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from .build import Compilation, NothingToCompile, build
from .convert import ConversionFailed, ToolMissing


@dataclass(frozen=True)
class Format:
    name: str
    extension: str  # what `report.<ext>` is written as
    also: tuple[str, ...] = ()  # other extensions that ask for it
    tool: str = ""  # what it needs beyond the package ("" none)
    binary: bool = False


FORMATS = {f.name: f for f in (
    Format("md", ".md", (".markdown",)),
    Format("html", ".html", (".htm",)),
    Format("docx", ".docx", tool="pandoc", binary=True),
    Format("odt", ".odt", tool="pandoc", binary=True),
    Format("pdf", ".pdf", tool="WeasyPrint", binary=True),
    Format("csl-json", ".json", (".csl.json", ".csljson")),
    Format("bibtex", ".bib", (".bibtex",)),
)}


def format_of_name(filename: str) -> Format | None:
    """The format a file name's extension asks for (the longest extension that matches)."""
    lower = filename.lower()
    matches = [(len(ext), f) for f in FORMATS.values() for ext in (f.extension, *f.also) if lower.endswith(ext)]
    return max(matches, key=lambda m: m[0])[1] if matches else None


def render(compilation: Compilation, fmt: str) -> bytes:
    """The compiled report in format `fmt` (a key of FORMATS). ToolMissing or ConversionFailed
    when the tool a format needs is not there or fails."""
    if fmt == "md":
        from .md import render as markdown

        return markdown(compilation).encode("utf-8")
    if fmt == "csl-json":
        from .bibliography import csl_json

        return csl_json(compilation).encode("utf-8")
    if fmt == "bibtex":
        from .bibliography import bibtex

        return bibtex(compilation).encode("utf-8")
    from .page import render as page

    html = page(compilation)
    if fmt == "html":
        return html.encode("utf-8")
    from . import convert

    if fmt == "pdf":
        return convert.pdf(html)
    if fmt in ("docx", "odt"):
        return convert.office(html, fmt)
    raise ValueError(f"unknown format {fmt!r}")


__all__ = ["FORMATS", "Compilation", "ConversionFailed", "Format", "NothingToCompile", "ToolMissing", "build",
           "format_of_name", "render"]
