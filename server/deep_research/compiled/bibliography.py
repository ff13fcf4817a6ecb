"""The compiled report's References alone, for reference managers: CSL-JSON (Zotero, pandoc's
`--citeproc`) and BibTeX. One item per cited source, keyed by its number (`ref3`), with what
the entry shows: title, address, when it was fetched, its type, the parts cited."""

from __future__ import annotations

import json
import re
from datetime import datetime

from .build import Compilation

_TYPES = {"web page": "webpage", "web search results": "webpage", "note written during the research": "document"}


def _date(shown: str) -> list[int] | None:
    """Year, month, day of a time as an entry shows it (build.when: '2026-12-07 01:53 UTC')."""
    try:
        day = datetime.strptime(shown[:10], "%Y-%m-%d")
    except ValueError:
        return None
    return [day.year, day.month, day.day]


def csl_json(compilation: Compilation) -> str:
    items = []
    for source in compilation.references:
        item: dict = {"id": f"ref{source.number}", "citation-number": source.number,
                      "type": _TYPES.get(source.kind, "article" if "PDF" in source.kind else "document"),
                      "title": source.title}
        if source.final_url or source.url:
            item["URL"] = source.final_url or source.url
        date = _date(source.fetched)
        if date and source.url:
            item["accessed"] = {"date-parts": [date]}
        elif date:
            item["issued"] = {"date-parts": [date]}
        if source.file:
            item["medium"] = f"file {source.file}"
        item["note"] = f"Cited: {source.cited()}. Type: {source.kind}."
        item["source"] = "deep-research compile"  # where the item comes from (and what a compile replaces)
        items.append(item)
    return json.dumps(items, ensure_ascii=False, indent=2) + "\n"


_SPECIAL = re.compile(r"([\\{}%&#$_^~])")
_REPLACE = {"\\": r"\textbackslash{}", "^": r"\^{}", "~": r"\~{}"}


def _tex(text: str) -> str:
    """Text as a BibTeX field's value shows it (LaTeX's special characters escaped, one line)."""
    return _SPECIAL.sub(lambda m: _REPLACE.get(m.group(1), "\\" + m.group(1)), " ".join(text.split()))


def bibtex(compilation: Compilation) -> str:
    entries = []
    for source in compilation.references:
        fields = [("title", "{" + _tex(source.title) + "}")]
        url = source.final_url or source.url
        if url:
            fields.append(("url", url.replace("}", "%7D").replace("{", "%7B").replace(" ", "%20")))
        date = _date(source.fetched)
        if date:
            fields.append(("urldate" if url else "date", "-".join(f"{n:02d}" for n in date)))
        if source.file:
            fields.append(("howpublished", _tex(f"file {source.file}")))
        fields.append(("note", _tex(f"Cited: {source.cited()}. Type: {source.kind}.")))
        body = ",\n".join(f"  {key} = {{{value}}}" for key, value in fields)
        entries.append(f"@misc{{ref{source.number},\n{body}\n}}\n")
    head = f"% The references of “{' '.join(compilation.title.split())[:200]}”, compiled by deep-research.\n\n"
    return head + ("\n".join(entries) if entries else "% No source is cited.\n")
