"""Replay every program of tests/fuzz/corpus/ on every CPU backend (spec/testing.md,
"Corpus").  A file whose STATUS is "open" fails on its BACKENDS: those cases are strict
xfails, so fixing the bug turns them into XPASS failures until the file says "fixed".
A file with `GRAD = True` (grad_*.py) is replayed in the gradient mode (tests/fuzz/grad.py):
float32/float64 inputs require grad, forward and gradients compared.
A file with `PYTHON = True` (pyworld_*.py) is a Python-level program (tests/fuzz/pyworld.py:
a module, `f`, and the changes `BETWEEN` calls), compared with its oracle (side effects,
globals, grad mode too); one whose SYMPTOM is an interpreter crash runs in a child
process, so the crash fails (or xfails) that case and not the run."""

import pytest

from tests.fuzz import pyworld
from tests.fuzz.gen import CORPUS, corpus_entry
from tests.fuzz.grad import differentiable, grad_check
from tests.fuzz.program import from_module
from tests.fuzz.runner import check

BACKENDS = ["interp", "eager", "llvm"]


def load(path):
    return corpus_entry(path.name)


def cases():
    out = []
    for path in sorted(CORPUS.glob("*.py")):
        mod = load(path)
        assert mod.STATUS in ("open", "fixed"), f"{path.name}: STATUS must be open or fixed"
        assert set(mod.BACKENDS) <= set(BACKENDS), f"{path.name}: unknown backend"
        for b in BACKENDS:
            marks = []
            if mod.STATUS == "open" and b in mod.BACKENDS:
                marks.append(pytest.mark.xfail(strict=True, reason=f"open: {mod.SYMPTOM}"))
            out.append(pytest.param(path, b, marks=marks, id=f"{path.stem}-{b}"))
    return out


@pytest.mark.parametrize("path, backend", cases())
def test_corpus_program(path, backend):
    mod = load(path)
    if getattr(mod, "PYTHON", False):
        program = pyworld.from_module(mod)
        if mod.SYMPTOM.startswith("interpreter-crash"):
            out = pyworld.isolated_outcome(path, backend)
            assert not out.failed, pyworld.report(program, backend, out)
        else:
            pyworld.check(program, backend)
    elif getattr(mod, "GRAD", False):
        grad_check(from_module(mod), backend)
    else:
        check(from_module(mod), backend)


def test_corpus_files_are_well_formed():
    for path in sorted(CORPUS.glob("*.py")):
        mod = load(path)
        assert mod.__doc__ and mod.SYMPTOM and mod.BACKENDS, path.name
        python = getattr(mod, "PYTHON", False)
        assert python == path.name.startswith("pyworld_"), f"{path.name}: pyworld_*.py <=> PYTHON"
        if python:
            assert "\ndef f(" in mod.SOURCE, path.name
            assert len(mod.BETWEEN) == len(mod.INPUTS) - 1, f"{path.name}: one BETWEEN per later call"
        else:
            assert mod.SOURCE.lstrip("\n").startswith("def f("), path.name
        assert all(len(call) == len(mod.INPUTS[0]) for call in mod.INPUTS), path.name
        grad = getattr(mod, "GRAD", False)
        assert grad in (True, False), path.name
        assert grad == path.name.startswith("grad_"), f"{path.name}: grad_*.py <=> GRAD = True"
        assert not grad or differentiable(from_module(mod)), f"{path.name}: no float input"
