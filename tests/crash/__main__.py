"""`python -m tests.crash [--full] [scenario …]`: run the crash harness and print its figures.

From the repository root, with the project's Python. Without --full the scenarios are
CI's (small messages); --full records larger ones (more folders, attachments longer than
a disk block, more autopilot rounds). Exit status 1 if any state is inconsistent.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "server"))

from .replay import run  # noqa: E402
from .scenarios import SCENARIOS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.crash", description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the larger scenarios (minutes)")
    parser.add_argument("--quick", action="store_true", help="CI's scenarios (the default)")
    parser.add_argument("scenarios", nargs="*", help=f"some of: {', '.join(s.name for s in SCENARIOS)}")
    args = parser.parse_args(argv)
    chosen = [s for s in SCENARIOS if not args.scenarios or s.name in args.scenarios]
    started = time.perf_counter()
    results = []
    for scenario in chosen:
        result = run(scenario, full=args.full, kill_stride=1 if args.full else 8)
        results.append(result)
        print(result.line(), flush=True)
        for call in result.outside:
            print(f"  OUTSIDE THE SANDBOX: {call}")
    states = sum(r.states for r in results)
    distinct = sum(r.distinct for r in results)
    bad = sum(len(r.inconsistent) for r in results) + sum(len(r.outside) for r in results)
    print(f"{'full' if args.full else 'quick'} run: {len(results)} scenarios, {states:,} crash states, "
          f"{distinct:,} distinct checked, {bad} inconsistent, {time.perf_counter() - started:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
