"""`deep-research demo`: a whole scripted research, run through the real language server.

It starts `deep-research serve` as a subprocess and drives it with pygls's LSP client
exactly as an editor would: it opens the message document, types each message, shows
the diagnostics (and applies a quick fix), asks for completion, runs the "execute"
code action as an editor does on save, and shows the execution report and the prompt
the assistant would see next.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import to_fs_path

from .engine.research import MESSAGE_FILE, Research
from .lsp.client_support import converter_factory


@dataclass(frozen=True)
class Step:
    note: str  # what the demo shows at this step
    message: str
    fix_first: bool = False  # apply the server's quick fix before executing
    complete_at: tuple[int, int] | None = None  # ask for completion at (line, column) first


REPORT_A = """Summarized problem definition: which tile sizes fit the L1 data cache of common CPUs.
Q1: How large is L1d on common CPUs?
A1: 32 KiB on most x86 cores (Skylake to Zen 4), 48 KiB on Ice Lake and later, 64-128 KiB on Apple M cores.
Q1.1: How much of it can a tile use?
A1.1: Three tiles (A, B and C) must fit, with room to spare: about half of L1d.
Q2: Which tile size follows for float32?
A2: 3 x 16 x 16 x 4 bytes = 3 KiB fits everywhere; 32x32 (12 KiB) also fits; 64x64 (48 KiB) does not.
Conclusion: 16x16 tiles fit every common CPU's L1d with a wide margin, which makes them the safe choice for teaching."""

REPORT_ROOT = """Summarized problem definition: the best tile-based 16x16 matrix multiplication in C for students.
Q1: Does a 16x16 tile fit in cache?
A1: Yes: three float32 tiles take 3 KiB, far below every common L1d (see "L1 cache sizes").
Q2: What about the animation?
A2: The animation subproblem failed (no tool to render HTML here); it is left for later.
Conclusion: teach the 16x16 tiled loop nest with i-k-j order inside tiles; it fits L1 everywhere."""

SCRIPT: list[Step] = [
    Step(
        "Define the problem. The draft has a typo (`///add_critera`): the server flags it with a "
        "'did you mean' and a quick fix, which the demo applies before executing.",
        """I will start by defining the research problem.

<<< define_problem
///title
Tiled 16x16 matrix multiplication for students
///content
Find the best tile-based 16x16 matrix multiplication in C for teaching, and explain why it is fast.
>>>
///add_critera The answer explains why the tile size fits the cache
""",
        fix_first=True,
    ),
    Step(
        "Break the problem down into two subproblems and add a criterion.",
        """<<< add_subproblem
///title
L1 cache sizes
///content
Which tile sizes fit the L1 data cache of common CPUs?
>>>
<<< add_subproblem
///title
Animation
///content
An HTML animation that shows each line of the loop nest executing.
>>>
///add_criteria The answer includes a runnable C program
""",
    ),
    Step(
        "Focus down into a subproblem (completion offers the subproblem titles). A new session starts there.",
        "///focus_down L1 cache sizes\n",
        complete_at=(0, len("///focus_down ")),
    ),
    Step(
        "Work on the subproblem: a criterion, an attachment, mark it done, write the report, focus up.",
        f"""///add_criteria Sizes for at least three CPU families
<<< add_attachment
///name
https://en.wikichip.org/wiki/intel/microarchitectures/skylake_(client)
///content
Skylake: L1d 32 KiB, 8-way, 64 B lines.
>>>
///mark_criteria_as_done 1
<<< write_report
///content
{REPORT_A}
>>>
///focus_up
""",
    ),
    Step(
        "Try the other subproblem, which cannot be done here: mark it failed.",
        "///focus_down Animation\n",
    ),
    Step(
        "No tool can render HTML here, so the assistant gives up on this subproblem.",
        "Rendering an animation is not possible with the tools I have.\n///fail_task_and_focus_up\n",
    ),
    Step(
        "Back at the root: mark the criteria, write the final report and focus up, which finishes the research.",
        f"""///mark_criteria_as_done 1
///mark_criteria_as_done 2
<<< write_report
///content
{REPORT_ROOT}
>>>
///focus_up
""",
    ),
]


