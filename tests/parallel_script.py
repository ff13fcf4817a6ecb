"""A scripted parallel research for the editors' and the language server's tests: the root
(defined and broken down by `scripted_model.DEFINE` and `BREAK_DOWN`) delegates its two
subproblems, each delegated researcher solves its problem in one message and ends, then main
finishes. Give it to a `ScriptedModel(route=by_problem)` with `script(model)`; `script_reading`
is a four-way fan-out whose delegator acts only on what it was sent (issue 33)."""

from __future__ import annotations

from tests.scripted_model import DEFINE, Read, Say, ScriptedModel

ROOT = "Tiled matrix multiplication for teaching"
CACHE, LOOPS = "Cache sizes", "Loop order"
DELEGATE = "Both parts are independent.\n///delegate Cache sizes\n///delegate Loop order\n"
FINISH = ("///mark_criteria_as_done 1\n///mark_criteria_as_done 2\n<<< write_report\n///content\n"
          "Summarized problem definition: the clearest tiling.\nConclusion: 16x16 tiles.\n>>>\n///focus_up\n")


def solve(topic: str) -> str:
    """A delegated researcher's whole work in one message: it ends at its root (its commands
    are of kinds create and update: with approvalMode create it waits for approval)."""
    return (f"///add_criteria Names {topic}\n///mark_criteria_as_done 1\n<<< write_report\n///content\n"
            f"Summarized problem definition: {topic}.\nConclusion: {topic} is settled.\n>>>\n///focus_up\n")


def script(model: ScriptedModel) -> None:
    """Main delegates then finishes; each delegated researcher solves its problem."""
    model.add_for(ROOT, Say(DELEGATE), Say(FINISH))
    model.add_for(CACHE, Say(solve("the L1 size")))
    model.add_for(LOOPS, Say(solve("the loop order")))


# -- four researchers whose delegator reads what they found (issue 33) -------------------------------

PARTS = ("Cache sizes", "Loop order", "Vector width", "Memory bandwidth")
PLAN_FOUR = ("Four independent questions decide this.\n///add_criteria The answer rests on all four findings\n"
             + "".join(f"<<< add_subproblem\n///title\n{part}\n///content\nWhat does {part} say about tiling?\n>>>\n"
                       for part in PARTS)
             + "".join(f"///delegate {part}\n" for part in PARTS))


def finding(part: str) -> str:
    """What the researcher of `part` found: a sentence only its report holds."""
    return f"Finding of {part}: tiles of {8 * (PARTS.index(part) + 1)} columns suit it."


def report_of(part: str) -> str:
    return (f"///add_criteria States the finding\n///mark_criteria_as_done 1\n<<< write_report\n///content\n"
            f"Summarized problem definition: {part}.\nConclusion: {finding(part)}\n>>>\n///focus_up\n")


READ_FOUR = ("Every researcher's finding is in the child reports.\n///mark_criteria_as_done 1\n<<< write_report\n"
             "///content\nSummarized problem definition: the clearest tiling.\nConclusion: "
             + " ".join(finding(part) for part in PARTS) + "\n>>>\n///focus_up\n")


def script_reading(model: ScriptedModel) -> None:
    """Main (the problem defined) plans four subproblems and delegates them; each delegated
    researcher reports its finding and ends; main writes the root report only once every
    finding is in what it was sent (`Read`): until then it says it waits, and runs nothing."""
    model.add_for(None, Say(DEFINE))
    model.add_for(ROOT, Say(PLAN_FOUR), Read(tuple(finding(part) for part in PARTS), Say(READ_FOUR)))
    for part in PARTS:
        model.add_for(part, Say(report_of(part)))
