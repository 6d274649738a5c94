"""The import graph of sigconv/ and apps/, drawn with ast, follows the layer map in sigconv/_layers.py: no
module imports a layer above its own, the command line and the TUI use public names only, and there is no
import cycle (imports inside functions count: a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT
from sigconv._layers import LAYERS, UI_MAY_IMPORT

RANK = {name: i for i, (name, _) in enumerate(LAYERS)}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict:
    files = sorted((ROOT / "sigconv").rglob("*.py")) + sorted((ROOT / "apps").rglob("*.py"))
    return {_module_name(p): p for p in files}


MODULES = _modules()


def layer_of(module: str) -> str:
    best, layer = -1, None
    for name, prefixes in LAYERS:
        for pre in prefixes:
            if (module == pre or module.startswith(pre + ".")) and len(pre) > best:
                best, layer = len(pre), name
    assert layer is not None, f"{module} is in no layer of sigconv/_layers.py"
    return layer


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str) -> list[tuple[str, int]]:
    """(imported sigconv/apps module, line) for every import statement of ``module``, wherever it stands."""
    path = MODULES[module]
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_pkg, node)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:  # "sigconv.engine.file.filter_file" -> its module
                t = t.rpartition(".")[0]
            if t and (t, node.lineno) not in out:
                out.append((t, node.lineno))
    return out


GRAPH = {m: imports_of(m) for m in MODULES}


def test_every_module_is_in_a_layer():
    for m in MODULES:
        layer_of(m)


def test_no_module_imports_a_layer_above_its_own():
    bad = [f"{m}:{line} ({layer_of(m)}) imports {t} ({layer_of(t)})"
           for m, edges in GRAPH.items() for t, line in edges if RANK[layer_of(t)] < RANK[layer_of(m)]]
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_ui_uses_public_names_only():
    bad = [f"{m}:{line} imports {t}" for m, edges in GRAPH.items() if layer_of(m) == "ui"
           for t, line in edges if layer_of(t) != "ui" and t not in UI_MAY_IMPORT]
    assert not bad, "the command line and the TUI reach below the public API:\n" + "\n".join(bad)


def _cycles(graph: dict) -> list[list[str]]:
    """Strongly connected components with more than one module, or a module importing itself (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
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
            if len(comp) > 1 or v in graph[v]:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    # a package importing its own submodules is how packages re-export, not a cycle through the package
    graph = {m: {t for t, _ in edges if not t.startswith(m + ".")} for m, edges in GRAPH.items()}
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("planted, expect", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
    ({"a": {"a"}}, [["a"]]),
])
def test_cycle_finder_finds_planted_cycles(planted, expect):
    assert _cycles(planted) == expect


def test_layer_checks_catch_a_planted_upward_import():
    assert RANK[layer_of("sigconv.cli.denoise")] < RANK[layer_of("sigconv.engine.file")] \
        < RANK[layer_of("sigconv.registry.table")] < RANK[layer_of("sigconv._core.errors")]
    assert layer_of("sigconv") == "api" and layer_of("apps.app") == "ui"
