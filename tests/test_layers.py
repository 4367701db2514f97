"""The package's import graph: no cycle, and every import goes down the layers the package states.

Function-level imports count: a cycle hidden inside a function is still a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import lookalike

LIB = Path(lookalike.__file__).resolve().parent


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in the file), from the source with ast."""
    pkg = root.name
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # "from pkg.low import a" imports module pkg.low.a when there is one, else a name of pkg.low
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name and t.split(".")[0] == pkg and t != pkg:
                    deps.add(t)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        colour[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if colour.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in colour:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        colour[n] = 2
        return None

    for n in sorted(graph):
        if n not in colour:
            found = visit(n)
            if found:
                return found
    return None


def layer_of(module: str, layers) -> tuple[int, str]:
    top = module.split(".")[1] if "." in module else ""
    for i, names in enumerate(layers):
        if top in names:
            return i, top
    raise AssertionError(f"{module} is in no layer of lookalike.LAYERS")


def violations(graph: dict[str, set[str]], layers) -> list[str]:
    bad = []
    for mod, deps in sorted(graph.items()):
        if mod.count(".") == 0:
            continue
        i, top = layer_of(mod, layers)
        for d in sorted(deps):
            j, dtop = layer_of(d, layers)
            if j > i or (j == i and dtop != top):
                bad.append(f"{mod} imports {d} ({dtop} is not below {top})")
    return bad


def test_no_import_cycle_in_lookalike():
    assert find_cycle(import_graph(LIB)) is None


def test_every_import_goes_down_the_layers():
    assert violations(import_graph(LIB), lookalike.LAYERS) == []


def test_every_module_sits_in_a_layer():
    for mod in import_graph(LIB):
        if "." in mod:
            layer_of(mod, lookalike.LAYERS)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def test_a_cycle_hidden_in_a_function_is_found(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "def f():\n    from pkg.high import b\n    return b\n",
        "high/__init__.py": "",
        "high/b.py": "from pkg.low import a\n",
    })
    graph = import_graph(root)
    assert graph["pkg.high.b"] == {"pkg.low.a"}
    assert find_cycle(graph) == ["pkg.high.b", "pkg.low.a", "pkg.high.b"]
    assert violations(graph, (("low",), ("high",))) == ["pkg.low.a imports pkg.high.b (high is not below low)"]


def test_relative_imports_resolve(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "low/__init__.py": "from . import a\n", "low/a.py": "from .b import x\n",
                            "low/b.py": "x = 1\n"})
    graph = import_graph(root)
    assert graph["pkg.low"] == {"pkg.low.a"} and graph["pkg.low.a"] == {"pkg.low.b"}
    assert find_cycle(graph) is None
