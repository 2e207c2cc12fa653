"""Layering is checked, not hoped for (spec/architecture.md, "Packages").

ir/ imports neither refcomp/ nor codegen/; codegen/ does not import refcomp/.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"ir": {"refcomp", "codegen"}, "codegen": {"refcomp"}}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_higher_layers(package):
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_packages(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "layering violated:\n" + "\n".join(offenders)


def test_ir_does_not_import_torch():
    # The IR and its passes run without PyTorch (the oracle is numpy).
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "ir").rglob("*.py"))
                 if "torch" in imported_packages(p)]
    assert not offenders, f"ir/ must not import torch: {offenders}"


def test_the_checker_sees_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from refcomp.api import compile\nimport codegen.kernel\n")
    assert imported_packages(bad) >= {"refcomp", "codegen"}


# --- inside refcomp/tracer/ -------------------------------------------------------------------
TRACER = ROOT / "refcomp" / "tracer"
# The top of the tracer and who may import it: the modules below call back through the
# translator (`tx.call_function`, `tx.load_attr`, `tx.child`) instead.
TOP_OF_TRACER = {"frame": set(), "opcodes": {"frame"}, "dispatch": {"frame"}}


def tracer_imports(path: Path) -> set[str]:
    """The refcomp/tracer modules `path` imports, at its top or inside a function."""
    modules = {p.stem for p in TRACER.glob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "refcomp.tracer":
                found.update(a.name for a in node.names if a.name in modules)
            elif node.module.startswith("refcomp.tracer."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names
                         if a.name.startswith("refcomp.tracer."))
    return found - {path.stem}


def import_circles(graph: dict) -> list[set]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_tracer_has_no_import_circle_of_more_than_two_modules():
    graph = {p.stem: tracer_imports(p) for p in TRACER.glob("*.py")}
    big = [sorted(c) for c in import_circles(graph) if len(c) > 2]
    assert not big, f"import circles in refcomp/tracer/: {big}"


def test_tracer_modules_do_not_import_the_top_of_the_tracer():
    offenders = [f"{p.stem} imports {top}" for p in sorted(TRACER.glob("*.py"))
                 for top in tracer_imports(p) & set(TOP_OF_TRACER)
                 if p.stem not in TOP_OF_TRACER[top]]
    assert not offenders, "upward imports in refcomp/tracer/:\n" + "\n".join(offenders)


def test_the_circle_checker_sees_a_circle():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
