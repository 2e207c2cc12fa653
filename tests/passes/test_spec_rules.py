"""spec/passes.md lists simplify's rules: the table must equal the registry, in order."""

from __future__ import annotations

import re

from ir.passes.simplify import RULES
from tests.conftest import ROOT

ROW = re.compile(r"^\| `(\w+)` \| `(.*)` \|$")


def test_spec_rule_table_equals_the_rule_registry():
    text = (ROOT / "spec" / "passes.md").read_text()
    section = text.split("### Rules", 1)[1].split("\n## ", 1)[0]
    rows = [m.groups() for m in map(ROW.match, section.splitlines()) if m]
    assert rows == [(r.name, r.algebra) for r in RULES]


def test_every_rule_has_an_algebra_line():
    for r in RULES:
        assert "->" in r.algebra, f"simplify rule {r.name} needs an algebra docstring"
