"""The `deep-research` command line: serve, mcp, new, continue, execute, run, undo, prompt, tree, report, check,
export, compile, repl, commands, demo."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, Sequence

# The engine is imported inside each command: `serve` imports it with the language
# server, inside its start-up window (see `_serve`).

EXIT_OK = 0
EXIT_COMMAND_FAILED = 1  # the message ran, but some of its commands failed or did not run
EXIT_USAGE = 2  # a missing folder, an unreadable file, a folder that is not a research
EXIT_INTERNAL = 70
EXIT_IO = 74  # the file system refused a write (BSD's EX_IOERR)


class UserError(Exception):
    """Something the user can fix; printed without a traceback."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        status = args.run(args)
        if not sys.stdout.closed:  # `serve` may have closed it; a closed pipe is seen here, not at exit
            sys.stdout.flush()
        return status
    except UserError as error:
        _err(f"deep-research: {error}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `deep-research commands | head -1`: the reader has seen enough
        return _reader_gone()
    except OSError as error:  # the file system refused: say what and where, change nothing
        where = f": {error.filename}" if getattr(error, "filename", None) else ""
        _err(f"deep-research: {error.strerror or error}{where}. Nothing was half-written.")
        return EXIT_IO
    except Exception as error:  # never a raw traceback for a user
        from .engine.research import NotAResearch

        if isinstance(error, NotAResearch):
            _err(f"deep-research: {error}")
            return EXIT_USAGE
        if os.environ.get("DEEP_RESEARCH_DEBUG"):
            raise
        _err(
            f"deep-research: internal error: {type(error).__name__}: {error}\n"
            "Nothing was half-written (every change is one transaction). Set DEEP_RESEARCH_DEBUG=1 "
            "to see the traceback, and please report it."
        )
        return EXIT_INTERNAL


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deep-research",
        description="A workbench for deep research done by an LLM (or a person playing one).",
    )
    parser.add_argument("--version", action=_Version, help="show the version, and those of the libraries it runs on")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    def command(name: str, run: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(run=run)
        return p

    serve = command("serve", _serve, "Run the language server (stdio by default).")
    serve.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    serve.add_argument("--stdio", action="store_true", help="use stdio (the default; accepted for editors)")
    serve.add_argument("--log-file", metavar="FILE", help="also write the server's log to FILE")

    def user_inputs(p: argparse.ArgumentParser) -> None:
        """What the user gives a research: for `new`, and again for `continue`."""
        p.add_argument("dir", type=Path)
        p.add_argument("--instruction", default="", help="the user's instruction, shown in every prompt")
        p.add_argument("--instruction-file", type=Path, help="read the instruction from a file")
        p.add_argument("--context", type=Path, action="append", default=[], metavar="PATH",
                       help="a context file, shown in every prompt (repeatable)")
        p.add_argument("--context-text", action="append", default=[], metavar="TEXT",
                       help="context typed in, shown in every prompt (repeatable)")
        p.add_argument("--attach", action="append", default=[], metavar="PATH|FOLDER|URL",
                       help="an attachment, a file, a folder (its text, markdown, code, HTML and PDF files, each "
                            "named by its path below it; at most max_folder_files) or an http(s) URL (fetched "
                            "like ///attach_url, with the [fetch] settings of DIR/deep-research.toml): for "
                            "defining the problem, or of the root problem once it exists (repeatable)")

    user_inputs(command("new", _new, "Create a research in DIR, with its message document DIR/message.dr."))
    user_inputs(command(
        "continue", _continue,
        "Continue an existing research: replace the instruction, add context or attachments; "
        "a finished or shut-down research is reopened at its root.",
    ))

    execute = command("execute", _execute, "Execute the message in a .dr document and consume it. Exit status: 0 "
                      "every command ran (or the document was empty), 1 some failed or did not run (the Errors "
                      "Report says which and why), 2 the document or research cannot be used, 74 the file system "
                      "refused a write.")
    execute.add_argument("file", type=Path)
    execute.add_argument("--quiet", action="store_true", help="print only the Errors Report")

    run = command(
        "run", _run,
        "Let a model drive the research through any OpenAI-compatible endpoint (OPENAI_BASE_URL, "
        "OPENAI_API_KEY), one message per round. Exit status: 0 finished or shut down, 3 waiting for "
        "approval, 4 a limit stopped it, 1 an error.",
    )
    run.add_argument("dir", type=Path)
    add_options(run)  # the settings table's options (engine/settings/table.py)
    run.add_argument("--seed", type=int, help=argparse.SUPPRESS)

    prompt = command("prompt", _prompt, "Print the prompt the assistant sees now.")
    prompt.add_argument("dir", type=Path)
    add_options(prompt, keys=("max_prompt_tokens",))
    prompt.add_argument("--researcher", metavar="NAME",
                        help="the prompt of that researcher (see `researchers`; default: main)")

    researchers = command("researchers", _researchers,
                          "List the researchers working on the research: name, message document, focus, state.")
    researchers.add_argument("dir", type=Path)
    researchers.add_argument("--json", action="store_true", help="print them as a JSON list")

    tree = command("tree", _tree, "Print the problem tree with statuses and criteria counts.")
    tree.add_argument("dir", type=Path)
    tree.add_argument("--stats", action="store_true",
                      help="add each problem's effort: messages, commands, time in focus, model rounds and tokens")

    report = command("report", _report, "Print a problem's report: the answer (default the root problem's). Exit "
                     "status: 0 printed, 1 the problem has no report yet, 2 no such problem or research.")
    report.add_argument("dir", type=Path)
    report.add_argument("problem", nargs="?", default="", metavar="PROBLEM",
                        help="the titles on its path below the root, joined by ' / ', e.g. 'Cache sizes / L1'")

    check = command("check", _check, "Check a research on disk, hand edits included: one finding a line, "
                    "`path:line: message`. Exit status: 0 nothing found, 1 findings, 2 not a research. Writes nothing "
                    "(unless --fix).")
    check.add_argument("dir", type=Path)
    check.add_argument("--fix", action="store_true",
                       help="make the safe fixes first (generated files written again, criteria renumbered, known "
                            "status words), the same an editor offers, and print each; nothing a person wrote is "
                            "removed. What is left is printed as without --fix")

    undo = command("undo", _undo, "Take back the last executed message: the tree, focus, session and prompt "
                   "return to what they were before it (run again to take back the one before).")
    undo.add_argument("dir", type=Path)

    export = command("export", _export, "Write the whole research as one self-contained HTML file (the dossier).")
    export.add_argument("dir", type=Path)
    export.add_argument("-o", "--output", type=Path, metavar="FILE.html",
                        help="where to write it (default: DIR/dossier.html)")

    compile_ = command("compile", _compile, "Compile the whole research into one report: title, instruction, the root's "
                       "report as the summary, contents, every problem depth first, References numbered by first "
                       "citation, the sources consulted but not cited, and the Citation check (quotes and numbers "
                       "checked against the parts they cite). Markdown to standard output by default.")
    compile_.add_argument("dir", type=Path)
    compile_.add_argument("-o", "--output", type=Path, metavar="PATH",
                          help="where to write it (its extension names the format when --format is not given); "
                               "without it, markdown goes to standard output and any other format to "
                               "DIR/report.<ext>")
    compile_.add_argument("--format", metavar="F", help="md (default), html, docx, odt, pdf, csl-json or bibtex "
                          "(docx, odt and pdf need `pip install 'deep-research[export]'`)")

    repl = command("repl", _repl, "Play the assistant: read the prompt, type a message, see the system's reply. "
                   "A message that is exactly :help, :status, :tree, :prompt, :history, :undo, :compile [FORMAT] or :quit does that "
                   "instead. Without a terminal, messages are read from standard input, separated by lines `---`.")
    repl.add_argument("dir", type=Path)
    repl.add_argument("--show-prompt", action="store_true",
                      help="show the whole prompt after every reply (by default :prompt shows it on request)")

    mcp = command(
        "mcp", _mcp,
        "Serve the Model Context Protocol on stdio, so that any agent (VS Code's agent mode, Claude Code, Cursor, "
        "Zed …) can be the researcher of the researches inside ROOT (docs/mcp.md).",
    )
    mcp.add_argument("root", type=Path, nargs="?", default=Path("."),
                     help="the folder whose researches agents may use (default: the current folder)")

    embed = command("embed", _embed, "Embed the sources every researcher's ///find searches now, for semantic search "
                    "([embeddings] in DIR/deep-research.toml), and wait until it is done (the language server, `run`, "
                    "MCP and the REPL do it in the background). Exit status: 0 done, 1 the endpoint failed, 2 semantic "
                    "search is not set up or DIR is not a research.")
    embed.add_argument("dir", type=Path)

    command("commands", _commands, "Print the reference of every command of the message language.")

    demo = command("demo", _demo, "Run a scripted research through the language server and show each step.")
    demo.add_argument("dir", type=Path, nargs="?", help="where to create the demo research (default: a temporary folder)")
    demo.add_argument("--short", action="store_true", help="show only the first lines of each prompt")
    return parser


# -- commands -----------------------------------------------------------------------------------


class _Version(argparse.Action):
    """`--version`: deep-research's, Python's, and each library's with its supported range (for a
    bug report); read only when asked (~0.1 s)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from .versions import report

        _out(report())
        parser.exit()


def _serve(args: argparse.Namespace) -> int:
    import gc

    # Start-up: lsprotocol alone makes thousands of classes; collecting cycles often
    # meanwhile only slows `initialize` down, but never collecting them left ~10 MB of
    # garbage in the process for good (a third of a bare pygls server). So: rarely.
    # Afterwards, freeze what is loaded so later full collections skip it: they were the
    # 20-50 ms tail of request latencies.
    threshold = gc.get_threshold()
    gc.set_threshold(20_000, *threshold[1:])
    from .lsp.wiring import run_server

    gc.set_threshold(*threshold)
    gc.collect()
    gc.freeze()
    return run_server(tcp=args.tcp, log_file=args.log_file)


def _inputs(args: argparse.Namespace, outcome: str):  # -> sources.inputs.Inputs
    """The instruction, context and attachments the user gave (the instruction file read)."""
    from .sources.inputs import Inputs

    instruction = _read(args.instruction_file, f"{outcome} Give plain UTF-8 text.") if args.instruction_file \
        else args.instruction
    return Inputs(instruction, args.context, args.context_text, args.attach)


def _say_folders(made) -> None:  # app.setup.SetUp
    """What each file of a folder given with --attach became, or why it was skipped."""
    for folder in made.folders:
        for line in folder.lines():
            _say(line)


def _new(args: argparse.Namespace) -> int:
    from .app.setup import NOT_CREATED, Refused, new_research_sync
    from .engine.research import MESSAGE_FILE

    hint = f"write the next message in {args.dir / MESSAGE_FILE} and run `deep-research execute`, or " \
           f"`deep-research continue {args.dir}`"
    try:
        made = new_research_sync(args.dir, lambda: _inputs(args, NOT_CREATED), config=lambda: _config(args.dir),
                                 continue_hint=hint, progress=_progress)
    except Refused as refusal:
        raise UserError(str(refusal)) from None
    _notes(made.notes)
    _say(f"Created a research in {made.research.root}")
    _say_folders(made)
    _say(f"Write messages in {made.research.root / MESSAGE_FILE}; the prompt is {made.research.prompt_path}.")
    return EXIT_OK


def _continue(args: argparse.Namespace) -> int:
    from .app.setup import NOT_CHANGED, Refused, check_continue, continue_research_sync
    from .engine.research import MESSAGE_FILE, Research

    folder = _folder(args.dir)
    try:
        check_continue(folder, new_hint=f"`deep-research new {args.dir}`")
        research = Research.open(folder)
        made = continue_research_sync(research, _inputs(args, NOT_CHANGED), config=_config(research.root, research),
                                      progress=_progress)  # one transaction
    except Refused as refusal:
        raise UserError(str(refusal)) from None
    _notes(made.notes)
    reopened = made.reopened
    _say(f"{'Reopened' if reopened else 'Continuing'} the research in {research.root}"
          + (" at its root problem, in a new session." if reopened else "."))
    _say_folders(made)
    _say(f"Write the next message in {research.root / MESSAGE_FILE}.")
    return EXIT_OK


def _notes(notes: list[str]) -> None:
    for note in notes:
        _err(f"deep-research: note: {note}")


def _execute(args: argparse.Namespace) -> int:
    from .app.execute import Refused, execute_sync, message_document
    from .engine.views.reply import unsuccessful
    from .printouts import execution_printout

    try:
        path = message_document(args.file)
    except Refused as refusal:
        raise UserError(str(refusal)) from None
    text = _read(path)
    research, researcher = _document_research(path)
    # Sources (attach_url, attach_file, search) are gathered first, then the message runs in one transaction.
    result = execute_sync(research, text, _config(research.root, research), consume=path.resolve(), progress=_progress,
                          researcher=researcher)
    if result.reason == "already-run":
        _say(f"Nothing to execute: the message in {path} has just been run (by another process) and consumed.")
        return EXIT_OK
    if not result.executed:
        _say(f"Nothing to execute: {path} is empty (a message is consumed once it has run).")
        return EXIT_OK
    _out(execution_printout(result, research, document=path, quiet=args.quiet))
    failed = result.analysis is not None and bool(unsuccessful(result.analysis))  # failed, or not run
    return EXIT_COMMAND_FAILED if failed else EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from .console import Options, run_command
    from .engine.research import NotAResearch

    from .app.run import CannotRun

    try:
        folder = _folder(args.dir)
        return run_command(Options(folder, given(args), args.seed))
    except (UserError, NotAResearch, CannotRun) as error:  # `run` reports every error with status 1
        _err(f"deep-research: {error}")
        return EXIT_COMMAND_FAILED
    except BrokenPipeError:
        raise  # the reader went away: `main` ends quietly
    except OSError as error:  # the file system refused: nothing was half-applied
        where = f": {error.filename}" if getattr(error, "filename", None) else ""
        _err(f"deep-research: {error.strerror or error}{where}. Nothing was half-written.")
        return EXIT_COMMAND_FAILED


def _prompt(args: argparse.Namespace) -> int:
    from .engine.research import NoSuchResearcher, Research
    from .printouts import prompt_printout

    research = Research.open(_folder(args.dir))
    try:
        researcher = research.researcher_named(args.researcher) if args.researcher else "main"
    except NoSuchResearcher as error:
        raise UserError(str(error)) from None
    _out(prompt_printout(research, args.max_prompt_tokens, researcher))
    return EXIT_OK


def _researchers(args: argparse.Namespace) -> int:
    import json

    from .engine.core.text import printable
    from .engine.research import Research
    from .printouts import researchers_printout

    research = Research.open(_folder(args.dir))
    found = research.researchers()
    if args.json:
        print(json.dumps([item.to_json() for item in found], ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(printable(researchers_printout(found)))  # names are titles: anyone may have written them
    return EXIT_OK


def _document_research(path: Path):
    """The research and the researcher of a message document (a clear error otherwise)."""
    from .engine.research import NoSuchResearcher, Research

    try:
        return Research.of_document(path)
    except NoSuchResearcher as error:
        raise UserError(f"{error} {path} was not touched.") from None


def _tree(args: argparse.Namespace) -> int:
    from .engine.core.text import printable
    from .engine.research import Research
    from .engine.tree_view import outline_lines

    research = Research.open(_folder(args.dir))
    stats = None
    if args.stats:
        from .engine.tree.accounting import Ledger

        stats = Ledger(research.root)
    for line in outline_lines(research, stats):  # streamed: a huge tree is never held whole
        print(printable(line))  # titles come from files anyone may have written
    sys.stdout.flush()  # `deep-research tree DIR | head`: a closed pipe ends it quietly (see `main`)
    return EXIT_OK


def _embed(args: argparse.Namespace) -> int:
    from .app.embed import NotSetUp, embed
    from .engine.core.text import printable
    from .engine.research import Research

    research = Research.open(_folder(args.dir))
    for problem in research.config_problems():
        _err(printable(f"deep-research: warning: {problem}"))
    interactive = sys.stderr.isatty()

    def report(progress) -> None:
        if interactive:
            print(f"\rembedding: {progress.done:,} of {progress.total:,} passages", end="", file=sys.stderr, flush=True)

    try:
        progress, sources = embed(research, report=report)
    except NotSetUp as error:
        _err(f"deep-research: {error}")
        return EXIT_USAGE
    if interactive:
        print(file=sys.stderr)
    if progress.error:
        _err(printable(f"deep-research: embedding stopped at {progress.done:,} of {progress.total:,} passages: "
                       f"{progress.error}"))
        return EXIT_COMMAND_FAILED
    print(f"{progress.total:,} passages of {sources:,} sources have their vectors.")
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from .engine.research import Research
    from .engine.tree.reader import UnknownProblem, find_problem
    from .printouts import report_printout

    research = Research.open(_folder(args.dir))
    try:
        path = find_problem(research.tree, args.problem)
    except UnknownProblem as error:
        raise UserError(str(error)) from None
    text, notes = report_printout(research, path)
    for note in notes:
        _err(f"deep-research: {note}")
    if text is None:
        return EXIT_COMMAND_FAILED
    _out(text)
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from .engine.core.text import printable
    from .engine.research import Location, Research, locate
    from .engine.store import pending_path
    from .engine.views.check import check_research

    folder = _folder(args.dir)
    where, root = locate(folder)
    if where is Location.NONE or (where is Location.INSIDE and root != folder.resolve()):
        raise UserError(f"{folder} is not a research" + (
            f": it is inside the research in {root}; check that one" if where is Location.INSIDE else
            " (no .deep-research/ folder and no Problem Definition.md)"))
    research = Research(root)  # not `open`: it would finish an interrupted message, and check writes nothing
    fixed = _fix(args, root) if args.fix else 0
    count = 0
    files: set[Path] = set()
    if pending_path(root).exists():
        count += 1
        print(f"{_shown(args.dir, root, pending_path(root))}:1: a message was interrupted while it "
              "was written: it is finished the next time the research is opened (any command but check)")
    for finding in check_research(research):
        count += 1
        files.add(finding.path)
        print(printable(f"{_shown(args.dir, root, finding.path)}:{finding.line}: {finding.message}"))
    sys.stdout.flush()  # `deep-research check DIR | head`: a closed pipe ends it quietly (see `main`)
    done = f"fixed {fixed:,} finding(s); " if args.fix else ""
    if count:
        left = " left (they need a person)" if args.fix else ""
        _err(f"deep-research: {done}{count:,} finding(s){left} in {len(files) or 1:,} file(s).")
        return EXIT_COMMAND_FAILED
    _err(f"deep-research: {done}nothing {'left' if args.fix else 'found'} in {args.dir}.")
    return EXIT_OK


def _fix(args: argparse.Namespace, root: Path) -> int:
    """`check --fix`: the safe fixes made (an interrupted message finished first), each printed
    as `path:line: fixed: what (the finding)`; how many."""
    from .engine.research import Research
    from .engine.views.repair import fix_research

    made = fix_research(Research.open(root))
    for item in made:
        finding = item.finding
        print(f"{_shown(args.dir, root, finding.path)}:{finding.line}: fixed: {item.fix.title} ({finding.message})")
    return len(made)


def _shown(given: Path, root: Path, path: Path) -> str:
    """`path` as the user named the research: `DIR/Subproblems/…` (clickable in terminals and editors)."""
    try:
        # The entry itself, not where it leads: `check` reports links by their own place.
        return str(given / Path(os.path.realpath(path.parent), path.name).relative_to(os.path.realpath(root)))
    except ValueError:
        return str(path)


def _undo(args: argparse.Namespace) -> int:
    from .engine.research import Research
    from .engine.undo import UndoRefused
    from .printouts import undo_printout

    research = Research.open(_folder(args.dir))
    try:
        undone = research.undo()
    except UndoRefused as refusal:
        _err(f"deep-research: {refusal}")
        return EXIT_COMMAND_FAILED
    _out(undo_printout(research, undone))
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    import time

    from .dossier import export
    from .engine.research import Research
    from .printouts import export_printout, unsettled_export_warning

    research = Research.open(_folder(args.dir))
    target: Path = args.output if args.output is not None else research.root / "dossier.html"
    if target.exists() and target.is_dir():
        raise UserError(f"{target} is a folder; give the file to write, e.g. {target / 'dossier.html'}")
    if not target.parent.is_dir():
        raise UserError(f"{target.parent}: no such folder")
    started = time.perf_counter()
    try:
        result = export(research.root, target, replace_any=args.output is not None)  # -o: the user's choice
    except FileExistsError as error:
        raise UserError(f"{error} (give it explicitly with -o to replace it)") from None
    _out(export_printout(target, result, time.perf_counter() - started))
    warning = unsettled_export_warning(result)
    if warning:
        _err(f"deep-research: {warning}")
    return EXIT_OK


def _compile(args: argparse.Namespace) -> int:
    from .app.compile import Refused, choose_format, compile_report
    from .printouts import compile_printout

    folder = _folder(args.dir)
    try:
        fmt = choose_format(args.format, args.output)
        to_stdout = args.output is None and fmt.name == "md"
        done = compile_report(folder, fmt, args.output, write=not to_stdout, replace_any=args.output is not None)
    except Refused as refusal:
        raise UserError(str(refusal)) from None
    if to_stdout:
        _out(done.data.decode("utf-8"))
    else:
        _say(compile_printout(done))
    if not done.settled:
        _err("deep-research: messages kept running while the report was compiled; it may mix two moments of the "
             "research. Compile again when they stop.")
    return EXIT_OK


def _repl(args: argparse.Namespace) -> int:
    from .engine.research import Research
    from .repl import run_repl

    return run_repl(Research.open(_folder(args.dir)), show_prompt=args.show_prompt)


def _mcp(args: argparse.Namespace) -> int:
    from .versions import library, unfit

    root = _folder(args.root)
    for found in unfit(("mcp",)):  # a dependency, but an editor's Python may lack it or hold another
        raise UserError(found.sentence())
    try:
        from .mcp_server.server import run
    except ImportError as error:  # installed in its range, yet broken
        raise UserError(f"the MCP server needs the Python package `mcp`, which does not import here ({error}): "
                        f"install it again with `{library('mcp').install} --force-reinstall`") from None

    return run(root)


def _commands(args: argparse.Namespace) -> int:
    from .engine.language.commands import COMMANDS

    print("# The commands of a message\n")
    print("Commands start at the beginning of a line. Kinds: read, create, update (see the approval mode).\n")
    for spec in COMMANDS.values():
        print(f"## {spec.name}\n\n{spec.markdown()}\n")
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args.dir, short=args.short)


# -- helpers ------------------------------------------------------------------------------------


def _reader_gone() -> int:
    """Standard output's reader went away (`deep-research commands | head -1`): end quietly, as
    `cat` does under `head`, killed by SIGPIPE (status 141 in a shell). Whatever the command
    wrote to the research was already one whole transaction; only printing is cut short."""
    import signal

    try:  # nothing left to flush when the interpreter exits
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    return 128 + 13  # where there is no SIGPIPE: the status a shell shows for it


def _err(text: str) -> None:
    """A line for the person at the terminal, on standard error: control characters escaped."""
    from .engine.core.text import printable

    print(printable(text), file=sys.stderr, flush=True)


def _say(text: str) -> None:
    """A line for the person who ran the command (paths may hold anything): escaped."""
    from .engine.core.text import printable

    print(printable(text))


def _out(text: str) -> None:
    """What a command prints that scripts and models also read (the prompt, a reply): exact
    when piped, control characters escaped on a terminal (as `ls` does with names)."""
    from .engine.core.text import printable

    sys.stdout.write(printable(text) if sys.stdout.isatty() else text)


def _folder(path: Path) -> Path:
    if not path.exists():
        raise UserError(f"{path}: no such folder")
    if not path.is_dir():
        raise UserError(f"{path} is not a folder")
    return path


def _read(path: Path, after: str | None = None) -> str:
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if path.is_dir():
        raise UserError(f"{path} is a folder, not a file")
    if not os.access(path, os.R_OK):
        raise UserError(f"{path}: permission denied")
    from .engine.core.text import NotText, message_text
    from .engine.store import read_bytes

    data = read_bytes(path)  # a regular file, read without blocking
    if data is None:
        raise UserError(f"{path}: cannot read the file (it is not a regular file, or cannot be opened)")
    try:
        return message_text(data, str(path), *([after] if after else []))
    except NotText as error:
        raise UserError(str(error)) from None


def _config(root: Path, research=None):  # -> engine.settings.Config
    """The research's deep-research.toml (through its file cache, if given); its mistakes are
    warnings, never a stop."""
    from .engine.settings.table import read

    config, problems = read(root, research.cache if research is not None else None)
    for problem in problems:
        _err(f"deep-research: warning: {problem}")
    return config


# -- the settings table's options ---------------------------------------------------------------


def add_options(parser: argparse.ArgumentParser, keys: tuple[str, ...] | None = None) -> None:
    """The settings table's options on a command (all of `run`'s, or those of `keys`); each is
    stored under its setting's key."""
    from .engine.settings.table import SETTINGS

    for setting in SETTINGS:
        if setting.option is None or (keys is not None and setting.key not in keys):
            continue
        default = "" if setting.default in (None, ()) else f" (default {setting.default})"
        parser.add_argument(
            setting.option, dest=setting.key, type=_argument(setting), default=None,
            choices=setting.choices or None, metavar=None if setting.choices else _metavar(setting),
            help=setting.help + default + ("; overrides deep-research.toml" if setting.toml else ""),
        )


def _argument(setting):  # type: ignore[no-untyped-def]
    def convert(text: str):  # type: ignore[no-untyped-def]
        try:
            return setting.argument(text)
        except ValueError as error:  # argparse prints its sentence as it is
            raise argparse.ArgumentTypeError(str(error)) from None

    return convert


def _metavar(setting) -> str:  # type: ignore[no-untyped-def]
    return {int: "N", str: "URL" if setting.key.endswith("url") else "NAME"}.get(setting.kind, "VALUE")


def given(args: argparse.Namespace) -> dict:
    """The settings a command was given (from `add_options`), by the table's keys."""
    from .engine.settings.table import SETTINGS

    return {s.key: getattr(args, s.key) for s in SETTINGS
            if s.option is not None and getattr(args, s.key, None) is not None}


def _progress(done: int, total: int, what: str) -> None:
    """Gathering sources can take seconds: say what is happening, on standard error."""
    _err(f"deep-research: [{done}/{total}] {what}")

