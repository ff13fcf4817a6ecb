"""Checks of a 3-page report against the structure the parent problem relies on.

    Summarized problem definition: …
    Q1: …            A1: …
    Q1.1: …          A1.1: …       (deeper questions refine their parent question)
    Q2: …            A2: …
    Conclusion: …

Labels may be decorated as markdown (`**Q1:**`, `### A1.2.`). Findings are advice: the
report is written anyway. Its length is a rule, not advice: `operations.write_report`
refuses a report over the research's word limit (engine/settings/rules.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DECORATION = r"[\s#>*_`\-]*"
_LABEL = re.compile(rf"^{_DECORATION}([QA])\s*(\d+(?:\.\d+)*)\s*[*_`]*\s*[:.)\-]", re.I)
_SUMMARY = re.compile(rf"^{_DECORATION}summari[sz]ed\s+problem\s+definition\b", re.I)
_CONCLUSION = re.compile(rf"^{_DECORATION}conclusions?\b", re.I)


@dataclass(frozen=True)
class Finding:
    message: str
    line: int | None = None  # 0-based line within the report, if it points at one


def word_count(text: str) -> int:
    return len(text.split())


def check(text: str) -> list[Finding]:
    lines = text.split("\n")
    findings: list[Finding] = []
    summary = next((i for i, line in enumerate(lines) if _SUMMARY.match(line)), None)
    conclusion = next((i for i, line in enumerate(lines) if _CONCLUSION.match(line)), None)
    if summary is None:
        findings.append(Finding(
            "The report does not start with `Summarized problem definition:`: restate the problem in a few "
            "lines first, so the parent knows what this report answers.", 0))
    findings.extend(_check_numbering(lines))
    if conclusion is None:
        findings.append(Finding(
            "The report has no `Conclusion:`: end with the answer the parent problem can use.", len(lines) - 1))
    return findings


def _check_numbering(lines: list[str]) -> list[Finding]:
    questions: dict[str, int] = {}
    answers: dict[str, int] = {}
    findings = []
    for index, line in enumerate(lines):
        match = _LABEL.match(line)
        if not match:
            continue
        letter, number = match.group(1).upper(), match.group(2)
        seen = questions if letter == "Q" else answers
        if number in seen:
            findings.append(Finding(f"{letter}{number} appears twice; number each question and answer once.", index))
            continue
        seen[number] = index
        if letter == "Q":
            parent = number.rpartition(".")[0]
            if parent and parent not in questions:
                findings.append(Finding(f"Q{number} comes before its parent question Q{parent}.", index))
        elif number not in questions:
            findings.append(Finding(f"A{number} answers no question: write Q{number}: before it.", index))
    if not questions:
        findings.append(Finding(
            "The report has no numbered questions and answers (`Q1:` … `A1:`): work backwards from the "
            "problem with questions, answering each, going deeper with Q1.1, Q1.2 …", None))
    for number, index in questions.items():
        if number not in answers:
            findings.append(Finding(f"Q{number} has no answer: add A{number}: after it.", index))
    return findings
