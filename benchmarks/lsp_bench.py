#!/usr/bin/env python3
"""Language-server benchmark: round trips of our server beside a bare pygls server.

    python benchmarks/lsp_bench.py [-n 200] [--starts 7] [--dir DIR] [--keep]

It builds the 10,000-problem research of benchmarks/engine_bench.py (a root, then
10 x 10 x 10 x 10, with its `build_tree` and `move_focus`), focuses a problem three
levels down (10 subproblems), opens a 500-line message in it, and then, over stdio with pygls's LanguageClient, times N
requests of each kind against our server (`python -m deep_research serve`) and against
benchmarks/bare_server.py (constant answers: the cost of Python, pygls, JSON and the
pipe). It prints p50/p99 per kind, the ratio ours/bare, and, separately:

- the server-side time of diagnostics for the 500-line message, in process: the engine
  path (`Research.analyze`) and the whole pull handler (`diagnostics_for`: parse, place,
  analyze, conversion to LSP), both with the start-up objects frozen out of the cyclic
  garbage collector's reach as `deep-research serve` does (`gc.freeze()`); and, for
  comparison, the engine path without that freeze (its tail is collector pauses);
- the time from starting a server process to its `initialize` response.

The SPEC.md §7 targets are printed beside the figures. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Awaitable, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "server"))
sys.path.insert(0, str(HERE))

from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

from deep_research.engine.research import Research  # noqa: E402
from deep_research.lsp.client_support import converter_factory  # noqa: E402
from engine_bench import build_tree, message_lines, move_focus, title_of  # noqa: E402

FOCUS = (3, 7, 0)  # "Problem 4.8.1", depth 3, with 10 leaf subproblems
SUBPROBLEM = title_of(FOCUS + (2,))  # "Problem 4.8.1.3"
SERVER_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "server"), os.environ.get("PYTHONPATH")]))}


def our_command() -> list[str]:
    return [sys.executable, "-m", "deep_research", "serve"]


def bare_command() -> list[str]:
    return [sys.executable, str(HERE / "bare_server.py")]


# -- the message ----------------------------------------------------------------------------------


STANZA = 20  # lines per stanza of the message below


class Message:
    """The 500-line message, with lines where the requests are made."""

    def __init__(self, lines: int = 500) -> None:
        self.lines = message_lines([title_of(FOCUS + (k,)) for k in range(10)], lines)
        # Probes replace the thinking lines of stanza 10; edits rewrite a thinking line of stanza 20.
        base = STANZA * 10
        self.slash = (base, "///")  # completion of command names
        self.focus_down = (base + 1, "///focus_down ")  # completion of subproblem titles
        self.hover_title = (base + 2, f"///focus_down {SUBPROBLEM}")  # hover: the subproblem
        self.hover_command = base + 3  # ///add_criteria …: hover on the command name
        self.edit_line = STANZA * 20
        for line, text in (self.slash, self.focus_down, self.hover_title):
            self.lines[line] = text
        assert self.lines[self.hover_command].startswith("///add_criteria ")
        assert self.lines[self.edit_line].startswith("Some thinking")
        self.edits = 0

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def next_edit(self) -> tuple[types.Range, str]:
        """Rewrite one thinking line (as typing does): the range it replaces and the new text."""
        self.edits += 1
        old = self.lines[self.edit_line]
        new = f"Some thinking about step 21, edited {self.edits} times."
        self.lines[self.edit_line] = new
        line = self.edit_line
        return types.Range(start=types.Position(line=line, character=0),
                           end=types.Position(line=line, character=len(old))), new


# -- statistics -----------------------------------------------------------------------------------


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f}"


# -- a client session ------------------------------------------------------------------------------


CAPABILITIES = types.ClientCapabilities(
    workspace=types.WorkspaceClientCapabilities(apply_edit=True, configuration=True),
    window=types.WindowClientCapabilities(show_document=types.ShowDocumentClientCapabilities(support=True)),
    text_document=types.TextDocumentClientCapabilities(
        synchronization=types.TextDocumentSyncClientCapabilities(did_save=True),
        diagnostic=types.DiagnosticClientCapabilities(),
        completion=types.CompletionClientCapabilities(
            completion_item=types.ClientCompletionItemOptions(snippet_support=True)),
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
    ),
)


class Session:
    """One server process and a pygls LanguageClient talking to it over stdio."""

    def __init__(self, name: str, command: list[str]) -> None:
        self.name, self.command = name, command
        self.client = LanguageClient("lsp-bench", "1.0", converter_factory=converter_factory)
        self.stderr: list[str] = []
        self.log_messages: list[str] = []

        @self.client.feature(types.WORKSPACE_CONFIGURATION)
        def configuration(params: types.ConfigurationParams) -> list[object]:
            return [{"approvalMode": "update"} for _ in params.items]

        @self.client.feature(types.WINDOW_LOG_MESSAGE)
        def log_message(params: types.LogMessageParams) -> None:
            self.log_messages.append(f"{types.MessageType(params.type).name}: {params.message}")

    async def start(self, root: Path) -> float:
        """Start the process and initialise; returns seconds from spawn to the initialize response."""
        began = time.perf_counter()
        await self.client.start_io(*self.command, env=SERVER_ENV, cwd=str(root))
        self._drain = asyncio.create_task(self._read_stderr())
        await self.client.initialize_async(types.InitializeParams(
            capabilities=CAPABILITIES, root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="research")]))
        elapsed = time.perf_counter() - began
        self.client.initialized(types.InitializedParams())
        return elapsed

    async def _read_stderr(self) -> None:
        stream = self.client._server.stderr if self.client._server else None  # pygls pipes it and never reads it
        while stream is not None:
            line = await stream.readline()
            if not line:
                return
            self.stderr = (self.stderr + [line.decode(errors="replace").rstrip()])[-20:]

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 10)
            self.client.exit(None)
        except Exception:
            if self.client._server and self.client._server.returncode is None:
                self.client._server.kill()
        await asyncio.wait_for(self.client.stop(), 10)
        self._drain.cancel()


class Bench:
    def __init__(self, session: Session, uri: str, message: Message) -> None:
        self.s, self.uri, self.message = session, uri, message
        self.version = 0
        self.doc = types.TextDocumentIdentifier(uri=uri)

    def open(self) -> None:
        self.s.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=self.uri, language_id="deep-research", version=self.version, text=self.message.text)))

    def edit(self) -> None:
        rng, text = self.message.next_edit()
        self.version += 1
        self.s.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[types.TextDocumentContentChangePartial(range=rng, text=text)]))

    def completion(self, line: int, character: int) -> Callable[[], Awaitable[object]]:
        params = types.CompletionParams(text_document=self.doc, position=types.Position(line=line, character=character))
        return lambda: self.s.client.text_document_completion_async(params)

    def hover(self, line: int, character: int) -> Callable[[], Awaitable[object]]:
        params = types.HoverParams(text_document=self.doc, position=types.Position(line=line, character=character))
        return lambda: self.s.client.text_document_hover_async(params)

    def diagnostics(self) -> Callable[[], Awaitable[object]]:
        params = types.DocumentDiagnosticParams(text_document=self.doc)
        return lambda: self.s.client.text_document_diagnostic_async(params)

    async def time(self, request: Callable[[], Awaitable[object]], n: int, *, edit: bool) -> tuple[list[float], object]:
        """n round trips (after 20 unmeasured ones). With edit=True each is preceded by a
        didChange, inside the measured time: the server handles it first (as when typing)."""
        result = None
        for _ in range(20):
            if edit:
                self.edit()
            result = await request()
        samples = []
        for _ in range(n):
            began = time.perf_counter()
            if edit:
                self.edit()
            result = await request()
            samples.append(time.perf_counter() - began)
        return samples, result


def describe(kind: str, result: object) -> str:
    """What an answer held, so that the reader sees the work was real."""
    if result is None:
        return "no answer"
    if kind.startswith("completion"):
        items = getattr(result, "items", result) or []
        return f"{len(items)} items: " + ", ".join(i.label for i in list(items)[:3]) + (", …" if len(items) > 3 else "")
    if kind.startswith("hover"):
        value = getattr(getattr(result, "contents", None), "value", "")
        first = value.strip().splitlines()[0] if value.strip() else ""
        return f"{len(value)} chars: {first[:50]}"
    items = getattr(result, "items", [])
    return f"{len(items)} diagnostics"


# -- the parts --------------------------------------------------------------------------------------


def prepare(base: Path) -> Path:
    root = base / "research"
    marker = root / ".deep-research" / "state.json"
    if marker.exists() and (root / "Subproblems").is_dir():
        print(f"reusing the tree in {root}")
    else:
        if root.exists():
            shutil.rmtree(root)
        began = time.perf_counter()
        problems = build_tree(root)
        print(f"built {problems:,} problems in {time.perf_counter() - began:.1f} s: {root}")
    move_focus(root, FOCUS)
    research = Research.open(root)
    focus = research.focus()
    assert focus is not None
    print(f"focus: {focus.title} (depth {len(focus.path)}, {len(research.tree.children(focus.path))} subproblems)")
    return root


async def round_trips(root: Path, n: int) -> dict[str, dict[str, tuple[list[float], object]]]:
    uri = (root / "message.dr").as_uri()
    results: dict[str, dict[str, tuple[list[float], object]]] = {}
    for name, command in (("ours", our_command()), ("bare", bare_command())):
        message = Message()
        session = Session(name, command)
        await session.start(root)
        bench = Bench(session, uri, message)
        try:
            began = time.perf_counter()
            bench.open()
            first = await bench.diagnostics()()
            results.setdefault("didOpen + first pull diagnostics (1 run)", {})[name] = (
                [time.perf_counter() - began], first)
            slash_line, slash = message.slash
            focus_line, focus = message.focus_down
            title_line, _ = message.hover_title
            kinds = [
                ("completion after `///`", bench.completion(slash_line, len(slash)), False),
                ("completion after `///` (+ edit)", bench.completion(slash_line, len(slash)), True),
                ("completion after `focus_down `", bench.completion(focus_line, len(focus)), False),
                ("completion after `focus_down ` (+ edit)", bench.completion(focus_line, len(focus)), True),
                ("hover on a command name", bench.hover(message.hover_command, 6), False),
                ("hover on a subproblem title", bench.hover(title_line, len("///focus_down ") + 3), False),
                ("pull diagnostics, 500 lines (+ edit)", bench.diagnostics(), True),
                ("pull diagnostics, unchanged document", bench.diagnostics(), False),
            ]
            for kind, request, edit in kinds:
                results.setdefault(kind, {})[name] = await bench.time(request, n, edit=edit)
        except Exception:
            print(f"\n{name} server stderr (last lines):\n  " + "\n  ".join(session.stderr))
            raise
        finally:
            await session.stop()
        if session.log_messages:
            print(f"  ({name} server sent {len(session.log_messages)} window/logMessage, e.g. {session.log_messages[0][:120]!r})")
    return results


async def start_times(root: Path, runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"ours": [], "bare": []}
    for _ in range(runs):
        for name, command in (("ours", our_command()), ("bare", bare_command())):
            session = Session(name, command)
            times[name].append(await session.start(root))
            await session.stop()
    return times


def server_side(root: Path, n: int) -> dict[str, list[float]]:
    """Diagnostics of the 500-line message in process: the engine, then the whole handler,
    in the server's configuration (start-up objects frozen, as `deep-research serve` does)."""
    out: dict[str, list[float]] = {}
    message = Message()
    research = Research.open(root)
    gc.collect()
    gc.freeze()
    out["Research.analyze (engine)"] = _time_analyze(research, message, n)

    try:
        from deep_research.lsp.features.diagnostics import diagnostics_for
        from deep_research.lsp.server import create_server

        server = create_server()
        _initialize_in_process(server, root)
        uri = (root / "message.dr").as_uri()
        samples = []
        for i in range(n + 20):
            message.next_edit()
            server.workspace.put_text_document(types.TextDocumentItem(
                uri=uri, language_id="deep-research", version=i, text=message.text))
            began = time.perf_counter()
            diagnostics_for(server, uri)
            if i >= 20:
                samples.append(time.perf_counter() - began)
        out["pull handler (parse + analyze + LSP conversion)"] = samples
    except Exception as error:  # internals of pygls: report, do not fail the benchmark
        print(f"  (the in-process handler could not be measured: {type(error).__name__}: {error})")

    # For comparison: the same engine path without the start-up freeze, so the collector's
    # full passes walk every object alive (lsprotocol's classes among them).
    gc.unfreeze()
    out["Research.analyze without gc.freeze() (comparison)"] = _time_analyze(research, message, n)
    return out


