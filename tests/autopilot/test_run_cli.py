"""`deep-research run` in a subprocess against the scripted model: exit statuses, what is
printed, the files and the journal afterwards, Ctrl-C mid-stream, deep-research.toml."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from deep_research.engine.research import Research
from tests.autopilot.conftest import rounds
from tests.scripted_model import BREAK_DOWN, DEFINE, WHOLE_RESEARCH, Hold, Say, ScriptedModel, by_problem

SERVER = Path(__file__).resolve().parents[2] / "server"


def env(**extra: str) -> dict[str, str]:
    # not COLUMNS and LINES either: a terminal's size is its own (pytest-xdist's workers set 80 x 24)
    out = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DEEP_RESEARCH_DEBUG")) and k not in ("COLUMNS", "LINES")}
    out.update(PYTHONPATH=str(SERVER), PYTHONIOENCODING="utf-8", NO_COLOR="1", **extra)
    return out


def deep_research(*args: object, code: int | None = None, **extra: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "deep_research", *map(str, args)], capture_output=True, text=True,
                            env=env(**extra), timeout=120, stdin=subprocess.DEVNULL)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    if code is not None:
        assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    return result


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    Research.create(tmp_path / "r", "Find the clearest tiled matrix multiplication for teaching.")
    return tmp_path / "r"


def test_a_whole_research_ends_with_status_0(folder: Path, model: ScriptedModel) -> None:
    model.add(*[Say(text) for text in WHOLE_RESEARCH])
    result = deep_research("run", folder, "--base-url", model.base_url, code=0)
    lines = [line for line in result.stdout.splitlines() if line.startswith("round ")]
    assert len(lines) == 5 and all("executed" in line for line in lines), result.stdout
    assert "round 4 (main): executed; commands 4 ok, 0 failed, 0 not run" in lines[3]
    assert "The research is finished." in result.stdout and result.stderr == ""
    assert len(rounds(folder)) == 5
    # The answer in hand (issue 26): the root's report ends the output, as `report` prints it.
    answer = ("The answer: the report of “Tiled matrix multiplication for teaching”:\n\n"
              "Summarized problem definition: the clearest tiling for teaching.\n")
    assert answer in result.stdout and result.stdout.endswith("Conclusion: teach the 16x16 tiled loop nest.\n")
    report = deep_research("report", folder, code=0).stdout
    assert result.stdout.endswith("\n\n" + report) and report.startswith("Summarized problem definition")
    assert "Q1: How large is L1?" in deep_research("report", folder, "Cache sizes", code=0).stdout
    unwritten = deep_research("report", folder, "loop ORDER", code=1)  # names are forgiving of case
    assert unwritten.stdout == "" and "“Loop order” has no report yet (open, 0 of 0 criteria done)" in unwritten.stderr
    unknown = deep_research("report", folder, "Cache sizes / L9", code=2)
    assert "There is no subproblem “L9” under “Cache sizes”" in unknown.stderr
    tree = deep_research("tree", folder, code=0).stdout
    assert "Cache sizes" in tree and "Loop order" in tree
    stats = deep_research("tree", folder, "--stats", code=0).stdout  # the accounting reads the round records
    assert "5 model rounds" in stats, stats


def test_each_round_prints_the_share_of_its_prompt_the_server_had_cached(folder: Path) -> None:
    script = [Say(DEFINE), Say("///add_criteria Names a tile size\n"), Say("///add_criteria Has a sketch\n")]
    # its prompt cache: what the last request shared; a context the conversation fits in
    with ScriptedModel(script, llama_cpp=True, context=16384) as llama:
        result = deep_research("run", folder, "--base-url", llama.base_url, "--grammar", "off", "--max-rounds", "3",
                               code=4)
        sent = ["".join(m["content"] for m in request["messages"]) for request in llama.requests]
    lines = [line for line in result.stdout.splitlines() if line.startswith("round ")]
    shares = [int(line.split("% cached")[0].rsplit(" ", 1)[-1]) for line in lines]
    assert shares[2] >= 80, lines
    records = rounds(folder)
    assert records[2]["cached_tokens"] == len(sent[1]) // 4, "within a session the last prompt is a prefix of the next"
    assert all(isinstance(r["cached_tokens"], int) for r in records), "and the journal records it"


def test_approval_without_a_terminal_stops_with_status_3(folder: Path, model: ScriptedModel) -> None:
    model.add(Say(DEFINE))
    result = deep_research("run", folder, "--base-url", model.base_url, "--approval", "read", code=3)
    assert f"deep-research execute {folder / 'message.dr'}" in result.stdout
    assert (folder / "message.dr").read_text(encoding="utf-8") == DEFINE
    deep_research("execute", folder / "message.dr", code=0)  # the person approves
    assert Research.open(folder).tree.problem(()) is not None


def test_the_round_limit_stops_with_status_4(folder: Path, model: ScriptedModel) -> None:
    model.add(*[Say(text) for text in WHOLE_RESEARCH])
    result = deep_research("run", folder, "--base-url", model.base_url, "--max-rounds", "2", code=4)
    assert "Stopped after 2 rounds (--max-rounds 2)" in result.stdout and len(rounds(folder)) == 2


def test_an_unreachable_endpoint_is_one_line_with_status_1(folder: Path) -> None:
    result = deep_research("run", folder, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", code=1)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("deep-research: cannot reach the model endpoint http://127.0.0.1:9/v1")


def test_not_a_research_is_status_1(tmp_path: Path) -> None:
    result = deep_research("run", tmp_path, "--base-url", "http://127.0.0.1:9/v1", code=1)
    assert "is not a research" in result.stderr


def test_the_research_settings_are_read_and_the_command_line_wins(folder: Path, model: ScriptedModel) -> None:
    (folder / "deep-research.toml").write_text(
        f'base_url = "{model.base_url}"\nmodel = "from-toml"\nmax_rounds = 1\ngrammar = "on"\nbogus = 1\n', encoding="utf-8")
    model.add(Say(DEFINE), Say("Thinking.\n"))
    result = deep_research("run", folder, code=4)
    assert "unknown key `bogus`" in result.stderr
    assert model.requests[0]["model"] == "from-toml" and "grammar" in model.requests[0]
    deep_research("run", folder, "--model", "from-cli", "--grammar", "off", "--max-rounds", "1", code=4)
    assert model.requests[1]["model"] == "from-cli" and "grammar" not in model.requests[1]


def test_the_budgets_are_options_of_run(folder: Path, model: ScriptedModel) -> None:
    model.add(Say(DEFINE), Say(BREAK_DOWN))  # two subproblems
    result = deep_research("run", folder, "--base-url", model.base_url, "--grammar", "off", "--max-rounds", "2",
                           "--max-breadth", "1", "--max-criteria", "4", "--max-depth", "1", "--rounds-per-problem", "5",
                           code=4)
    assert "round 2 (main): executed; commands 3 ok, 1 failed, 0 not run" in result.stdout
    session = (folder / ".deep-research").glob("sessions/*")
    replies = "".join(path.read_text(encoding="utf-8") for path in session)
    assert "the most the research's budget allows (max_breadth = 1)" in replies
    assert [c.title for c in Research.open(folder).tree.children(())] == ["Cache sizes"]
    bad = deep_research("run", folder, "--max-breadth", "0", code=2)
    assert "--max-breadth must be a whole number from 1 to 100, not '0'" in bad.stderr


def test_the_environment_gives_the_endpoint(folder: Path, model: ScriptedModel) -> None:
    model.add(Say(DEFINE))
    deep_research("run", folder, "--max-rounds", "1", code=4, OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="sk-env-7")
    assert model.authorizations == ["Bearer sk-env-7"]


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_mid_stream_stops_cleanly_and_keeps_the_draft(folder: Path, model: ScriptedModel) -> None:
    model.add(Say(DEFINE), Hold("I add criteria.\n///add_criteria Names a tile size\n"))
    process = subprocess.Popen(
        [sys.executable, "-m", "deep_research", "run", str(folder), "--base-url", model.base_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), stdin=subprocess.DEVNULL,
    )
    try:
        model.wait_for(lambda m: m.holding == 1)  # the second round's reply is streaming
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in out + err
    assert "stopped (interrupted); nothing was half-applied" in err
    model.wait_for(lambda m: m.disconnects == 1)
    research = Research.open(folder)
    assert research.state().messages == 1 and research.focus().criteria == []
    draft = (folder / "message.dr").read_text(encoding="utf-8")
    # what had arrived of the reply (the client may not have read all that was sent)
    assert "I add criteria.\n///add_criteria Names a tile size\n".startswith(draft)
    assert [r["outcome"] for r in rounds(folder)] == ["executed", "cancelled"]
    if draft:  # the next run does not drop the draft: it stops and says what to do
        again = deep_research("run", folder, "--base-url", model.base_url, code=3)
        assert "has not been executed" in again.stdout


def test_on_a_terminal_the_reply_streams_and_approval_is_asked(folder: Path, model: ScriptedModel) -> None:
    import pexpect

    model.add(*[Say(text) for text in WHOLE_RESEARCH])
    child = pexpect.spawn(sys.executable, ["-m", "deep_research", "run", str(folder), "--base-url", model.base_url,
                                           "--approval", "create"],
                          env=env(TERM="xterm"), encoding="utf-8", timeout=60, dimensions=(50, 200))
    child.expect("round 1 · 0 tokens · defining the problem · 0:0")  # the status line
    child.expect("Tiled matrix multiplication for teaching")  # the reply as it streams
    child.expect("define_problem`: done")  # its Execution Status Report
    child.expect("round 4 · ")
    child.expect(r"Tiled matrix multiplication for teaching › Cache sizes")
    child.expect("above the approval mode `create`")
    child.expect("line 2: `mark_criteria_as_done` \\(update\\)")
    child.expect(r"\[t\]\? ")
    child.send("r\r")  # run it
    child.expect("focus_up`: done")
    child.expect("above the approval mode")
    child.send("t\r")  # stop: the last message waits
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 3
    assert (folder / "message.dr").read_text(encoding="utf-8") == WHOLE_RESEARCH[-1]
    assert Research.open(folder).tree.problem(("Cache sizes",)).report


PLANNED = BREAK_DOWN + "///delegate Cache sizes\n///delegate Loop order\n"


ROOT_TITLE = "Tiled matrix multiplication for teaching"
MAIN_FINISH = ("///mark_criteria_as_done 1\n///mark_criteria_as_done 2\n<<< write_report\n///content\nSummarized "
               "problem definition: tiling.\nConclusion: 16x16.\n>>>\n///focus_up\n")


def answer(model: ScriptedModel) -> None:
    """Each delegated researcher answers its part in one message, then main finishes."""
    for title in ("Cache sizes", "Loop order"):
        model.add_for(title, Say(f"///add_criteria Answers {title}\n///mark_criteria_as_done 1\n<<< write_report\n"
                                 f"///content\nSummarized problem definition: {title}.\nConclusion: done.\n>>>\n"
                                 "///focus_up\n"))
    model.add_for(ROOT_TITLE, Say(MAIN_FINISH))


def held_fan_out(cache: str, loops: str) -> ScriptedModel:
    """Main delegates both parts; each delegated researcher's first reply is held (`release`)."""
    model = ScriptedModel(route=by_problem)
    model.add_for(None, Say(DEFINE))
    model.add_for(ROOT_TITLE, Say(PLANNED))
    model.add_for("Cache sizes", Hold(cache))
    model.add_for("Loop order", Hold(loops))
    return model.start()


