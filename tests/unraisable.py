"""A pytest plugin (loaded by tests/conftest.py): an exception that Python cannot raise where it
happens (a `__del__` run by the garbage collector) reaches pytest's own hook later, at the end
of the test phase, never from inside the collector.

Why: pytest's hook formats the exception's traceback at once, and on Python 3.11 formatting a
traceback parses source with `ast` (for its `^^^` marks). The collector runs wherever Python
allocates, inside another `ast.parse` too (pytest's own, while it formats a failure), and CPython
3.11 keeps one AST recursion counter per interpreter (python/cpython#106905): the parse inside
resets it, and the parse outside fails with `SystemError: AST constructor recursion depth
mismatch`, an INTERNALERROR that ended the whole run without a word about the other tests
(issue 44: a half-built openai 3 client's `__del__` raised while pytest formatted its failure).
"""

from __future__ import annotations

import gc
import sys
import types
from typing import Callable

import pytest

Hook = Callable[[object], object]
_pending: list[types.SimpleNamespace] = []
_hooks: list[Hook] = []  # the hook ours stands in front of (pytest's), while installed


class _Shown:
    """The object whose `__del__` raised, by the text it had then (it is gone by the end)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _later(unraisable: object) -> None:
    try:
        shown = repr(getattr(unraisable, "object", None))
    except Exception:  # noqa: BLE001 - a repr that fails is a repr like any other here
        shown = "<an object whose repr failed>"
    _pending.append(types.SimpleNamespace(
        exc_type=getattr(unraisable, "exc_type", None), exc_value=getattr(unraisable, "exc_value", None),
        exc_traceback=getattr(unraisable, "exc_traceback", None), err_msg=getattr(unraisable, "err_msg", None),
        object=_Shown(shown),
    ))


def hand_on() -> None:
    """Give pytest's hook what was kept, outside the collector (its formatting may collect too:
    what that adds is kept, then handed on by the same loop)."""
    while _pending and _hooks:
        _hooks[-1](_pending.pop(0))


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    _hooks.append(sys.unraisablehook)  # pytest's, installed by its own pytest_configure
    sys.unraisablehook = _later


# Ours run before pytest's own (trylast too, registered later), which report what its hook got.
@pytest.hookimpl(trylast=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    hand_on()


@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    hand_on()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    hand_on()


def pytest_unconfigure(config: pytest.Config) -> None:
    gc.collect()
    hand_on()
    if _hooks:
        sys.unraisablehook = _hooks.pop()
