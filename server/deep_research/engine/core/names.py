"""Turning titles and attachment names into safe folder and file names.

Whatever the assistant writes as a title, the name on disk is one plain path component:
no separators, no `.`/`..`, no control characters, no Windows device names, not too
long, and distinct (ignoring case and Unicode normalisation) from its siblings. The
original title is kept inside the files, for display. Also: a user's `~` in a path.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Callable, Iterable

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


# -- comparing titles ---------------------------------------------------------------------------------
#
# One normalisation for every comparison of titles and names (add_subproblem's uniqueness,
# focus_down and add_criteria_to_subproblem, delegate, citations, attachment names): NFKC
# (compatibility forms such as ligatures and full-width letters, and composed or decomposed
# accents), invisible format characters (zero-width spaces and joiners, soft hyphens, bidi
# marks) left out, spacing collapsed. Two titles with the same `normal_title` look the same:
# one names the other. Case is a difference that shows (it is offered as a did-you-mean), but
# titles differing only in case may not be siblings (`title_key`).


def normal_title(text: str) -> str:
    """How a title looks: the same for two titles a reader cannot tell apart."""
    if text.isascii():
        return " ".join(text.split())
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return " ".join(unicodedata.normalize("NFKC", text).split())


def title_key(text: str) -> str:
    """Titles (and attachment names) with the same key may not be siblings: they differ at
    most in case, spacing, Unicode form or invisible characters."""
    folded = normal_title(text).casefold()
    return folded if folded.isascii() else unicodedata.normalize("NFKC", folded)


def find_title(wanted: str, titles: Iterable[str]) -> str | None:
    """The title of `titles` that `wanted` names: itself, else the first that looks the same
    (`normal_title`); None if none does. What `focus_down`, `add_criteria_to_subproblem` and
    `delegate` look subproblems up by."""
    titles = list(titles)
    if wanted in titles:
        return wanted
    shown = normal_title(wanted)
    return next((t for t in titles if normal_title(t) == shown), None)


def suggest_title(wanted: str, titles: Iterable[str]) -> str | None:
    """A did-you-mean for `wanted`, which names none of `titles`: one differing in case first,
    else the closest. Never one that looks the same as `wanted` (that one it would have named)."""
    from difflib import get_close_matches

    shown = normal_title(wanted)
    candidates = {normal_title(t): t for t in titles if normal_title(t) != shown}
    key = title_key(wanted)
    same_key = [t for n, t in candidates.items() if title_key(n) == key]
    if same_key:
        return same_key[0]
    near = get_close_matches(shown, list(candidates), n=1, cutoff=0.5)
    return candidates[near[0]] if near else None


def look_alike(wanted: str, suggestion: str) -> str:
    """What tells `wanted` from a `suggestion` of the same length that differs only in
    characters that are not ASCII where the suggestion's are (a Cyrillic а for a Latin a …),
    as a clause for a did-you-mean: "" when that is not the case."""
    if len(wanted) != len(suggestion):
        return ""
    pairs = [(a, b) for a, b in zip(wanted, suggestion) if a != b]
    if not pairs or any(a.isascii() or not b.isascii() for a, b in pairs):
        return ""
    a, b = pairs[0]
    return (f" (what was written has {unicodedata.name(a, f'U+{ord(a):04X}')} U+{ord(a):04X} where it has "
            f"“{b}”: it only looks the same)")


def free_title(title: str, taken: Callable[[str], bool]) -> str:
    """`title`, or `title (2)`, `title (3)` …, the first that `taken` refuses: two sources given the
    same name are both kept and both reachable by name (a name given twice would hide the second
    from `read`, `find` and citations)."""
    name, number = title, 2
    while taken(name):
        name, number = f"{title} ({number})", number + 1
    return name


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
