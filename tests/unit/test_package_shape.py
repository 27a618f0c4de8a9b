"""The package's shape: no import cycles (imports inside functions count), leaf modules stay leaves,
the observer knows nothing of ipyparallel, one table per concept."""

from __future__ import annotations

import ast
from pathlib import Path

import nccl_workbook

PKG = Path(nccl_workbook.__file__).parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Package modules that ``path`` imports at run time (module level or inside functions; not
    under ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            for child in ast.iter_child_nodes(node):
                visit(child)
            return
        for n in names:
            # the longest package module the name refers to
            while n and n not in modules:
                n = n.rpartition(".")[0]
            if n and n != me:
                out.add(n)

    visit(tree)
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    modules = set(files)
    return {m: _imports(p, modules) for m, p in files.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            # a package and its own submodules (``scenarios`` loads ``scenarios.x``, which
            # imports ``scenarios.base``) are not a cycle between parts of the design
            if len(comp) > 1 and not all(c.startswith(min(comp, key=len)) for c in comp):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycles() -> None:
    graph = _graph()
    assert "nccl_workbook.cluster" in graph and graph["nccl_workbook.cluster"]  # the walk sees imports
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_leaf_modules_import_nothing_of_the_package() -> None:
    graph = _graph()
    for leaf in ("nccl_workbook.status", "nccl_workbook.ops"):
        assert graph[leaf] == set(), leaf


def test_observer_knows_nothing_of_ipyparallel() -> None:
    for mod in ("observer.py", "live.py", "trace.py", "status.py"):
        text = (PKG / mod).read_text(encoding="utf-8")
        assert "ipyparallel" not in text.replace("knows nothing of ipyparallel", ""), mod
    assert "nccl_workbook.cluster" not in _graph()["nccl_workbook.observer"]


def test_one_op_table() -> None:
    """Op names are spelled in nccl_workbook.ops only: no other module maps a torch function name
    to an op type."""
    for path in PKG.rglob("*.py"):
        if path.name == "ops.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert '"all_reduce": "ALLREDUCE"' not in text and "'all_reduce': 'ALLREDUCE'" not in text, path
