"""Tables in spec/ that mirror a declaration are generated from it, and checked here.

Each test renders the declaration's table and compares it with the one in spec/; on a
difference the assertion message is the table to paste.  (The guard kinds' table is
checked by tests/frontend/test_guard_kinds.py, the op table by spec/gen_ops.py's test.)
"""

from pathlib import Path

from refcomp.reasons import REASONS

SPEC = Path(__file__).resolve().parent.parent / "spec"


def _table_after(path, header):
    """The markdown table of spec/`path` that starts with the line `header`."""
    lines = (SPEC / path).read_text().splitlines()
    start = lines.index(header)
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return "\n".join(table)


def reason_table():
    rows = ["| id | title | what it means |", "|---|---|---|"]
    rows += [f"| {r.id} | {r.title} | {r.explanation} |" for r in REASONS.values()]
    return "\n".join(rows)


def test_reason_table_is_the_registry():
    expected = reason_table()
    assert _table_after("tracer.md", "| id | title | what it means |") == expected, expected
