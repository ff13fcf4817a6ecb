"""The package's structure: no module uses another's private (`_name`) names, and no
modules import each other in a circle, counting imports inside functions too (they run
sooner or later) but not those under `if TYPE_CHECKING:` (they never run). The storeys
import downwards only (engine < sources < autopilot < app < the front ends), and so do the
engine's own storeys (core < store < retrieval < settings < tree < execution < language <
views < the facade). The front ends import of the engine only the modules its `API` names;
the libraries beside them what they are listed to. In the LSP layer, what the features share
lives in modules of its own (`arguments`, `executing`, `progress`, `show`) and in the server;
no feature imports another, only `wiring.py` does. The front ends (the command line, the
terminal mock, `run`'s console, the language server, the MCP server) set up, execute and
run through the use cases (`app/`), never through the engine's parts for them."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import deep_research

PACKAGE = Path(deep_research.__file__).parent
LAYER = "deep_research"  # every module of the package


@cache
def _parse(source: str, label: str) -> ast.Module:
    return ast.parse(source, label)


@cache
def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package by dotted name, with whether it is a package's __init__."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                skipped.update(id(n) for n in ast.walk(statement))
    return skipped


def _imports(name: str, source: str, is_package: bool, modules: dict, label: str) -> tuple[set[str], list[str]]:
    """The package's modules `name` imports at run time, and the private names it takes from others."""
    tree = _parse(source, label)
    skipped = _type_checking_only(tree)
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    private = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            origin = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            if not origin.startswith("deep_research"):
                continue
            for alias in node.names:
                if f"{origin}.{alias.name}" in modules:  # a submodule: `from .features import execution`
                    targets.add(f"{origin}.{alias.name}")
                    continue
                targets.add(origin)
                if alias.name.startswith("_") and not alias.name.startswith("__") and origin != name:
                    private.append(f"{label}:{node.lineno} takes {origin}.{alias.name}")
    return {t for t in targets if t in modules and t != name}, private


@cache
def _graph() -> tuple[dict[str, set[str]], list[str]]:
    modules = _modules()
    edges, private = {}, []
    for name, (path, is_package) in modules.items():
        if name.startswith(LAYER):
            label = str(path.relative_to(PACKAGE.parent))
            targets, taken = _imports(name, path.read_text(encoding="utf-8"), is_package, modules, label)
            edges[name] = {t for t in targets if t.startswith(LAYER)}
            private += taken
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_module_takes_another_modules_private_names() -> None:
    edges, private = _graph()
    assert len(edges) >= 80, "every module of the package was read"
    assert "deep_research.engine.undo" in edges and "deep_research.mcp_server.server" in edges
    assert private == []


def test_the_package_imports_in_no_circle() -> None:
    edges, _ = _graph()
    assert "deep_research.lsp.features.execution" in edges["deep_research.lsp.wiring"]
    assert _cycles(edges) == []


