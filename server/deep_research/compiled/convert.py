"""The compiled report's page made into Word, OpenDocument and PDF files, by well-kept tools
that are told to read and fetch nothing:

- Word and OpenDocument: pandoc (the binary the `pypandoc-binary` wheel bundles, else `pandoc`
  on the PATH, 2.15 or newer), run with `--sandbox` (it reads no file but its input, fetches
  nothing), an empty data folder and home, in an empty working folder, reading the page from
  standard input and writing the file to standard output;
- PDF: WeasyPrint, with a URL fetcher that refuses every address (`file:`, `http:`, `data:`
  alike), imported only when a PDF is asked for.

Their input is the page of compiled/page.py, which holds no image, no raw HTML and no link but
to http(s), mailto and its own anchors; the refusals are a second wall, and the tests hold both
(tests/compiled/test_compiled_formats.py: a loopback server that must see no request, a local
file whose text must not appear). Without the tool, one sentence says what to install.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile

EXTRA = "pip install 'deep-research[export]'"
PANDOC_SECONDS = 300
PANDOC_MIN = (2, 15)  # --sandbox


class ToolMissing(RuntimeError):
    """The tool a format needs is not installed; the text says what to install."""


class ConversionFailed(RuntimeError):
    """The tool ran and failed; the text says how."""


def pandoc() -> str | None:
    """The pandoc to run: the `pypandoc-binary` wheel's, else the PATH's."""
    try:
        import pypandoc  # type: ignore[import-not-found]

        found = pypandoc.get_pandoc_path()
        if found and os.path.isfile(found):
            return str(found)
    except (ImportError, OSError, RuntimeError):
        pass
    return shutil.which("pandoc")


def _version(binary: str) -> tuple[int, ...]:
    try:
        shown = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    match = re.search(r"(\d+)\.(\d+)", shown)
    return tuple(int(n) for n in match.groups()) if match else ()


def office(page: str, fmt: str) -> bytes:
    """The page as a `docx` or `odt` file."""
    binary = pandoc()
    name = {"docx": "A Word file", "odt": "An OpenDocument file"}[fmt]
    if binary is None:
        raise ToolMissing(f"{name} is made by pandoc, which is not installed: install it with `{EXTRA}` "
                          "(or your system's pandoc, 2.15 or newer).")
    version = _version(binary)
    if version < PANDOC_MIN:
        shown = ".".join(map(str, version)) or "of unknown version"
        raise ToolMissing(f"{name} is made by pandoc with --sandbox (2.15 or newer); the pandoc found ({binary}) is "
                          f"{shown}: install a newer one with `{EXTRA}`.")
    with tempfile.TemporaryDirectory(prefix="deep-research-pandoc-") as empty:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": empty, "LANG": "C.UTF-8",
               "XDG_DATA_HOME": empty}
        command = [binary, "--sandbox", f"--data-dir={empty}", "--from=html", f"--to={fmt}", "--output=-"]
        try:
            done = subprocess.run(command, input=page.encode("utf-8"), capture_output=True, cwd=empty, env=env,
                                  timeout=PANDOC_SECONDS)
        except subprocess.TimeoutExpired:
            raise ConversionFailed(f"pandoc did not finish within {PANDOC_SECONDS} s; nothing was written.") from None
        except OSError as error:
            raise ConversionFailed(f"pandoc could not be started ({error}); nothing was written.") from None
    if done.returncode != 0 or not done.stdout:
        said = " ".join(done.stderr.decode("utf-8", "replace").split())[:300]
        raise ConversionFailed(f"pandoc failed (exit status {done.returncode}): {said or 'no message'}; nothing was "
                               "written.")
    return done.stdout


def pdf(page: str) -> bytes:
    """The page as a PDF file."""
    try:
        import weasyprint  # type: ignore[import-not-found]
    except (ImportError, OSError) as error:  # OSError: the wheel is there, Pango is not
        cause = "is not installed" if isinstance(error, ImportError) else f"cannot load its libraries ({error})"
        raise ToolMissing(f"A PDF is made by WeasyPrint, which {cause}: install it with `{EXTRA}`.") from None
    logging.getLogger("weasyprint").setLevel(logging.ERROR)  # a refused address is expected, not news
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    try:
        return weasyprint.HTML(string=page, base_url=None, url_fetcher=refusing_fetcher()).write_pdf()
    except Exception as error:  # noqa: BLE001 - the tool's own failure, said in a sentence
        raise ConversionFailed(f"WeasyPrint failed ({type(error).__name__}: {error}); nothing was written.") from None


def refusing_fetcher():
    """A WeasyPrint URL fetcher that fetches nothing (every address refused, `file:` and `data:` too)."""
    from weasyprint import urls  # type: ignore[import-not-found]

    base = getattr(urls, "URLFetcher", None)
    if base is None:  # WeasyPrint before 66 takes a function
        def refuse(url: str, *args, **kwargs):  # noqa: ANN002, ANN003
            raise ValueError(f"the compiled report fetches nothing ({url[:80]})")

        return refuse

    class Refusing(base):  # type: ignore[misc, valid-type]
        def fetch(self, url, headers=None):  # noqa: ANN001
            raise ValueError(f"the compiled report fetches nothing ({str(url)[:80]})")

    return Refusing()
