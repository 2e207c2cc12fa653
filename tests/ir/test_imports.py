"""ir/'s modules import in one direction: no circle, each module importable alone.

The import graph counts every import, function-level ones too (a lazy import hides a
circle, it does not remove it).  `from pkg import sub` is an edge to the submodule.
One edge up is allowed, named below with its reason.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (importer, imported): Graph.__str__ prints with the printer, which reads graphs.
ALLOWED_UP = {("ir.graph", "ir.printer")}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in sorted((ROOT / "ir").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{a.name}" for a in node.names} & set(mods)
                out.update(subs or {node.module})
        edges[name] = {m for m in out if m in mods and m != name
                       and (name, m) not in ALLOWED_UP}
    return edges


def _cycle(edges: dict[str, set[str]]):
    """One import circle as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(edges[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(edges):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_ir_import_graph_has_no_circle():
    circle = _cycle(import_graph())
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_the_checker_sees_a_lazy_circle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(edges) == ["a", "b", "c", "a"]


def test_each_ir_module_imports_alone():
    """Each module, imported first into an interpreter with no ir module loaded."""
    names = sorted(_modules())
    script = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    for loaded in [m for m in sys.modules if m == 'ir' or m.startswith('ir.')]:\n"
        "        del sys.modules[loaded]\n"
        "    importlib.import_module(name)\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