def test_the_checks_see_a_circle_and_a_private_name() -> None:
    """The checker itself: a made-up circle is found, and a private name taken inside a function."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    modules = {"deep_research.x": None, "deep_research.y": None}
    source = "if TYPE_CHECKING:\n    from .z import Z\ndef f():\n    from .y import _hidden, shown\n"
    assert _imports("deep_research.x", source, False, modules, "x.py") == (
        {"deep_research.y"}, ["x.py:4 takes deep_research.y._hidden"])


# The front ends: each only converts to and from its own forms (ARCHITECTURE.md).
FRONT_ENDS = ("deep_research.cli", "deep_research.repl", "deep_research.console", "deep_research.lsp",
              "deep_research.mcp_server")
# What a use case does, by (module, name): a front end asks `app/` instead ("*": the whole module).
USE_CASE_PARTS = {
    ("deep_research.sources.gather", "*"): "app.execute",
    ("deep_research.sources.inputs", "prepare"): "app.setup",
    ("deep_research.sources.inputs", "prepare_sync"): "app.setup",
    ("deep_research.autopilot.client", "ModelClient"): "app.run",
    ("deep_research.autopilot.loop", "Settings"): "app.run",
    ("deep_research.engine.settings.table", "load"): "app.run (a run's settings)",
    ("deep_research.sources.embeddings", "*"): "app.embed",
}
USE_CASE_CALLS = {"create": "app.setup (Research.create)", "continue_with": "app.setup", "dry_run": "app.execute",
                  "from_config": "app.run (a run's settings)"}
OWNED = {"create": "Research", "from_config": "Settings"}  # only on these
API_KEY = "OPENAI_API_KEY"  # read by app/run.py alone


def _front_end(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FRONT_ENDS)


def _use_case_parts_taken(name: str, source: str, is_package: bool, label: str) -> list[str]:
    """Where the module `name` imports or calls what a use case does (see USE_CASE_PARTS/CALLS)."""
    tree = _parse(source, label)
    skipped = _type_checking_only(tree)
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            origin = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            for alias in node.names:
                for key in ((origin, "*"), (origin, alias.name), (f"{origin}.{alias.name}", "*")):
                    if key in USE_CASE_PARTS:
                        found.append(f"{label}:{node.lineno} takes {key[0]}.{alias.name}: use {USE_CASE_PARTS[key]}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.name, "*") in USE_CASE_PARTS:
                    found.append(f"{label}:{node.lineno} imports {alias.name}: use {USE_CASE_PARTS[(alias.name, '*')]}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            call, owner = node.func.attr, ast.unparse(node.func.value)
            if call in USE_CASE_CALLS and (call not in OWNED or owner == OWNED[call]):
                found.append(f"{label}:{node.lineno} calls {owner}.{call}: use {USE_CASE_CALLS[call]}")
            elif call == "execute" and "research" in owner.lower():
                found.append(f"{label}:{node.lineno} calls {owner}.execute: use app.execute")
            elif any(isinstance(a, ast.Constant) and a.value == API_KEY for a in node.args):
                found.append(f"{label}:{node.lineno} reads {API_KEY}: only app.run does")
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == API_KEY:
            found.append(f"{label}:{node.lineno} reads {API_KEY}: only app.run does")
    return found


def test_the_front_ends_go_through_the_use_cases() -> None:
    taken = []
    for name, (path, is_package) in _modules().items():
        if _front_end(name):
            label = str(path.relative_to(PACKAGE.parent))
            taken += _use_case_parts_taken(name, path.read_text(encoding="utf-8"), is_package, label)
    assert taken == []


def test_the_use_case_check_sees_a_front_end_doing_a_use_case_itself() -> None:
    source = ("from ..sources.gather import gather_and_execute\nfrom ..sources.inputs import Inputs, prepare\n"
              "def f(research):\n    Research.create(x)\n    research.execute(t)\n    ls.research(r).continue_with(i)\n"
              "    ModelClient(u, m, os.environ.get('OPENAI_API_KEY'))\n    os.environ['OPENAI_API_KEY']\n"
              "    from ..autopilot.client import ModelClient\n")
    found = _use_case_parts_taken("deep_research.lsp.x", source, False, "x.py")
    assert sorted(line.split(" ", 1)[0] for line in found) == [
        "x.py:1", "x.py:2", "x.py:4", "x.py:5", "x.py:6", "x.py:7", "x.py:8", "x.py:9"]


# The storeys, lowest first: a module may import its own storey's and those below, never above.
STOREYS = (("deep_research.engine",), ("deep_research.sources", "deep_research.dossier", "deep_research.compiled"),
           ("deep_research.autopilot",), ("deep_research.app",))
# Below every storey: the package's own facts, its version and what it runs on (`versions`),
# which import nothing else of it.
BASE = ("deep_research", "deep_research.versions")


def _storey(name: str) -> int | None:
    for level, prefixes in enumerate(STOREYS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return level
    return None


def test_no_arrow_runs_back_up() -> None:
    """The engine imports nothing outside it; the outside world (`sources`) and the readers for
    people (`dossier`, `compiled`) only the engine; the autopilot (a library) not the use cases;
    the use cases no front end."""
    edges, _ = _graph()
    assert all(not (targets - {"deep_research"}) for name, targets in edges.items() if name in BASE)
    upward = []
    for name, targets in edges.items():
        level = _storey(name)
        if level is None:
            continue
        for target in targets:
            above = _storey(target)
            if above is None and target not in BASE or above is not None and above > level:
                upward.append(f"{name} imports {target}")
    assert upward == []


def test_the_features_import_no_feature_and_only_wiring_imports_them() -> None:
    """What features share lives in modules of the LSP layer (`arguments`, `executing`,
    `progress`, `show`, the server's methods), so each feature can be read alone."""
    edges, _ = _graph()

    def feature(name: str) -> str | None:  # a big feature is a package (features/autopilot/): its modules are one
        return name.split(".")[3] if name.startswith("deep_research.lsp.features.") else None

    features = {feature(name) for name in edges} - {None}
    assert len(features) >= 10
    importers = sorted(name for name, targets in edges.items()
                       if any(feature(t) is not None and feature(t) != feature(name) for t in targets))
    assert importers == ["deep_research.lsp.wiring"]


def _name_switches(source: str, label: str, names: set[str]) -> list[str]:
    """Where `source` compares with, or looks up, a command's name written out."""
    found = []
    for node in ast.walk(_parse(source, label)):
        if isinstance(node, ast.Compare) and "name" in ast.unparse(node).replace("names", ""):  # `spec.name == …`
            values = [node.left, *node.comparators]
        elif isinstance(node, ast.Subscript) and "COMMANDS" in ast.unparse(node.value):  # `COMMANDS["…"]`
            values = [node.slice]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add":
            values = list(node.args[:1])  # a set of names made by hand
        else:
            continue
        for value in values:
            for constant in ast.walk(value):
                if isinstance(constant, ast.Constant) and constant.value in names:
                    found.append(f"{label}:{node.lineno} switches on {constant.value!r}")
    return found


def test_what_differs_per_command_is_declared_on_its_row() -> None:
    """The command table is the only list of commands: no module but the table itself compares
    with a command's name or looks one up; the grammar, the prompt, the budgets and completion
    read the facts its rows declare (what a command grows, how it finishes a problem …)."""
    from deep_research.engine.language.commands import COMMANDS

    names = set(COMMANDS)
    found = []
    for name, (path, _) in _modules().items():
        if name != "deep_research.engine.language.commands":
            found += _name_switches(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE.parent)), names)
    assert found == []
    assert _name_switches('if spec.name == "write_report": pass\nx = COMMANDS["focus_up"]\nout.add("search")\n',
                          "x.py", names) == ["x.py:1 switches on 'write_report'", "x.py:2 switches on 'focus_up'",
                                             "x.py:3 switches on 'search'"]