def fan_out_model() -> ScriptedModel:
    """Main delegates both parts; each delegated researcher answers its part in one message."""
    model = ScriptedModel(route=by_problem)
    model.add_for(None, Say(DEFINE))
    model.add_for(ROOT_TITLE, Say(PLANNED))
    answer(model)
    return model.start()


def test_a_parallel_run_prints_one_line_per_round_naming_the_researcher(folder: Path) -> None:
    model = fan_out_model()
    try:
        result = deep_research("run", folder, "--base-url", model.base_url, "--parallel", "2", code=0)
    finally:
        model.stop()
    lines = [line for line in result.stdout.splitlines() if line.startswith("round ")]
    assert len(lines) == 5 and all("executed" in line for line in lines), result.stdout
    named = sorted(line.split(":")[0].split(" (")[1].rstrip(")") for line in lines)
    assert named == ["Cache sizes", "Loop order", "main", "main", "main"], lines
    assert "up to 2 researchers at once" in result.stdout
    assert "  Cache sizes: 1 round(s), ended" in result.stdout and "  main: 3 round(s)" in result.stdout
    assert Research.open(folder).state().phase.value == "finished"


def test_the_parallel_setting_comes_from_deep_research_toml(folder: Path) -> None:
    model = fan_out_model()
    (folder / "deep-research.toml").write_text(f'base_url = "{model.base_url}"\nparallel = 2\n', encoding="utf-8")
    try:
        result = deep_research("run", folder, code=0)
    finally:
        model.stop()
    assert "up to 2 researchers at once" in result.stdout
    (folder / "deep-research.toml").write_text("parallel = 0\n", encoding="utf-8")
    bad = deep_research("run", folder, "--max-rounds", "1")
    assert "`parallel` must be a whole number from 1 to 64, not 0; ignored" in bad.stderr


