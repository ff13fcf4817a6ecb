"""The package's structure: no module uses another's private (`_name`) names, and no
modules import each other in a circle, counting imports inside functions too (they run
sooner or later) but not those under `if TYPE_CHECKING:` (they never run). In the LSP
layer, what the features share lives in modules of its own (`arguments`, `progress`,
`show`); only `wiring.py` imports every feature. The front ends (the command line, the
terminal mock, `run`'s console, the language server, the MCP server) set up, execute and
run through the use cases (`app/`), never through the engine's parts for them."""

from __future__ import annotations

import ast
from pathlib import Path

import deep_research

PACKAGE = Path(deep_research.__file__).parent
LAYER = "deep_research"  # every module of the package


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
    tree = ast.parse(source, label)
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
FRONT_ENDS = ("deep_research.cli", "deep_research.repl", "deep_research.autopilot.console", "deep_research.lsp",
              "deep_research.mcp_server")
# What a use case does, by (module, name): a front end asks `app/` instead ("*": the whole module).
USE_CASE_PARTS = {
    ("deep_research.sources.gather", "*"): "app.execute",
    ("deep_research.sources.inputs", "prepare"): "app.setup",
    ("deep_research.sources.inputs", "prepare_sync"): "app.setup",
}
USE_CASE_CALLS = {"create": "app.setup (Research.create)", "continue_with": "app.setup", "dry_run": "app.execute"}


def _front_end(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FRONT_ENDS)


def _use_case_parts_taken(name: str, source: str, is_package: bool, label: str) -> list[str]:
    """Where the module `name` imports or calls what a use case does (see USE_CASE_PARTS/CALLS)."""
    tree = ast.parse(source, label)
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
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
            if call in USE_CASE_CALLS and (call != "create" or owner == "Research"):
                found.append(f"{label}:{node.lineno} calls {owner}.{call}: use {USE_CASE_CALLS[call]}")
            elif call == "execute" and "research" in owner.lower():
                found.append(f"{label}:{node.lineno} calls {owner}.execute: use app.execute")
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
              "def f(research):\n    Research.create(x)\n    research.execute(t)\n    ls.research(r).continue_with(i)\n")
    found = _use_case_parts_taken("deep_research.lsp.x", source, False, "x.py")
    assert [line.split(" ", 1)[0] for line in found] == ["x.py:1", "x.py:2", "x.py:4", "x.py:5", "x.py:6"]