# The engine's storeys, lowest first (deep_research/engine/__init__.py): a module imports its own
# storey's and those below it, never one above. The facade is the package's own modules.
ENGINE = "deep_research.engine"
ENGINE_STOREYS = ("core", "store", "retrieval", "settings", "tree", "execution", "language", "views", "")
# What a storey may import besides its own and, where it is named here, nothing more.
ONLY = {"retrieval": {"store"}, "store": set(), "core": set()}


def _engine_storey(name: str) -> str:
    """The storey of an engine module ("" for the facade: the package's own modules)."""
    rest = name[len(ENGINE) + 1:] if name != ENGINE else ""
    first = rest.split(".")[0]
    return first if "." in rest or first in ENGINE_STOREYS[:-1] else ""


def _engine_arrows(edges: dict[str, set[str]]) -> tuple[list[str], list[str]]:
    """Arrows that run back up the storeys, and those a storey with a short list may not take."""
    up, outside = [], []
    for name, targets in sorted(edges.items()):
        if not name.startswith(ENGINE + ".") and name != ENGINE:
            continue
        storey = _engine_storey(name)
        for target in sorted(t for t in targets if t.startswith(ENGINE)):
            other = _engine_storey(target)
            if ENGINE_STOREYS.index(other) > ENGINE_STOREYS.index(storey):
                up.append(f"{name} ({storey or 'facade'}) imports {target} ({other or 'facade'})")
            elif storey in ONLY and other != storey and other not in ONLY[storey]:
                outside.append(f"{name} imports {target}")
    return up, outside


def test_the_engines_storeys_import_downwards_only() -> None:
    """core < store < retrieval < settings < tree < execution < language < views < the facade;
    retrieval imports only the store, the store and core nothing of the rest."""
    edges, _ = _graph()
    storeys = {_engine_storey(n) for n in edges if n.startswith(ENGINE)}
    assert storeys == set(ENGINE_STOREYS), "every storey has modules, and every module a storey"
    assert _engine_arrows(edges) == ([], [])


def test_the_storey_check_sees_an_arrow_up() -> None:
    edges = {f"{ENGINE}.core.text": {f"{ENGINE}.views.prompt"}, f"{ENGINE}.retrieval.index": {f"{ENGINE}.core.text"},
             f"{ENGINE}.research": {f"{ENGINE}.views.prompt"}}
    assert _engine_arrows(edges) == ([f"{ENGINE}.core.text (core) imports {ENGINE}.views.prompt (views)"],
                                     [f"{ENGINE}.retrieval.index imports {ENGINE}.core.text"])