def test_on_a_terminal_the_status_line_shows_every_working_researcher(folder: Path) -> None:
    import pexpect

    model = held_fan_out("Thinking about caches.\n///add_criteria Names the L1 size\n",
                         "Thinking about loops.\n///add_criteria Names an order\n")
    try:
        child = pexpect.spawn(sys.executable, ["-m", "deep_research", "run", str(folder), "--base-url", model.base_url,
                                               "--parallel", "2", "--max-rounds", "4"],
                              env=env(TERM="xterm"), encoding="utf-8", timeout=60, dimensions=(50, 200))
        child.expect("round 2 · main: executed")  # the delegating round, one line above the status line
        child.expect("2 writing · ")
        child.expect(r"main: waiting for its delegations │ Cache sizes: writing │ Loop order: writing")
        model.wait_for(lambda m: m.holding == 2)
        model.release()
        child.expect(pexpect.EOF)
        child.close()
    finally:
        model.stop()
    assert child.exitstatus == 4, child.before  # --max-rounds 4
    out = child.before
    assert "Thinking about caches" not in out, "with several at once the replies do not stream into each other"
    assert "round 3 · " in out and "round 4 · " in out


def test_a_run_killed_in_the_middle_of_a_fan_out_resumes_every_researcher(folder: Path) -> None:
    model = held_fan_out("Half a thought about caches", "Half a thought about loops")
    try:
        process = subprocess.Popen([sys.executable, "-m", "deep_research", "run", str(folder), "--base-url",
                                    model.base_url, "--parallel", "2"], env=env(), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        model.wait_for(lambda m: m.holding == 2)  # both delegated researchers are writing
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        listed = deep_research("researchers", folder, code=0).stdout
        assert "Cache sizes" in listed and "Loop order" in listed, "the fan-out is on disk, whole"
        deep_research("check", folder, code=0)
        model.release()  # what the killed run held is gone; the model now answers every researcher in full
        answer(model)
        again = deep_research("run", folder, "--base-url", model.base_url, "--parallel", "2", code=0)
    finally:
        model.stop()
    assert "The research is finished." in again.stdout
    deep_research("check", folder, code=0)
    assert [r["outcome"] for r in rounds(folder)] == ["executed"] * 5, "the killed rounds left no record"


def test_on_a_terminal_the_answer_is_printed_when_the_research_finishes(folder: Path, model: ScriptedModel) -> None:
    import pexpect

    model.add(*[Say(text) for text in WHOLE_RESEARCH])
    child = pexpect.spawn(sys.executable, ["-m", "deep_research", "run", str(folder), "--base-url", model.base_url],
                          env=env(TERM="xterm"), encoding="utf-8", timeout=60, dimensions=(50, 200))
    child.expect("The research is finished.")
    child.expect(f"The whole research as one report: deep-research compile {folder} -o report.pdf")
    child.expect("The answer: the report of “Tiled matrix multiplication for teaching”")
    child.expect("Summarized problem definition: the clearest tiling for teaching.")
    child.expect("Conclusion: teach the 16x16 tiled loop nest.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_on_a_terminal_a_lone_esc_stops_the_run_as_ctrl_c_does(folder: Path, model: ScriptedModel) -> None:
    """Esc alone stops it; an arrow key (Esc [ A, the start of an escape sequence) does not."""
    import pexpect

    model.add(Say(DEFINE), Hold("I add criteria.\n///add_criteria Names a tile size\n"),
              Say("///add_criteria Has a sketch\n"), Hold("///add_criteria Never\n"))
    child = pexpect.spawn(sys.executable, ["-m", "deep_research", "run", str(folder), "--base-url", model.base_url],
                          env=env(TERM="xterm"), encoding="utf-8", timeout=60, dimensions=(50, 200))
    model.wait_for(lambda m: m.holding == 1)  # round 2 streams
    child.send("\x1b[A")  # an arrow key: not a lone Esc
    model.release()
    model.wait_for(lambda m: m.holding == 0)
    model.hold_again()
    model.wait_for(lambda m: m.holding == 1)  # round 4 streams: the arrow stopped nothing
    child.send("\x1b")
    child.expect("stopped \\(interrupted\\); nothing was half-applied")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert [r["outcome"] for r in rounds(folder)] == ["executed", "executed", "executed", "cancelled"]
    criteria = Research.open(folder).focus().criteria
    assert [c.text for c in criteria] == ["Names a tile size", "Has a sketch"]


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_every_researcher_cleanly_and_keeps_their_drafts(folder: Path) -> None:
    model = held_fan_out("Half a thought about caches", "Half a thought about loops")
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "deep_research", "run", str(folder), "--base-url", model.base_url, "--parallel", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), stdin=subprocess.DEVNULL,
        )
        try:
            model.wait_for(lambda m: m.holding == 2)  # both delegated researchers are writing
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
        model.wait_for(lambda m: m.disconnects == 2)
    finally:
        model.stop()
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in out + err and "nothing was half-applied" in err
    cache, loops = (folder / "Subproblems" / t / "message.dr" for t in ("Cache sizes", "Loop order"))
    # A researcher's partial reply is kept if the client had received some of it when Ctrl-C came
    # (the model streams a half thought, then holds; that text may still be in flight, and on a
    # loaded machine none of it may have arrived: a suite run saw that). Each kept draft is named,
    # and only then are drafts spoken of. That the received text is kept is tested without the
    # race in tests/autopilot/test_loop.py (test_cancelling_keeps_the_partial_reply_…).
    drafts = [d for d in (cache, loops) if d.read_text(encoding="utf-8").strip()]
    assert all(str(d) in err for d in drafts) and ("The partial replies are in " in err) == bool(drafts), err
    assert "Half a thought about caches".startswith(cache.read_text(encoding="utf-8"))  # what had arrived of it
    assert "Half a thought about loops".startswith(loops.read_text(encoding="utf-8"))
    assert sorted(r["researcher"] for r in rounds(folder) if r["outcome"] == "cancelled") == ["Cache sizes", "Loop order"]
    deep_research("check", folder, code=0)


