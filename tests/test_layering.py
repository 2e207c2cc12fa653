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