def _engine_modules_taken(name: str, path: Path, is_package: bool) -> list[tuple[int, str]]:
    """The engine modules `name` imports at run time (not for types only), each relative to the
    engine ("" the package itself)."""
    modules = _modules()
    package = name if is_package else name.rpartition(".")[0]
    found = []
    tree = _parse(path.read_text(encoding="utf-8"), str(path))
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or id(node) in skipped:
            continue
        base = package
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        origin = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
        if origin != ENGINE and not origin.startswith(ENGINE + "."):
            continue
        for alias in node.names:
            module = f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else origin
            found.append((node.lineno, module[len(ENGINE) + 1:]))
    return found


def _outside_list(prefixes: tuple[str, ...], allowed: set[str]) -> list[str]:
    taken = []
    for name, (path, is_package) in _modules().items():
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            taken += [f"{name}:{line} engine.{module}" for line, module in _engine_modules_taken(name, path, is_package)
                      if module not in allowed]
    return taken


def test_the_front_ends_use_the_engines_api() -> None:
    """The front ends import of the engine only the modules `deep_research.engine.API` names."""
    from deep_research.engine import API

    assert _outside_list(FRONT_ENDS + ("deep_research.demo", "deep_research.printouts", "deep_research.keys"),
                         set(API)) == []


# What the libraries beside the front ends use of the engine besides its API.
LIBRARIES = {
    "deep_research.app": {"retrieval.vectors", "execution.evidence"},  # `embed`'s store; the evidence a message runs with
    "deep_research.sources": {"execution.evidence", "execution.protocol", "execution.reading", "retrieval.vectors",
                              "tree.model",  # the evidence commands' values: what a message needs, what it got
                              "retrieval.structure"},  # a web page's glued code fences, read as markdown files' are
    "deep_research.dossier": {"tree.formats", "tree.model", "tree.staleness", "settings.rules"},  # the tree, read
    "deep_research.compiled": {"tree.model", "tree.quotes", "tree.report", "tree.staleness", "tree.walk",
                               "settings.rules"},  # the tree read whole, its quotes checked, for the report
}


def test_the_libraries_use_the_engine_as_listed() -> None:
    from deep_research.engine import API

    for library, more in LIBRARIES.items():
        assert _outside_list((library,), set(API) | more) == [], library


# What the autopilot (a library) uses of the engine, as ARCHITECTURE.md says: the research through
# `Research` and plain values, and what the grammar is made from. Never what changes a research
# itself (operations, drafts, files' formats, the transaction, the lock): that is `Research`'s.
AUTOPILOT_ENGINE = {"research", "language.approval", "core.state", "core.text", "settings.table", "settings.rules",
                    "language.budgets", "language.commands", "language.parser", "language.incremental",
                    "language.analysis", "views.prompt", "tree.staleness", "execution.evidence", "store",
                    "tree.citations", "retrieval.parts",  # a citation's key and an attachment's parts: NAME#N
                    "execution.reading",  # what a message's reads and finds leave to the rest of it
                    "views.source_view"}  # the prompt's sample words for `find`
AUTOPILOT_STORE = {"Guard", "atomic_write", "bookkeeping", "is_own_entry"}  # its document read and drafted;
# the layout's names (what is the research's own, never attached)


def test_the_autopilot_uses_the_engine_as_architecture_says() -> None:
    taken = _outside_list(("deep_research.autopilot",), AUTOPILOT_ENGINE)
    for name, (path, _) in _modules().items():
        if not name.startswith("deep_research.autopilot"):
            continue
        for node in ast.walk(_parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("engine.store"):
                taken += [f"{name}:{node.lineno} store.{a.name}" for a in node.names
                          if a.name not in AUTOPILOT_STORE and not a.name.isupper()]
    assert taken == []


def test_the_store_is_a_package_of_parts_each_on_those_before_it() -> None:
    """paths < guard < cache < transaction: each part imports only those before it, and nothing
    in the package imports the rest of the engine (the inotify watch imports none of it)."""
    order = ["paths", "guard", "cache", "transaction"]
    edges, _ = _graph()
    store = f"{ENGINE}.store"
    assert not {t for t in edges[f"{store}.watch"] if t.startswith(ENGINE)}
    for index, part in enumerate(order):
        allowed = {f"{store}.{p}" for p in order[:index]} | {f"{store}.watch"}
        assert edges[f"{store}.{part}"] <= allowed, (part, edges[f"{store}.{part}"] - allowed)
    assert set(order) | {"watch"} == {n.rsplit(".", 1)[1] for n in edges if n.startswith(store + ".")}
