"""Reading a workspace file for `attach_file`, behind the root guard.

The engine's `locate_file` (a stat, no content) checks the resolved path: inside the
research folder or an allowed root, symlinks included, a regular file, not too large.
Reading checks again on the open file, because the file system may change in between:
the file is opened without following a final symlink and without blocking (a FIFO or a
device swapped in would otherwise hang or stream forever), then `fstat` must show the
same regular file that was checked. Then at most the cap is read.

Text and code are kept as they are, HTML is extracted like a web page, PDF becomes its
text, both as pages are: in a worker process stopped past the same limit (`reader`), so a
hostile file cannot hold a message longer than a hostile page; other binary files are refused.

    file = read_file(target, root, roots)          # or read_user_file(path): checked, read (blocking)
    found = await text_of(file, timeout=…)         # its text, as an attachment
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ..engine.execution.evidence import MAX_FILE_BYTES, Found, Refused, locate_file, size_text
from . import SourceError
from .extract import HTML, PDF, TEXT, decode

if TYPE_CHECKING:  # pragma: no cover
    from .reader import Readers

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0) \
    | getattr(os, "O_BINARY", 0)
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}


@dataclass(frozen=True)
class FileRead:
    """A file's bytes as read, checked on the open file, and how the attachment names its source."""

    real: Path
    shown: str
    data: bytes


def read_file(target: str, root: Path, roots: Sequence[Path] = (), max_bytes: int = MAX_FILE_BYTES) -> FileRead:
    """The file at `target` (as `locate_file` resolved it), read. SourceError if it must not or
    cannot be read."""
    try:
        real = locate_file(target, root, roots)
    except Refused as refused:
        raise SourceError(str(refused)) from None
    return FileRead(real, shown_path(real, root), _read(real, max_bytes))


def read_user_file(path: Path, max_bytes: int = MAX_FILE_BYTES, *, shown: str | None = None) -> FileRead:
    """A file the user gave (`deep-research new --context/--attach`, picked in an editor, named
    by an agent): a regular file of at most `max_bytes`, read like `read_file` (checked again
    on the open file). Where it may be is the caller's to check, on its real path (give that
    path here, so the file checked is the file read). SourceError naming it (`shown`) otherwise."""
    real = Path(os.path.realpath(path))
    name = shown or str(path)
    try:
        info = os.stat(real)
    except FileNotFoundError:
        raise SourceError(f"{name}: no such file.") from None
    except OSError as error:
        raise SourceError(f"{name} cannot be read: {error.strerror or error}.") from None
    if stat.S_ISDIR(info.st_mode):
        raise SourceError(f"{name} is a folder, not a file: give the files in it one by one.")
    if not stat.S_ISREG(info.st_mode):
        raise SourceError(f"{name} is not a regular file (a pipe, a device or a socket); only files are read.")
    if info.st_size > max_bytes:
        raise SourceError(f"{name} is {size_text(info.st_size)}; files larger than {size_text(max_bytes)} are not read.")
    if not os.access(real, os.R_OK):
        raise SourceError(f"{name}: permission denied.")
    return FileRead(real, name, _read(real, max_bytes))


async def text_of(file: FileRead, *, timeout: float, readers: Readers | None = None) -> Found:
    """The attachment a file read makes: text and code as they are; HTML and PDF extracted in a
    worker process (`reader`), stopped past `timeout` seconds as a page's reading is."""
    from .reader import TooSlow
    from .reader import readers as shared_readers

    real, data = file.real, file.data
    kind = _kind(real, data, file.shown)
    extracted = None
    if kind != TEXT:
        try:
            extracted = await (readers or shared_readers()).read(data, kind, fallback_title=real.name, timeout=timeout)
        except TooSlow:  # the message goes on without this source; the reading was stopped
            raise SourceError(f"Reading the text of {file.shown} ({len(data):,} bytes of {kind}) took longer than "
                              f"{timeout:g} seconds; nothing was attached.") from None
        except RuntimeError as error:  # the reading process failed on it
            raise SourceError(f"{file.shown} could not be read: {error}.") from None
    text = extracted.text if extracted else decode(data)
    media_type = mimetypes.guess_type(real.name)[0] or ("application/pdf" if kind == PDF else "text/plain")
    return Found(
        title=real.name, text=text, source=file.shown, content_type=media_type,
        sha256=hashlib.sha256(data).hexdigest(), fetched=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        notes=extracted.notes if extracted else (),
    )


def shown_path(real: Path, root: Path) -> str:
    """How the attachment names its source: relative to the research folder when inside it."""
    base = Path(os.path.realpath(root))
    return real.relative_to(base).as_posix() if base in real.parents else str(real)


def _read(real: Path, max_bytes: int) -> bytes:
    before = os.stat(real)
    try:
        fd = os.open(real, _FLAGS)
    except OSError as error:
        raise SourceError(f"{real.name} cannot be opened: {error.strerror or error}.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (before.st_dev, before.st_ino):
            raise SourceError(f"{real.name} changed while it was being opened (it is not the regular file that "
                              "was checked); nothing was attached.")
        if info.st_size > max_bytes:
            raise SourceError(f"{real.name} is {size_text(info.st_size)}; files larger than {size_text(max_bytes)} "
                              "are not attached.")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1024 * 1024, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise SourceError(f"{real.name} holds more than {size_text(max_bytes)} (more than its size said); "
                                  "nothing was attached.")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(real: Path, data: bytes, display: str) -> str:
    if data.startswith(b"%PDF-") or real.suffix.lower() == ".pdf":
        return PDF
    if real.suffix.lower() in HTML_SUFFIXES:
        return HTML
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return TEXT  # UTF-16 text, whose NUL bytes are not a sign of binary
    head = data[:8192]
    controls = sum(1 for byte in head if byte < 9 or 13 < byte < 32)
    if b"\x00" in head or controls > len(head) // 10:
        raise SourceError(f"{display} is a binary file; only text, code, markdown, HTML and PDF files are attached.")
    return TEXT
