"""A scripted parallel research for the editors' and the language server's tests: the root
(defined and broken down by `scripted_model.DEFINE` and `BREAK_DOWN`) delegates its two
subproblems, each delegated researcher solves its problem in one message and ends, then main
finishes. Give it to a `ScriptedModel(route=by_problem)` with `script(model)`."""

from __future__ import annotations

from tests.scripted_model import Say, ScriptedModel

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
