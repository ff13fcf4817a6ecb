"""The package's structure: no module uses another's private (`_name`) names, and no
modules import each other in a circle, counting imports inside functions too (they run
sooner or later) but not those under `if TYPE_CHECKING:` (they never run). In the LSP
layer, what the features share lives in modules of its own (`arguments`, `progress`,
`show`); only `wiring.py` imports every feature."""

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
