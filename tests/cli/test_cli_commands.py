"""The `deep-research` command line, run as a real subprocess on real folders:
new, execute, prompt, tree, repl, and the errors a user can make (clear message,
non-zero exit, no traceback, nothing changed)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dr_cli_support import BOOK, DEFINE, FILE_WORDS, REPO, REPORT, cli_env, snapshot

# -- new -----------------------------------------------------------------------------------------------------------


def test_new_creates_a_research(run, tmp_path: Path) -> None:
    folder = tmp_path / "my research"
    result = run("new", folder)
    assert "Created a research in" in result.stdout and str(folder / "message.dr") in result.stdout
    assert (folder / "message.dr").read_text() == ""
    assert (folder / BOOK / "state.json").is_file()
    prompt = (folder / BOOK / "prompt.md").read_text(encoding="utf-8")
    assert prompt.startswith("# Deep Research Interface") and "# How to define a problem" in prompt


def test_new_with_instruction_context_and_attachments(run, tmp_path: Path) -> None:
    (tmp_path / "background.txt").write_text("Caches are 32 KiB.", encoding="utf-8")
    (tmp_path / "early notes.txt").write_text("Tiles of 64 were slow.", encoding="utf-8")
    folder = tmp_path / "research"
    run("new", folder, "--instruction", "Focus on x86.", "--context", tmp_path / "background.txt",
        "--attach", tmp_path / "early notes.txt")
    prompt = (folder / BOOK / "prompt.md").read_text(encoding="utf-8")
    assert "Focus on x86." in prompt
    assert "Caches are 32 KiB." in prompt.split("# Context", 1)[1]
    assert "Tiles of 64 were slow." in prompt.split("# Attachments", 1)[1].split("# Context", 1)[0]
    assert not (folder / "Attachments").exists(), "no problem yet, so no problem folder content"
    # Defining the problem copies the attachments to the root problem.
    (folder / "message.dr").write_text(DEFINE, encoding="utf-8")
    result = run("execute", folder / "message.dr")
    assert "1 attachment(s) were copied" in result.stdout
    copied = list((folder / "Attachments").iterdir())
    assert len(copied) == 1 and "Tiles of 64 were slow." in copied[0].read_text(encoding="utf-8")
    prompt = (folder / BOOK / "prompt.md").read_text(encoding="utf-8")
    section = prompt.split("# Attachments Of Current Problem", 1)[1].split("# Context", 1)[0]
    assert "Tiles of 64 were slow." in section
    assert "Caches are 32 KiB." in prompt.split("# Context", 1)[1] and "Focus on x86." in prompt


def test_new_with_instruction_file(run, tmp_path: Path) -> None:
    (tmp_path / "instruction.txt").write_text("Read the instruction from a file.\n", encoding="utf-8")
    run("new", tmp_path / "r", "--instruction-file", tmp_path / "instruction.txt")
    assert "Read the instruction from a file." in (tmp_path / "r" / BOOK / "prompt.md").read_text(encoding="utf-8")


def test_new_on_an_existing_research_is_refused(run, research: Path) -> None:
    before = snapshot(research)
    result = run("new", research, "--instruction", "Other", code=2)
    assert "already holds a research" in result.stderr
    assert snapshot(research) == before


@pytest.mark.parametrize("option", ["--context", "--attach", "--instruction-file"])
def test_new_with_a_missing_file_creates_nothing(run, tmp_path: Path, option: str) -> None:
    result = run("new", tmp_path / "r", option, tmp_path / "missing.txt", code=2)
    assert "missing.txt: no such file" in result.stderr
    assert not (tmp_path / "r").exists()


def test_new_inside_a_research_is_refused(run, research: Path) -> None:
    (research / "message.dr").write_text("<<< add_subproblem\n///title\nSub A\n///content\nA.\n>>>\n")
    run("execute", research / "message.dr")
    before = snapshot(research)
    result = run("new", research / "Subproblems" / "Sub A", code=2)
    assert "is inside the research" in result.stderr
    assert snapshot(research) == before


def test_new_on_a_tree_without_bookkeeping_adopts_it(run, research: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(research, clone, ignore=shutil.ignore_patterns(BOOK))
    (tmp_path / "late.txt").write_text("Found later.", encoding="utf-8")
    run("new", clone, "--attach", tmp_path / "late.txt")
    assert "Found later." in (clone / "Attachments" / "late.txt.md").read_text(encoding="utf-8")
    prompt = run("prompt", clone).stdout
    assert "# Current Problem: Tiled matrix multiplication" in prompt and "Found later." in prompt


def test_new_on_a_file_is_refused(run, tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    result = run("new", tmp_path / "plain", code=2)
    assert "is not a folder" in result.stderr


# -- execute ----------------------------------------------------------------------------------------------------------


def test_execute_prints_the_report_and_consumes_the_message(run, research: Path) -> None:
    message = research / "message.dr"
    message.write_text("Some thinking.\n///mark_criteria_as_done 1\n", encoding="utf-8")
    result = run("execute", message)
    assert "## Execution Status Report" in result.stdout
    assert "1. Line 2, `mark_criteria_as_done`: done." in result.stdout
    assert "No errors." in result.stdout
    assert message.read_text() == ""
    assert "- [x] 1. First" in (research / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
    before = snapshot(research)
    again = run("execute", message)
    assert "Nothing to execute" in again.stdout
    assert snapshot(research) == before, "running it again does nothing"


def test_execute_exit_code_1_when_a_command_fails(run, research: Path) -> None:
    message = research / "message.dr"
    tree = {k: v for k, v in snapshot(research).items() if not k.startswith(BOOK) and k != "message.dr"}
    message.write_text("///mark_criteria_as_done 7\n///focus_dwn x\n", encoding="utf-8")
    result = run("execute", message, code=1)
    assert "FAILED" in result.stdout
    errors = result.stdout.split("## Errors Report", 1)[1]
    assert "There is no criterion 7" in errors and "Did you mean `focus_down`?" in errors
    assert message.read_text() == "", "a message that ran is consumed, failures included"
    assert {k: v for k, v in snapshot(research).items() if not k.startswith(BOOK) and k != "message.dr"} == tree


def test_execute_quiet_prints_only_errors(run, research: Path) -> None:
    (research / "message.dr").write_text("///add_criteria Third\n", encoding="utf-8")
    result = run("execute", "--quiet", research / "message.dr")
    assert "## Execution Status Report" not in result.stdout and "## Errors Report" in result.stdout


@pytest.mark.parametrize("data, why", [
    (b"///add_criteria caf\xe9 \xff\n", "its bytes are not UTF-8 (byte 0xe9 at offset 19)"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR///add_criteria x\n\x00\x10", "it holds NUL bytes"),
])
def test_a_message_document_that_is_not_text_runs_nothing(run, research: Path, data: bytes, why: str) -> None:
    """A binary file (or one in another encoding) saved as a message: a sentence, nothing run,
    the document left as it was (issue 25)."""
    (research / "message.dr").write_bytes(data)
    before = snapshot(research)
    result = run("execute", research / "message.dr", code=2)
    assert f"message.dr is not text: {why} (a binary file?). Nothing was run and it was left as it is" \
        in result.stderr
    assert snapshot(research) == before


def test_execute_crlf_message(run, research: Path) -> None:
    (research / "message.dr").write_bytes(b"<<< add_subproblem\r\n///title\r\nWindows\r\n///content\r\nCRLF\r\n>>>\r\n")
    run("execute", research / "message.dr")
    assert (research / "Subproblems" / "Windows" / "Problem Definition.md").is_file()


def test_execute_a_whole_research_to_the_end(run, research: Path) -> None:
    message = research / "message.dr"
    steps = [
        "<<< add_subproblem\n///title\nSub A\n///content\nA part.\n>>>\n///focus_down Sub A\n",
        REPORT + "///focus_up\n",
        "///mark_criteria_as_done 1\n///mark_criteria_as_done 2\n" + REPORT + "///focus_up\n",
    ]
    for step in steps:
        message.write_text(step, encoding="utf-8")
        run("execute", message)
    tree = run("tree", research).stdout
    assert "Tiled matrix multiplication [2/2] (done)" in tree and "Sub A [0/0] (done)" in tree
    assert "The research is finished." in tree
    message.write_text("///add_criteria Too late\n", encoding="utf-8")
    result = run("execute", message, code=1)
    assert "research is finished" in result.stdout


# -- prompt and tree ----------------------------------------------------------------------------------------------------


def test_prompt_prints_what_the_assistant_sees(run, research: Path) -> None:
    result = run("prompt", research)
    assert result.stdout == (research / BOOK / "prompt.md").read_text(encoding="utf-8")
    assert "# Current Problem: Tiled matrix multiplication" in result.stdout
    assert "1. [ ] First\n2. [ ] Second" in result.stdout
    session = result.stdout.split("# Current Session", 1)[1]
    fixed_text = result.stdout.split("# Current Session", 1)[0]
    # The research is never shown as files; only attach_file's help speaks of the user's own files.
    fixed_text = "\n".join(line for line in fixed_text.split("\n") if not line.startswith("- `///attach_file "))
    for word in FILE_WORDS:
        assert word not in fixed_text.lower(), word
    assert "///add_criteria Second" in session


def test_prompt_reflects_hand_edits(run, research: Path) -> None:
    criteria = research / "Criteria of Definition of Done.md"
    criteria.write_text(criteria.read_text(encoding="utf-8").replace("- [ ] 2.", "- [x] 2."), encoding="utf-8")
    assert "2. [✓] Second" in run("prompt", research).stdout


def test_tree(run, research: Path) -> None:
    (research / "message.dr").write_text(
        "<<< add_subproblem\n///title\nSub A\n///content\nA.\n>>>\n<<< add_subproblem\n///title\nSub B\n///content\nB.\n>>>\n"
        "///mark_criteria_as_done 1\n", encoding="utf-8",
    )
    run("execute", research / "message.dr")
    assert run("tree", research).stdout == (
        "Tiled matrix multiplication [1/2] (open)  ◀ focus\n"
        "├── Sub A [0/0] (open)\n"
        "└── Sub B [0/0] (open)\n"
        "\n"
        "◀ marks the problem in focus.\n"
    )


def test_execute_exit_status_says_whether_every_command_ran(run, research: Path) -> None:
    """0: every command ran; 1: some failed or did not run (after a focus change), each in the
    Errors Report with why and how to fix it; 2: the document cannot be used."""
    message = research / "message.dr"
    message.write_text("<<< add_subproblem\n///title\nL1\n///content\nHow big?\n>>>\n///focus_down L1\n"
                       "///add_criteria Late\n", encoding="utf-8")
    result = run("execute", message, code=1)
    errors = result.stdout.split("## Errors Report", 1)[1]
    assert "No errors." not in errors
    assert "- Command 3 (Line 8, `add_criteria`) did not run: Comes after the focus change `focus_down` on line 7" in errors
    assert "Move it before line 7, or send it in the next message." in errors
    message.write_text("///add_criteria Fine\n", encoding="utf-8")
    assert "No errors." in run("execute", message, code=0).stdout
    assert run("execute", research / "nowhere.dr", code=2).stderr


def test_tree_before_a_problem(run, tmp_path: Path) -> None:
    run("new", tmp_path / "r")
    assert run("tree", tmp_path / "r").stdout.strip() == "No problem is defined yet."


# -- repl with a script on standard input ------------------------------------------------------------------------------


def test_repl_reads_messages_separated_by_dashes(run, research: Path) -> None:
    script = (
        "Just thinking.\n---\n"
        "///mark_criteria_as_done 1\n///mark_criteria_as_done 2\n" + REPORT + "---\n"
        "///focus_up\n---\n"
        "///add_criteria Never runs\n"
    )
    result = run("repl", research, input=script)
    out = result.stdout
    assert out.count("SYSTEM REPLY TO MESSAGE") == 3
    assert "Your message contained no commands" in out
    assert "`write_report`: done." in out
    assert "The research has ended." in out
    assert "Never runs" not in (research / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
    assert out.index("PROMPT") < out.index("SYSTEM REPLY TO MESSAGE 1")
    assert (research / "Report 3 Pager.md").is_file()


def test_repl_skips_empty_messages(run, research: Path) -> None:
    result = run("repl", research, input="---\n\n---\n///add_criteria Third\n")
    assert "(empty message: nothing sent)" in result.stdout
    assert "3. Third" in (research / "Criteria of Definition of Done.md").read_text(encoding="utf-8")


def test_repl_piped_runs_its_own_commands_and_shows_each_reply_alone(run, research: Path) -> None:
    script = ":help\n---\n///add_criteria Third\n---\n:status\n---\n  :tree  \n---\n:history\n---\n:undo\n---\n" \
             ":prompt\n---\n:nope\n---\n:compile html\n---\n:compile rtf\n---\n:quit\n---\n///add_criteria After quitting\n"
    out = run("repl", research, input=script).stdout
    assert out.count("PROMPT\n") == 2  # at the start and on request, not after the reply
    assert "Messages are separated by lines `---`. :help lists the REPL's own commands." in out
    for name in (":help", ":status", ":tree", ":prompt", ":history", ":undo", ":compile", ":quit"):
        assert f"  {name} " in out
    assert out.count("SYSTEM REPLY TO MESSAGE") == 3  # one reply; in :history, the two of this session
    assert "Focus: the root problem, “Tiled matrix multiplication”" in out
    assert "Messages: 3 executed; 2 in this session (session 2); 3 can be undone." in out
    assert "Tiled matrix multiplication [0/3] (open)  ◀ focus" in out  # :tree
    assert "MESSAGE 2 OF THIS SESSION\n" + "─" * 72 + "\n///add_criteria Third" in out  # :history
    assert "Undid message 3 (with `add_criteria`, which begins “///add_criteria Third”)" in out
    assert "This was the message; send it again, changed, if it still applies:\n\n///add_criteria Third" in out
    assert "Unknown REPL command `:nope`: nothing was sent." in out
    assert f"Wrote {research / 'report.html'} (html, 1 problem, 0 references" in out and "Unknown format “rtf”" in out
    criteria = (research / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
    assert "Third" not in criteria and "After quitting" not in criteria
    prompt = out.rsplit("PROMPT\n", 1)[1]
    assert "Third" not in prompt.split("Unknown REPL command")[0]  # the prompt as it is back after the undo


def test_repl_show_prompt_shows_it_after_every_reply(run, research: Path) -> None:
    out = run("repl", research, "--show-prompt", input="///add_criteria Third\n").stdout
    assert out.count("PROMPT\n") == 2 and out.index("SYSTEM REPLY TO MESSAGE 1") < out.rindex("PROMPT\n")


# -- errors: clear message, exit code 2, no traceback, nothing changed -----------------------------------------------------


@pytest.mark.parametrize("command", ["prompt", "tree", "repl"])
def test_missing_folder(run, tmp_path: Path, command: str) -> None:
    result = run(command, tmp_path / "nowhere", code=2, input="")
    assert result.stderr.startswith("deep-research: ") and "no such folder" in result.stderr
    assert not (tmp_path / "nowhere").exists()


def test_execute_missing_file(run, tmp_path: Path) -> None:
    result = run("execute", tmp_path / "nowhere" / "message.dr", code=2)
    assert "no such file" in result.stderr


def test_execute_a_folder(run, research: Path) -> None:
    result = run("execute", research, code=2)
    assert "is a folder" in result.stderr and "message.dr" in result.stderr


@pytest.mark.parametrize("command", ["prompt", "tree", "repl", "execute"])
def test_folder_that_is_not_a_research(run, tmp_path: Path, command: str) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "message.dr").write_text("///focus_up\n")
    target = folder / "message.dr" if command == "execute" else folder
    result = run(command, target, code=2, input="")
    assert "is not a research" in result.stderr and "deep-research new" in result.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["message.dr"], "nothing was created"
    assert (folder / "message.dr").read_text() == "///focus_up\n"


def test_message_inside_a_subproblem_folder(run, research: Path) -> None:
    (research / "message.dr").write_text("<<< add_subproblem\n///title\nSub A\n///content\nA.\n>>>\n")
    run("execute", research / "message.dr")
    inner = research / "Subproblems" / "Sub A" / "message.dr"
    inner.write_text("///add_criteria wrong place\n")
    before = snapshot(research)
    result = run("execute", inner, code=2)
    assert "No researcher works from" in result.stderr
    assert snapshot(research) == before


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_by_permissions(run, research: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    secret.chmod(0)
    result = run("new", tmp_path / "other", "--context", secret, code=2)
    assert "permission denied" in result.stderr
    message = research / "message.dr"
    message.write_text("///add_criteria x\n")
    message.chmod(0)
    try:
        result = run("execute", message, code=2)
        assert "permission denied" in result.stderr
    finally:
        message.chmod(0o644)


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")
def test_unreadable_file(run, research: Path, tmp_path: Path) -> None:
    """A path that exists but cannot be read as a file (here a socket, unreadable even by root)."""
    before = snapshot(research)
    path = research / "sock.dr"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        result = run("execute", path, code=2)
        assert "cannot read" in result.stderr
        result = run("new", tmp_path / "other", "--context", path, code=2)
        assert f"{path} is not a regular file" in result.stderr and "Nothing was created." in result.stderr
        assert not (tmp_path / "other").exists()
    finally:
        server.close()
        path.unlink()
    assert snapshot(research) == before


def test_symlink_out_of_the_research(run, research: Path, tmp_path: Path) -> None:
    """The tree reaching outside through a symlink: refused, reported without a traceback,
    nothing written outside."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (research / "Attachments").symlink_to(elsewhere, target_is_directory=True)
    (research / "message.dr").write_text("<<< add_attachment\n///name\nN\n///content\nC\n>>>\n")
    result = run("execute", research / "message.dr", code=None)
    assert result.returncode != 0
    assert "outside the research" in result.stderr
    assert list(elsewhere.iterdir()) == []


def test_no_command_prints_usage(run) -> None:
    result = run(code=2)
    assert "usage: deep-research" in result.stdout + result.stderr


def test_version(run) -> None:
    assert run("--version").stdout.startswith("deep-research ")


def test_console_script_entry_point(tmp_path: Path) -> None:
    """The installed `deep-research` script, when this environment has it."""
    script = shutil.which("deep-research", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if script is None:
        pytest.skip("the package is not installed in this environment (python -m deep_research is tested instead)")
    result = subprocess.run([script, "new", str(tmp_path / "r")], capture_output=True, text=True, env=cli_env(), timeout=60)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "r" / BOOK / "prompt.md").is_file()


def test_pyproject_declares_the_console_script() -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'deep-research = "deep_research.cli:main"' in text
