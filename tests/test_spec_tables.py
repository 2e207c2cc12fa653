"""Tables in spec/ that mirror a declaration are generated from it, and checked here:
reason ids, passes, pipelines, stats() counters, callable kinds, opcodes.

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


def pass_table():
    import inspect

    from ir.passes.registry import all_passes

    rows = ["| pass | contract (the first paragraph of its docstring) |", "|---|---|"]
    # the passes of ir/passes/ (a test or a user may register more while the suite runs)
    for name, fn in sorted((n, f) for n, f in all_passes().items()
                           if f.__module__.startswith("ir.passes.")):
        contract = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
        assert contract, f"pass {name!r} has no docstring: its contract"
        rows.append(f"| `{name}` | {contract} |")
    return "\n".join(rows)


def test_pass_table_is_the_registry():
    expected = pass_table()
    header = "| pass | contract (the first paragraph of its docstring) |"
    assert _table_after("passes.md", header) == expected, expected


def counter_table():
    from refcomp.cache import COUNTER_MEANINGS

    rows = ["| counter | counts |", "|---|---|"]
    rows += [f"| `{name}` | {meaning} |" for name, meaning in COUNTER_MEANINGS.items()]
    return "\n".join(rows)


def test_counter_table_is_the_declaration():
    expected = counter_table()
    assert _table_after("runtime.md", "| counter | counts |") == expected, expected


def test_every_counter_bumped_is_declared():
    import re

    from refcomp.cache import CALLS, COUNTER_MEANINGS

    root = SPEC.parent / "refcomp"
    bumped = {m.group(1) for path in root.rglob("*.py")
              for m in re.finditer(r'COUNTERS\["(\w+)"', path.read_text())}
    bumped |= set(CALLS) - {"past_limit"}  # reported as misses, limit_hits, eager_calls
    assert bumped and bumped - set(COUNTER_MEANINGS) == set()


def callable_kind_table():
    from refcomp.tracer.dispatch import KINDS

    rows = ["| # | callable kind | what a call of it does | refused with |", "|---|---|---|---|"]
    for i, kind in enumerate(KINDS, 1):
        assert (kind.handle is None) == (kind.refused is not None), kind.name
        rows.append(f"| {i} | {kind.name} | {kind.summary} | {kind.refused or ''} |")
    return "\n".join(rows)


def test_callable_kind_table_is_the_dispatch_table():
    expected = callable_kind_table()
    header = "| # | callable kind | what a call of it does | refused with |"
    assert _table_after("tracer.md", header) == expected, expected


def opcode_table():
    from refcomp.tracer.opcodes import FAMILIES, OpcodeHandlers

    listed = [name for _, names, _ in FAMILIES for name in names.split()]
    handlers = {n for n in dir(OpcodeHandlers) if n.isupper()}
    assert len(listed) == len(set(listed)) and set(listed) == handlers, \
        (sorted(handlers - set(listed)), sorted(set(listed) - handlers))
    rows = ["| family | opcodes | notes |", "|---|---|---|"]
    for family, names, notes in FAMILIES:
        rows.append(f"| {family} | {' '.join(f'`{n}`' for n in names.split())} | {notes} |")
    return "\n".join(rows)


def test_opcode_table_is_the_handlers():
    expected = opcode_table()
    assert _table_after("tracer.md", "| family | opcodes | notes |") == expected, expected


def test_default_pipeline_is_the_declaration():
    from ir.passes.pipelines import DEFAULT_PIPELINE

    line = " -> ".join(DEFAULT_PIPELINE) + "        (ir.passes.pipelines.DEFAULT_PIPELINE)"
    assert line in (SPEC / "passes.md").read_text().splitlines(), line


def option_table():
    from refcomp.config import OPTIONS

    rows = ["| option | what it does |", "|---|---|"]
    rows += [f"| `{name}` | {meaning} |" for name, (_, meaning) in OPTIONS.items()]
    return "\n".join(rows)


def test_option_table_is_the_declaration():
    expected = option_table()
    assert _table_after("guards.md", "| option | what it does |") == expected, expected


def _first_column(path, header):
    return [row.split("|")[1].strip().strip("`\"") for row in _table_after(path, header).splitlines()[2:]]


def test_stance_and_log_channel_tables_name_the_declared_ones():
    from refcomp.logs import CHANNELS
    from refcomp.stance import STANCES

    assert _first_column("guards.md", "| stance | a call whose guards match no entry |") == list(STANCES)
    header = next(line for line in (SPEC / "runtime.md").read_text().splitlines()
                  if line.startswith("| channel "))
    assert _first_column("runtime.md", header) == [*CHANNELS, "all"]
