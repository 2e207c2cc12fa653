"""Regenerate the op tables in spec/ops.md from the registry: `python spec/gen_ops.py`.

Each row comes from one registry entry: name, operands, attributes (kind = default),
type rule (the first docstring line of the op's `infer`), VJP (yes/no) and `doc`.
Only the text between the BEGIN/END markers of each category is rewritten; the
prose around it is hand-written.  tests/ir/test_ops.py checks every op has a row
and that the tables equal what this script writes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ir.ops.registry import CATEGORIES, all_ops  # noqa: E402
from ir.printer import format_attr  # noqa: E402

# Infer functions without a docstring (composite and fused ops, owned elsewhere).
FALLBACK_RULES = {
    "softmax": "x's type (floating)",
    "log_softmax": "x's type (floating)",
    "layer_norm": "x's type (floating); weight and bias have the normalized shape",
    "rms_norm": "x's type (floating); weight has the normalized shape",
    "batch_norm": "x's type (floating, rank >= 2); statistics have shape [C]",
    "fused": "the body's output types",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _attrs(op) -> str:
    parts = []
    for name, spec in op.attrs.items():
        if spec.required:
            parts.append(f"{name}: {spec.kind}")
        else:
            parts.append(f"{name}: {spec.kind} = {format_attr(spec.default, spec.kind)}")
    return ", ".join(parts) or "-"


def _rule(op) -> str:
    doc = (op.infer.__doc__ or "").strip().splitlines()
    if doc:
        return doc[0]
    if op.name in FALLBACK_RULES:
        return FALLBACK_RULES[op.name]
    raise ValueError(f"op {op.name!r}: its infer has no docstring (its first line is the"
                     " type rule in spec/ops.md)")


def table(category: str) -> str:
    rows = ["| op | operands | attributes | type rule | vjp | semantics |",
            "|---|---|---|---|---|---|"]
    for op in all_ops():
        if op.category != category:
            continue
        operands = f"{op.operands[0]}..." if op.variadic else ", ".join(op.operands) or "-"
        rows.append(f"| `{op.name}` | {operands} | {_cell(_attrs(op))} | {_cell(_rule(op))}"
                    f" | {'yes' if op.vjp else '-'} | {_cell(op.doc)} |")
    return "\n".join(rows)


def render(text: str) -> str:
    """`text` (spec/ops.md) with every category's table regenerated."""
    for category in CATEGORIES:
        begin, end = f"<!-- BEGIN {category} -->", f"<!-- END {category} -->"
        pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise ValueError(f"spec/ops.md has no {begin} ... {end} markers")
        text = pattern.sub(lambda _: f"{begin}\n{table(category)}\n{end}", text)
    return text


def main() -> None:
    path = ROOT / "spec" / "ops.md"
    path.write_text(render(path.read_text()))


if __name__ == "__main__":
    main()
