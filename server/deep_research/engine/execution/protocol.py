"""What an operation is: the arguments it is given (`Arg`, `Args`), what it answers (`Result`,
with its `Warning_`s), how it refuses (`CommandError`: nothing was changed), and its type
(`Operation`), which the command table's rows point at. The operations themselves are
`operations.py` (the problem tree), `evidence.py` (the outside world) and `reading.py` (sources
read); analysis and the views take these values without knowing any operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..core.text import Fix, Span

if TYPE_CHECKING:  # pragma: no cover
    from .draft import Draft


@dataclass(frozen=True)
class Arg:
    value: str
    span: Span | None  # where the value is written, for pointing at it


Args = dict[str, Arg]


@dataclass(frozen=True)
class Warning_:
    message: str
    span: Span | None = None
    code: str = "command-warning"  # the diagnostic's code
    fixes: tuple[Fix, ...] = ()


@dataclass
class Result:
    summary: str  # one line for the Execution Status Report
    warnings: list[Warning_] = field(default_factory=list)
    # It replaced something that existed (a report written again): the command counts as an
    # `update` whatever its kind says, for approval, the journal and the accounting.
    replaced: bool = False
    sources: str = ""  # what `read` and `find` show, for the reply's Sources section (reading.py)


class CommandError(Exception):
    """A command that cannot run; nothing was changed."""

    def __init__(self, message: str, span: Span | None = None, fixes: tuple[Fix, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.fixes = fixes


Operation = Callable[["Draft", Args], Result]  # what the command table's rows point at


def quote(text: str, limit: int = 80) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return f'"{text}"'
