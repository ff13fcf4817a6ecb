"""The research tree's records, as the engine holds them in memory."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..core.state import ProblemPath, Status
from ..retrieval.parts import CUTS, LEGACY_CUTS, Reading, reading_of

if TYPE_CHECKING:  # pragma: no cover
    from .staleness import Basis


@dataclass
class Criterion:
    text: str
    done: bool = False


@dataclass
class Problem:
    """One problem folder's content (its subproblems and attachments are loaded apart)."""

    path: ProblemPath
    title: str
    definition: str
    status: Status = Status.OPEN
    criteria: list[Criterion] = field(default_factory=list)
    report: str | None = None
    order: int = 0  # position among its siblings when it was created
    created: str = ""
    report_basis: Basis | None = None  # what the report rested on when written (engine/tree/staleness.py)
    # What a person wrote that the engine does not read, kept when it writes the files again
    # (docs/decisions.md, issue 25): front matter lines of the definition it does not use, and
    # the criteria file's lines that are not criteria, each after as many criteria as preceded it.
    extra_meta: tuple[str, ...] = ()
    criteria_notes: tuple[tuple[int, str], ...] = ()

    @property
    def criteria_met(self) -> int:
        return [c.done for c in self.criteria].count(True)

    @property
    def counts(self) -> str:
        return f"[{self.criteria_met}/{len(self.criteria)} criteria met]"

    def copy(self) -> Problem:
        return Problem(
            self.path, self.title, self.definition, self.status,
            [Criterion(c.text, c.done) for c in self.criteria], self.report, self.order, self.created,
            self.report_basis, self.extra_meta, self.criteria_notes,
        )


@dataclass(frozen=True)
class Attachment:
    name: str  # as the assistant (or user) named it
    content: str
    added: str = ""
    # Where it came from, for attach_url / attach_file / search (empty for typed material).
    source: str = ""  # the URL, path or query as the message wrote it
    final_url: str = ""  # after redirects
    fetched: str = ""
    content_type: str = ""
    sha256: str = ""
    # The version of the cutting its parts are made by (engine/retrieval/parts.py), recorded when it
    # is attached (`attached`); "" when its file records none: attached before issue 46, version 1.
    cuts: str = ""

    def origin(self) -> dict[str, str]:
        """The fields of where it came from (and how it is cut) that are set, as `Draft.add_attachment`
        takes them: a copy keeps its parts."""
        return {key: value for key in ORIGIN_FIELDS if (value := getattr(self, key))}

    @property
    def reading(self) -> Reading:
        """How its text is divided into parts (the cutting recorded with it, its form)."""
        return reading_of(self.content_type, self.cuts, self.source)

    def attached(self) -> Attachment:
        """As it is written when it is attached: with the newest cutting recorded, unless it records one."""
        return self if self.cuts else replace(self, cuts=str(CUTS))

    def copied(self) -> dict[str, str]:
        """What a copy of it records (`Draft.add_attachment`'s `origin`): its parts stay the same."""
        return {**self.origin(), "cuts": self.cuts or str(LEGACY_CUTS)}


ORIGIN_FIELDS = ("source", "final_url", "fetched", "content_type", "sha256", "cuts")