def _time_analyze(research: Research, message: "Message", n: int, warm_up: int = 20) -> list[float]:
    """Seconds per `Research.analyze`, each after an edit of the message."""
    samples = []
    for i in range(n + warm_up):
        message.next_edit()
        text = message.text
        began = time.perf_counter()
        research.analyze(text)
        if i >= warm_up:
            samples.append(time.perf_counter() - began)
    return samples


def _initialize_in_process(server, root: Path) -> None:
    """Run pygls's initialize handler without a connection (it is a generator that yields
    the user's handler), so the server has its workspace and position encoding."""
    generator = server.protocol.lsp_initialize(types.InitializeParams(
        capabilities=CAPABILITIES, root_uri=root.as_uri(), process_id=None))
    try:
        handler, args, _ = next(generator)
        generator.send(handler(*args))
    except StopIteration:
        pass


# -- output -------------------------------------------------------------------------------------------


def print_round_trips(results: dict[str, dict[str, tuple[list[float], object]]], n: int) -> None:
    print(f"\nRound trips over stdio, {n} requests of each kind after 20 warm-up ones (ms; client-side wall time):")
    header = f"  {'request':42s} {'ours p50':>9s} {'ours p99':>9s} {'bare p50':>9s} {'bare p99':>9s} {'ratio p50':>9s} {'ratio p99':>9s}"
    print(header)
    print("  " + "-" * (len(header) - 2))
    for kind, by_server in results.items():
        ours, _ = by_server["ours"]
        bare, _ = by_server["bare"]
        if len(ours) == 1:
            print(f"  {kind:42s} {ms(ours[0]):>9s} {'':>9s} {ms(bare[0]):>9s} {'':>9s} {ours[0] / bare[0]:9.1f}")
            continue
        o50, o99, b50, b99 = pct(ours, 50), pct(ours, 99), pct(bare, 50), pct(bare, 99)
        print(f"  {kind:42s} {ms(o50):>9s} {ms(o99):>9s} {ms(b50):>9s} {ms(b99):>9s} {o50 / b50:9.1f} {o99 / b99:9.1f}")
    print("\n  What our server answered:")
    for kind, by_server in results.items():
        print(f"    {kind:42s} {describe(kind, by_server['ours'][1])}")
    print("  (+ edit): each request follows a didChange that rewrites one line; both are inside the time.")
    print("  (1 run): a single sample, the first request after opening the document.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=200, help="measured requests per kind and server (default 200)")
    parser.add_argument("--starts", type=int, default=7, help="server starts timed per server (default 7)")
    parser.add_argument("--dir", type=Path, help="where to build the tree (reused if it is there already)")
    parser.add_argument("--keep", action="store_true", help="keep the tree afterwards")
    args = parser.parse_args()

    base = args.dir or Path(tempfile.mkdtemp(prefix="dr-lsp-bench-"))
    print(f"Deep Research language-server benchmark (Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f})")
    print(f"ours: {' '.join(our_command())}\nbare: {' '.join(bare_command())}\n")
    try:
        root = prepare(base)
        message = Message()
        print(f"message: {len(message.lines)} lines, {len(message.text):,} characters")

        results = asyncio.run(round_trips(root, args.n))
        print_round_trips(results, args.n)

        print(f"\nServer-side time of diagnostics for the 500-line message, in process ({args.n} runs, each after an edit):")
        inside = server_side(root, args.n)
        for label, samples in inside.items():
            print(f"  {label:48s} p50 {ms(pct(samples, 50))} ms   p99 {ms(pct(samples, 99))} ms   "
                  f"mean {ms(statistics.mean(samples))} ms")

        starts = asyncio.run(start_times(root, args.starts))
        print(f"\nFrom process start to the initialize response ({args.starts} starts each, ms):")
        for name, samples in starts.items():
            print(f"  {name:6s} min {ms(min(samples))}   p50 {ms(pct(samples, 50))}   max {ms(max(samples))}")

        completion = ", ".join(f"{k.removeprefix('completion after ')} {ms(pct(results[k]['ours'][0], 99)).strip()} ms"
                               for k in results if k.startswith("completion"))
        analyze_p50 = pct(inside["Research.analyze (engine)"], 50)
        handler = inside.get("pull handler (parse + analyze + LSP conversion)")
        print("\nSPEC.md §7 targets:")
        print(f"  diagnostics of a 500-line message < 10 ms server time: engine p50 {ms(analyze_p50).strip()} ms, "
              f"p99 {ms(pct(inside['Research.analyze (engine)'], 99)).strip()} ms"
              + (f"; whole handler p50 {ms(pct(handler, 50)).strip()} ms, p99 {ms(pct(handler, 99)).strip()} ms"
                 if handler else ""))
        print(f"  completion p99 < 20 ms with 10,000 problems (round trips): {completion}")
        print(f"  initialize within 0.5 s of starting: worst of {args.starts} starts {ms(max(starts['ours'])).strip()} ms")
    finally:
        if args.keep or args.dir is not None:
            print(f"\nkept {base / 'research'}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
