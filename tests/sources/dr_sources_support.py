"""Helpers shared by the sources tests (a uniquely named module: test folders have no
`__init__.py` and pytest puts each on `sys.path`)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from deep_research.sources.guard import AddressPolicy

# Loopback as a stand-in for the internet: treated as public, private networks refused.
INTERNET = AddressPolicy(trusted=(ipaddress.ip_network("127.0.0.1/32"),))
PRIVATE_OK = AddressPolicy(allow_private=True)


def make_pdf(pages: list[str], title: str = "") -> bytes:
    """A small valid PDF with one line of text per page (Helvetica), written by hand."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", ""]
    kids = []
    for text in pages:
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 18 Tf 72 700 Td ({escaped}) Tj ET".encode("latin-1")
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode('latin-1')}\nendstream")
        content = len(objects)
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R "
                       f"/Resources << /Font << /F1 FONT 0 R >> >> >>")
        kids.append(len(objects))
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    font = len(objects)
    objects = [o.replace("FONT", str(font)) for o in objects]
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>"
    info = ""
    if title:
        objects.append(f"<< /Title ({title}) >>")
        info = f" /Info {len(objects)} 0 R"
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


ARTICLE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Tiling for caches | Example Blog</title></head>
<body>
<nav><a href="/">Home</a> · <a href="/about">About us</a> · <a href="/login">Log in</a></nav>
<article>
<h1>Tiling for caches</h1>
<p>Tiled matrix multiplication splits each matrix into square blocks that fit in the L1 data cache, so every
element loaded from memory is reused many times before it is evicted. This is the key to speed on CPUs.</p>
<h2>Choosing the tile size</h2>
<p>Three 16 by 16 tiles of single-precision floats take 3 KB, which leaves room in a 32 KB L1 cache for the
loop's other data. Larger tiles fit L2 instead and trade latency for bandwidth.</p>
<ul><li>Measure before tuning.</li><li>Keep the inner loop simple.</li></ul>
</article>
<footer>Copyright 2025 Example Blog. All rights reserved. Subscribe to our newsletter!</footer>
</body></html>
"""


def read_forever(*args, **kwargs):
    """A reading that never ends, as trafilatura on a hostile page (run in a reader process:
    `reader.Readers(target="dr_sources_support:read_forever")`, importable from there)."""
    import threading

    threading.Event().wait()


def read_title(body: bytes, kind: str, **kwargs):
    """A quick reading that says which process did it."""
    import os

    from deep_research.sources.extract import Extracted

    return Extracted(f"read by {os.getpid()}", body.decode())


# Semantic search's research: a source about tides beside a kitchen's notes, and a question in
# other words than the tides' (QUERY shares no word with TIDES: only meaning finds it).
DEFINE = "<<< define_problem\n///title\nTides\n///content\nWhy are there two tides a day?\n>>>\n"
TIDES = ("# Tides\n\nThe sea rises and falls twice a day. The moon pulls the water of the near side toward it, and "
         "the far side is left behind, so two bulges travel around the planet as it turns.\n")
KITCHEN = "# Kitchen\n\n" + "\n\n".join(f"Note {n}: lamps, kettles and the price of bread; the ocean café opens daily."
                                          for n in range(30)) + "\n"
QUERY = "why do oceans swell on a regular schedule"


def tides_research(path: Path):
    """A research at `path` with a problem in focus, `tides.md` and `kitchen.md` in its folder."""
    from deep_research.engine.research import Research

    research = Research.create(path)
    assert research.execute(DEFINE).executed
    (research.root / "tides.md").write_text(TIDES, encoding="utf-8")
    (research.root / "kitchen.md").write_text(KITCHEN, encoding="utf-8")
    return research
