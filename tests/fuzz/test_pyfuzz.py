"""The Python-level differential fuzzer (tests/fuzz/pygen.py; spec/testing.md,
"Python-level programs"): programs whose statements exercise Python semantics around
torch calls, compiled on each backend, equal eager after every call in result, raised
exception and side effects.

Profiles (REFCOMP_HYPOTHESIS): `ci` runs PY_EXAMPLES programs per backend; `thorough` runs
PY_THOROUGH_PROGRAMS per CPU backend (`python -m tests.fuzz.pysoak` for time-boxed runs).
"""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.pycorpus import CASES
from tests.fuzz.pygen import PyProgram, check_program, generate

PROFILE = os.environ.get("REFCOMP_HYPOTHESIS", "ci")
PY_EXAMPLES = {"interp": 40, "eager": 60, "llvm": 30}
PY_THOROUGH_PROGRAMS = 10000
BACKENDS = ["interp", "eager", "llvm"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_programs_equal_eager(backend):
    @settings(max_examples=PY_EXAMPLES[backend])
    @given(st.integers(0, 2**31 - 1))
    def run(seed):
        program = generate(seed)
        problem = check_program(program, backend)
        assert problem is None, f"{problem}\n{program.render()}"
    run()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_python_corpus_equals_eager(name, backend):
    body, mutations, n_inputs = CASES[name]
    program = PyProgram(list(body), list(mutations), n_inputs, seed=len(name))
    assert check_program(program, backend) is None


def test_the_oracle_sees_a_lost_side_effect():
    """A program whose compiled run skips a side effect is reported (the oracle compares
    the prelude's state after every call, not only results)."""
    program = PyProgram(["STATE['log'].append(1)", "return (x0 * 2,)"], [], 1)
    import refcomp

    real = refcomp.compile
    try:  # a "compiler" that drops the side effect: runs only the return
        refcomp.compile = lambda fn, backend=None: (lambda *a: (a[0] * 2,))
        assert "state after the call" in (check_program(program, "eager") or "")
    finally:
        refcomp.compile = real


@pytest.mark.skipif(PROFILE != "thorough", reason="the thorough profile's run"
                    " (REFCOMP_HYPOTHESIS=thorough): 10,000 programs per CPU backend")
def test_python_programs_thorough_every_backend():
    from tests.fuzz import pysoak

    counts = pysoak.main(["--programs", str(PY_THOROUGH_PROGRAMS), "--seconds", "1e9"])
    for backend, c in counts.items():
        assert c["programs"] >= PY_THOROUGH_PROGRAMS, (backend, c)
        assert c["mismatches"] == 0 and c["crashes"] == 0, (backend, c)