def run_demo(folder: Path | None = None, *, short: bool = False) -> int:
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="deep-research-demo-")) / "research"
    return asyncio.run(_Demo(folder, short).run())


class _Demo:
    def __init__(self, folder: Path, short: bool) -> None:
        self.folder = folder
        self.short = short
        self.client = LanguageClient("deep-research-demo", "1.0", converter_factory=converter_factory)
        self.text = ""
        self.version = 0
        self.shown: list[str] = []
        self._wire()

    def _wire(self) -> None:
        client = self.client

        @client.feature(types.WORKSPACE_APPLY_EDIT)
        def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
            edits = [e for change in params.edit.document_changes or [] if isinstance(change, types.TextDocumentEdit)
                     for e in change.edits]
            edits += [e for changes in (params.edit.changes or {}).values() for e in changes]
            self._apply(edits)
            return types.ApplyWorkspaceEditResult(applied=True)

        @client.feature(types.WINDOW_SHOW_DOCUMENT)
        def show_document(params: types.ShowDocumentParams) -> types.ShowDocumentResult:
            self.shown.append(params.uri)
            return types.ShowDocumentResult(success=True)

        @client.feature(types.WORKSPACE_CONFIGURATION)
        def configuration(params: types.ConfigurationParams) -> list[object]:
            return [{"approvalMode": "update"} for _ in params.items]

        @client.feature("deepResearch/didExecute")
        def did_execute(params: object) -> None:
            pass  # an editor refreshes its tree view here; the demo prints the reply instead

        @client.feature(types.WINDOW_LOG_MESSAGE)
        def log_message(params: types.LogMessageParams) -> None:
            if params.type <= types.MessageType.Warning:
                print(f"  [server] {params.message}")

        @client.feature(types.WINDOW_SHOW_MESSAGE)
        def show_message(params: types.ShowMessageParams) -> None:
            print(f"  [server says] {params.message}")

    # -- the run ----------------------------------------------------------------------------

    async def run(self) -> int:
        Research.create(self.folder, "Find the best way to teach tiled matrix multiplication.",
                        [("course.md", "Second-year C course; students know loops and arrays, not SIMD.")],
                        exist_ok=True)
        self.uri = (self.folder / MESSAGE_FILE).resolve().as_uri()
        self._banner(f"A new research in {self.folder}")
        env = {**os.environ}
        await self.client.start_io(sys.executable, "-m", "deep_research", "serve", env=env)
        ended = False
        try:
            await self._initialize()
            self.client.text_document_did_open(types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri=self.uri, language_id="deep-research", version=0, text="")))
            for number, step in enumerate(SCRIPT, 1):
                await self._step(number, step)
            self._banner("The research is finished. The problem tree on disk:")
            from .engine.tree_view import render_outline

            print(render_outline(Research.open(self.folder)))
            print(f"\nEverything is in {self.folder} (the prompt: {self.folder / '.deep-research' / 'prompt.md'}).")
            await self.client.shutdown_async(None)
            self.client.exit(None)
            ended = True
        finally:
            if not ended:  # an error above: stop the server rather than wait for it
                self.client.exit(None)
            await self.client.stop()
        return 0

    async def _initialize(self) -> None:
        capabilities = types.ClientCapabilities(
            workspace=types.WorkspaceClientCapabilities(apply_edit=True, configuration=True),
            window=types.WindowClientCapabilities(show_document=types.ShowDocumentClientCapabilities(support=True)),
            text_document=types.TextDocumentClientCapabilities(
                diagnostic=types.DiagnosticClientCapabilities(),
                completion=types.CompletionClientCapabilities(),
                code_action=types.CodeActionClientCapabilities(
                    code_action_literal_support=types.ClientCodeActionLiteralOptions(
                        code_action_kind=types.ClientCodeActionKindOptions(value_set=["quickfix", "source"])))),
        )
        result = await self.client.initialize_async(types.InitializeParams(
            capabilities=capabilities, root_uri=self.folder.resolve().as_uri()))
        info = result.server_info
        print(f"Started the language server: {info.name if info else '?'} {info.version if info else ''}")
        self.client.initialized(types.InitializedParams())

    async def _step(self, number: int, step: Step) -> None:
        self._banner(f"Message {number}: {step.note}")
        self._type(step.message)
        print(_indent(self.text))
        if step.complete_at is not None:
            await self._show_completion(*step.complete_at)
        diagnostics = await self._diagnostics()
        if step.fix_first and diagnostics:
            await self._apply_fix(diagnostics[0])
            print("\nThe message after the quick fix:\n" + _indent(self.text))
            await self._diagnostics()
        action = await self._execute_action()
        print(f"\nSaving runs the code action: {action.title}")
        assert action.command is not None
        result = await self.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=action.command.command, arguments=action.command.arguments))
        print("\nThe system's reply:\n" + _indent(result["report"]))
        print(f"\nThe message document is now {'empty' if not self.text else 'NOT empty'} (the message was consumed).")
        self._show_prompt(result.get("promptUri"))

    def _type(self, text: str) -> None:
        self.text = text
        self.version += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    async def _diagnostics(self) -> list[types.Diagnostic]:
        report = await self.client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri)))
        items = list(getattr(report, "items", []))
        if items:
            print("\nDiagnostics while typing:")
            for d in items:
                severity = types.DiagnosticSeverity(d.severity).name.lower() if d.severity else "note"
                print(f"  {d.range.start.line + 1}:{d.range.start.character + 1} {severity} [{d.code}] {d.message}")
        else:
            print("\nDiagnostics while typing: none.")
        return items

    async def _apply_fix(self, diagnostic: types.Diagnostic) -> None:
        actions = await self.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri), range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic], only=[types.CodeActionKind.QuickFix])))
        fix = next(a for a in actions or [] if isinstance(a, types.CodeAction) and a.edit)
        print(f"\nApplying the quick fix: {fix.title}")
        assert fix.edit is not None and fix.edit.changes is not None
        self._apply([e for edits in fix.edit.changes.values() for e in edits])

    async def _show_completion(self, line: int, column: int) -> None:
        result = await self.client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri),
            position=types.Position(line=line, character=column)))
        items = result.items if isinstance(result, types.CompletionList) else (result or [])
        print(f"\nCompletion at {line + 1}:{column + 1} offers: " + ", ".join(i.label for i in items))

    async def _execute_action(self) -> types.CodeAction:
        actions = await self.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri),
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
            context=types.CodeActionContext(diagnostics=[], only=["source.deepResearch.execute"])))
        return next(a for a in actions or [] if isinstance(a, types.CodeAction))

    def _apply(self, edits: list[types.TextEdit]) -> None:
        lines = self.text.split("\n")

        def offset(position: types.Position) -> int:
            return sum(len(line) + 1 for line in lines[: position.line]) + position.character

        text = self.text
        for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
            text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
        self._type(text)

    def _show_prompt(self, uri: str | None) -> None:
        if not uri:
            return
        prompt = Path(to_fs_path(uri) or "").read_text(encoding="utf-8")
        start = prompt.find("# Current Problem:")
        if self.short or start < 0:
            excerpt = "\n".join(prompt.splitlines()[:12] if start < 0 else prompt[start:].splitlines()[:14])
        else:
            excerpt = prompt[start:]
        print(f"\nThe prompt the assistant sees next ({len(prompt):,} characters; from its current-problem part):")
        print(_indent(excerpt.rstrip()))

    @staticmethod
    def _banner(text: str) -> None:
        print("\n" + "=" * 78 + f"\n{text}\n" + "=" * 78)


def _indent(text: str) -> str:
    return "\n".join("  │ " + line for line in text.rstrip("\n").split("\n")) if text.strip() else "  │ (empty)"
