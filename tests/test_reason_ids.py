"""Reason ids are declared once, in refcomp/reasons.py, each bound to a named constant;
the code raises and compares the constants, never a literal "RBnnn" string (tests and
spec/ may still name ids as strings: they state the contract)."""

import ast
import re
from pathlib import Path

from refcomp import reasons

ROOT = Path(__file__).resolve().parent.parent
LITERAL_ID = re.compile(r"RB\d{3}")


def test_no_literal_reason_id_outside_reasons_py():
    offenders = []
    for package in ("refcomp", "codegen", "ir"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "refcomp" / "reasons.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and LITERAL_ID.fullmatch(node.value)):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not offenders, "use the named constant from refcomp.reasons:\n" + "\n".join(offenders)


def test_every_reason_has_exactly_one_named_constant():
    constants = {name: value for name, value in vars(reasons).items()
                 if name.isupper() and isinstance(value, str) and LITERAL_ID.fullmatch(value)}
    assert sorted(constants.values()) == sorted(reasons.REASONS)