def test_the_delegator_reads_its_researchers_reports_within_its_session(folder: Path) -> None:
    """Issue 33: four researchers report and end; main writes the root report only once all
    four findings are in what the model was sent (the scripted model acts on nothing else)."""
    from tests.parallel_script import PARTS, finding, script_reading

    with ScriptedModel(route=by_problem) as model:
        script_reading(model)
        result = deep_research("run", folder, "--base-url", model.base_url, "--parallel", "4", "--max-breadth", "4")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The research is finished." in result.stdout
    root = [body for body in model.requests if by_problem(body) == ROOT_TITLE]
    assert len(root) == 2, "plan and delegate, then the report at once: no round without the reports"
    report = deep_research("report", folder, code=0).stdout
    assert all(finding(part) in report for part in PARTS)


def test_a_reply_holding_a_nul_is_a_round_that_ran_nothing_and_the_run_goes_on(folder: Path,
                                                                               model: ScriptedModel) -> None:
    model.add(Say("I will define it.\x00\n" + DEFINE), Say(DEFINE))
    result = deep_research("run", folder, "--base-url", model.base_url, "--max-rounds", "2", code=4)
    lines = [line for line in result.stdout.splitlines() if line.startswith("round ")]
    assert lines[0].startswith("round 1 (main): not-text;") and lines[1].startswith("round 2 (main): executed;")
    assert "internal error" not in result.stdout + result.stderr
    assert [r["outcome"] for r in rounds(folder)] == ["not-text", "executed"]
    assert "NUL" in rounds(folder)[0]["error"]
    assert (folder / "message.dr").read_text(encoding="utf-8") == "", "never written to the document"
    assert Research.open(folder).tree.problem(()).title == "Tiled matrix multiplication for teaching"
