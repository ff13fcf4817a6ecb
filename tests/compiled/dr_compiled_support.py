"""A research written by hand that exercises every part of the compiled report (a uniquely named
module: test folders have no `__init__.py` and pytest puts each on `sys.path`)."""

from __future__ import annotations

from pathlib import Path

from deep_research.engine.tree import formats
from deep_research.engine.tree.model import Attachment
from deep_research.engine.research import Research

FILLER = "Filler sentence about nothing in particular. " * 100  # a part of its own
INTEL = (f"# Caches\n\nThe L1 data cache is 48 KiB per core and 12-way set associative.\n\n{FILLER}\n\n"
         "# Memory\n\nDDR5 runs at 4,800 MT/s.\n")
AMD = "# Zen 4\n\nZen 4 has a 32 KiB L1 data cache per core."
REPEATED = ("Every cache size here was read from the vendor's own documentation, and each figure was checked "
            "against a second source where one existed.")
TITLE = "How big are L1 caches?"


def block(command: str, /, **sections: str) -> str:
    return f"<<< {command}\n" + "".join(f"///{k}\n{v}\n" for k, v in sections.items()) + ">>>\n"


def attach(research: Research, path: tuple[str, ...], attachment: Attachment) -> None:
    """An attachment written as `attach_url` or `attach_file` writes it (its origin in the front matter)."""
    folder = research.tree.folder(path) / "Attachments"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{attachment.name}.md").write_text(formats.render_attachment(attachment), encoding="utf-8")


def sample(root: Path, *, root_report: str | None = None) -> Research:
    """Root with an instruction, criteria and a report citing its parts with quotes; children:
    AMD (done, its report now stale, a nested Zen 5), Apple (failed), ARM (no report). The Intel
    manual is attached twice (the same address after redirects), the field notes twice (the
    same text), one page is never cited."""
    research = Research.create(root, "Compare the L1 data caches of current CPUs.")
    run = research.execute
    run(block("define_problem", title=TITLE, content="Sizes of L1 data caches on current CPUs, with sources.")
        + "///add_criteria Intel's size is known\n///add_criteria AMD's size is known\n"
        + "".join(block("add_subproblem", title=t, content=f"How big is the L1 on {t}'s cores?")
                  for t in ("AMD", "Apple", "ARM")))
    attach(research, (), Attachment("Intel manual", INTEL, "2026-01-01T00:00:00+00:00",
                                    source="https://example.org/intel", final_url="https://www.example.org/intel/",
                                    fetched="2026-01-01T09:30:00+00:00", content_type="text/html"))
    attach(research, (), Attachment("Unused page", "Nothing cited here.", "2026-01-01T00:00:01+00:00",
                                    source="https://example.org/unused", fetched="2026-01-01T09:31:00+00:00",
                                    content_type="text/html"))
    attach(research, (), Attachment("Field notes", "The L1 of the A17 is 128 KiB.", "2026-01-01T00:00:02+00:00"))
    run("///focus_down AMD\n")
    attach(research, ("AMD",), Attachment("AMD notes", AMD, "2026-01-01T00:00:03+00:00",
                                          source="/home/someone/papers/amd-notes.md", content_type="text/markdown"))
    attach(research, ("AMD",), Attachment("Intel again", INTEL, "2026-01-01T00:00:04+00:00",
                                          source="https://www.example.org/intel/", fetched="2026-01-02T10:00:00+00:00",
                                          content_type="text/html"))
    run(block("add_subproblem", title="Zen 5", content="And Zen 5?")
        + block("write_report", content=(
            "Summarized problem definition: Zen 4's L1.\n"
            'Q1: How big?\nA1: 32 KiB per core [[AMD notes#1|"32 KiB L1 data cache"]], against 48 KiB on Intel '
            '[[Intel again#1|"is 48 KiB per core"]] and DDR5 at 4800 MT/s [[Intel again#1]].\n\n'
            f"{REPEATED}\n\nConclusion: 32 KiB.")))
    run("///focus_down Zen 5\n")
    run(block("write_report", content="Summarized problem definition: Zen 5.\nQ1: Size?\nA1: 48 KiB "
              '[[AMD notes#1|"Zen 5 has 48 KiB"]].\nConclusion: 48 KiB.') + "///focus_up\n")  # AMD's now stale
    run("///focus_up\n")
    run("///focus_down Apple\n")
    run("///fail_task_and_focus_up Apple publishes no cache sizes.\n")
    attach(research, ("ARM",), Attachment("Notes copy", "The L1 of the A17 is 128 KiB.", "2026-01-01T00:00:05+00:00"))
    report = root_report if root_report is not None else (
        "Summarized problem definition: L1 sizes.\n"
        'Q1: Intel?\nA1: 48 KiB [[Intel manual#1|"L1 data cache is 48 KiB"]].\n'
        "Q2: Apple?\nA2: 128 KiB [[Field notes]], by the notes [[Field notes|our own notes]].\n\n"
        f"{REPEATED}\n\n"
        "Conclusion: 48 and 32 KiB.")
    run("///mark_criteria_as_done 1\n///mark_criteria_as_done 2\n" + block("write_report", content=report))
    return research
