#!/usr/bin/env python3
"""Generates vscode-client/snippets/deep-research.json from the command table.

The command table (deep_research.engine.language.commands.COMMANDS) is the only list of
commands: this script writes one snippet per block command from each spec's own
`snippet()` and `summary`, so the snippets cannot drift from the server.

    python3 vscode-client/scripts/snippets.py            # write the file
    python3 vscode-client/scripts/snippets.py --check    # exit 1 if the file is stale
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "vscode-client" / "snippets" / "deep-research.json"


def generate() -> str:
    sys.path.insert(0, str(REPO / "server"))
    from deep_research.engine.language.commands import COMMANDS

    snippets = {}
    for spec in COMMANDS.values():
        if not spec.accepts_block:
            continue
        snippets[f"<<< {spec.name}"] = {
            # the name alone: VS Code replaces the word being typed, so a "<<< name"
            # prefix would duplicate "<<<" when typed after it
            "prefix": [spec.name],
            "body": spec.block_snippet().split("\n"),
            "description": f"{spec.summary.rstrip('.')} ({spec.kind.label}; sections: {', '.join(spec.section_names)})",
        }
    return json.dumps(snippets, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = generate()
    if "--check" in argv:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT.relative_to(REPO)} is out of date with the command table: "
                  "run `python3 vscode-client/scripts/snippets.py`", file=sys.stderr)
            return 1
        print(f"{OUT.relative_to(REPO)} matches the command table ({text.count('prefix')} block commands)")
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)} ({text.count('prefix')} block commands)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
