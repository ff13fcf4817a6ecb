"""Turning titles and attachment names into safe folder and file names.

Whatever the assistant writes as a title, the name on disk is one plain path component:
no separators, no `.`/`..`, no control characters, no Windows device names, not too
long, and distinct (ignoring case and Unicode normalisation) from its siblings. The
original title is kept inside the files, for display. Also: a user's `~` in a path.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

MAX_NAME_BYTES = 120  # well under the usual 255-byte limit, leaving room for " (99)" and ".md"
_FORBIDDEN = set('<>:"/\\|?*')
_BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_RESERVED = {"CON", "PRN", "AUX", "NUL"} | {f"{p}{i}" for p in ("COM", "LPT") for i in range(10)} | {
    f"{p}{d}" for p in ("COM", "LPT") for d in "¹²³"
}
UNTITLED = "Untitled"


def one_line(text: str) -> str:
    """Titles and names are one line: line breaks and tabs become single spaces."""
    return " ".join(text.replace("\x00", " ").split())


def name_key(name: str) -> str:
    """Two names with the same key would be the same file on some file system."""
    return unicodedata.normalize("NFC", name).casefold()


def safe_component(name: str) -> str:
    """One safe path component for `name` (not yet made unique among siblings)."""
    text = unicodedata.normalize("NFC", name)
    chars = []
    for ch in text:
        if ch in "\t\n\r":
            chars.append(" ")
        elif ch in _FORBIDDEN or ch in _BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Cs"):
            chars.append("_")
        else:
            chars.append(ch)
    text = " ".join("".join(chars).split())
    text = _truncate(text.strip(" ."), MAX_NAME_BYTES).strip(" .")
    if not text:
        return UNTITLED
    if text.split(".")[0].strip().upper() in _RESERVED:
        text = "_" + text
    return text


def unique_component(name: str, taken: set[str], suffix: str = "") -> str:
    """A safe component for `name` whose key is not in `taken` (keys from `name_key`).

    `suffix` (such as ".md") is part of the file name and counts for uniqueness.
    """
    base = safe_component(name)
    if suffix and base.lower().endswith(suffix.lower()) and len(base) > len(suffix):
        base = base[: -len(suffix)].rstrip(" .") or UNTITLED
    candidate = base + suffix
    number = 2
    while name_key(candidate) in taken:
        tail = f" ({number})"
        candidate = _truncate(base, MAX_NAME_BYTES - len(tail.encode())).rstrip(" .") + tail + suffix
        number += 1
    return candidate


def _truncate(text: str, max_bytes: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", errors="ignore")


def expand_home(text: str) -> Path:
    """`~/x` and `~user/x` as the shell expands them; as written when there is no such home
    (`Path.expanduser` raises for an unknown user: a message must not make analysis fail)."""
    try:
        return Path(text).expanduser()
    except (RuntimeError, KeyError):
        return Path(text)
