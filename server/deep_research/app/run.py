"""The autopilot's run: the one place that builds one, for a front end to drive.

    run = build_run(research, overrides, approval=…, seed=…, approver=…, observer=…, …)
    result = await run.fleet.run()          # cancel its task to stop
    await run.client.close()

The settings are the research's `deep-research.toml` (through its file cache), the
environment's (`OPENAI_BASE_URL`), then the front end's `overrides` (the command line's
options, the editor's settings), by the settings table's keys; the run's `Settings` are
derived from them, the rules among them are the research's for the run
(`Research.rule_overrides`). The model client gets the API key from the environment
(`OPENAI_API_KEY`), here and nowhere else: it is never logged, shown or written. What
differs per front end is plugged into the fleet (`parts`: the documents, the executor, the
approver, the observer: `autopilot/fleet.py`); without an executor of its own, each round's
message runs through `app/execute.py` (`MessageExecutor`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from .. import versions
from ..autopilot.client import ModelClient
from ..autopilot.fleet import Fleet
from ..autopilot.loop import Observer, Settings
from ..engine.settings.table import Config, load, rule_values
from .execute import MessageExecutor

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.language.commands import ApprovalMode
    from ..engine.research import Research


MODEL_LIBRARIES = ("openai", "httpx")  # what a model call goes through


class CannotRun(Exception):
    """The autopilot cannot run here (a library outside its supported range): one sentence."""


@dataclass
class Run:
    """A run built: the fleet to drive (`fleet.run()`), its client (closed at the end), its
    settings, and what was wrong in the research's settings file (for the front end to say)."""

    fleet: Fleet
    client: ModelClient
    settings: Settings
    config: Config
    problems: tuple[str, ...] = ()


def build_run(
    research: Research, overrides: Mapping[str, Any] | None = None, *, approval: ApprovalMode | None = None,
    seed: int | None = None, environ: Mapping[str, str] | None = None, **parts: Any,
) -> Run:
    """A run of the autopilot over `research` (see the module's docstring); `approval` is the
    front end's approval mode if it has its own (the editor's setting), else the settings'.
    Raises CannotRun when the model's libraries are outside the ranges deep-research supports."""
    for library in versions.unfit(MODEL_LIBRARIES):
        raise CannotRun(library.sentence())
    env = os.environ if environ is None else environ
    given = dict(overrides or {})
    config, problems = load(research.root, dict(env), research.cache)
    config = config.merged(**given)
    research.rule_overrides = rule_values(given)  # the budgets given for this run
    settings = Settings.from_config(config, approval=approval, seed=seed)
    client = ModelClient(config.base_url, config.model, env.get("OPENAI_API_KEY") or None)
    observer = parts.setdefault("observer", Observer())
    parts.setdefault("executor", MessageExecutor(config, observer))
    return Run(Fleet(research, client, settings, config=config, **parts), client, settings, config, tuple(problems))
