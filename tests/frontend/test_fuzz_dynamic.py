"""The fuzzer's multi-shape programs (tests/fuzz/gen.py: later calls change sizes, now and
then to 0) under dynamic=True, where every dim of every argument is a symbol from the first
call (issue 16; dynamic=None, automatic dynamic, is what tests/fuzz/test_fuzz.py runs)."""

import os

import pytest
from hypothesis import given, settings

from tests.fuzz.gen import programs, relaxed_checks
from tests.fuzz.runner import check

EXAMPLES = {"ci": 60, "thorough": 5000}.get(os.environ.get("REFCOMP_HYPOTHESIS", "ci"), 60)


@pytest.mark.parametrize("backend", ["eager", "llvm"])
def test_fuzz_programs_equal_eager_with_every_dim_symbolic(backend):
    @settings(max_examples=EXAMPLES)
    @given(programs(backend, max_statements=8))
    def run(program):
        check(program, backend, relaxed_checks(backend), dynamic=True)
    run()
