"""The textual pass-test runner: every tests/passes/<dir>/*.rir file, case by case.

Format (spec/passes.md, "Textual pass tests"):

    # RUN: fold,dce                  first line: the passes to run, in order
    # Intent of the first case.
    func @a(...) -> ... { ... }      the input IR (every non-comment line)
    # CHECK: ...                     FileCheck lines, matched against the printed result
    # -----                          a line starting with `# -----` separates cases
    ...

Each case is parsed, run through `run_pipeline` with the verifier and the semantic
check on (interpreter before == after on random inputs), printed, and FileCheck'ed.
A file may hold several functions per case; each is optimized and printed in order.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ir.parser import parse_module
from ir.passes.manager import run_pipeline
from ir.printer import print_graph
from tests.filecheck import check

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RUN = re.compile(r"^#\s*RUN:\s*(.*)$")
SEPARATOR = re.compile(r"^#\s*-----")


def read_cases(path: Path) -> list[tuple[list[str], int, str]]:
    """[(passes, first line number, case text)] for one .rir file."""
    lines = path.read_text().splitlines(keepends=True)
    m = RUN.match(lines[0]) if lines else None
    if m is None:
        raise ValueError(f"{path}: the first line must be '# RUN: pass1,pass2'")
    passes = [p.strip() for p in m.group(1).split(",") if p.strip()]
    cases, start, chunk = [], 2, []
    for number, line in enumerate(lines[1:], start=2):
        if SEPARATOR.match(line):
            cases.append((passes, start, "".join(chunk)))
            start, chunk = number + 1, []
        else:
            chunk.append(line)
    cases.append((passes, start, "".join(chunk)))
    return [c for c in cases if c[2].strip()]


def all_cases():
    params = []
    for path in sorted(HERE.glob("*/*.rir")):
        rel = path.relative_to(ROOT)
        for passes, line, text in read_cases(path):
            params.append(pytest.param(passes, str(rel), line, text, id=f"{rel}:{line}"))
    return params


@pytest.mark.parametrize("passes, path, line, text", all_cases())
def test_rir_case(passes, path, line, text):
    assert "CHECK" in text, f"{path}:{line}: a case without CHECK lines checks nothing"
    graphs = parse_module(text)
    output = "".join(print_graph(run_pipeline(g, passes, check_semantics=True)) for g in graphs)
    check(output, text, origin=(path, line))


def test_runner_reads_cases_and_separators(tmp_path):
    sample = tmp_path / "sample.rir"
    sample.write_text("# RUN: fold, dce\nfunc @a() -> f32[] {\n# CHECK: a\n# ----- next\n"
                      "func @b() -> f32[] {\n# CHECK: b\n")
    cases = read_cases(sample)
    assert [(p, line) for p, line, _ in cases] == [(["fold", "dce"], 2), (["fold", "dce"], 5)]
    assert cases[1][2].startswith("func @b")
