"""The fuzzer's programs under `torch.autocast("cpu", dtype=torch.bfloat16)`, eager and
compiled alike: CPU autocast is traced with torch's casting rules (Note [Autocast policy],
refcomp/tracer/autocast.py), so outputs must have eager's dtypes and, within bfloat16's
tolerance, its values (issue 14)."""

import os

import pytest
import torch
from hypothesis import given, settings

from tests.fuzz.gen import programs, relaxed_checks
from tests.fuzz.runner import check

EXAMPLES = {"ci": 40, "thorough": 2000}.get(os.environ.get("REFCOMP_HYPOTHESIS", "ci"), 40)


@pytest.mark.parametrize("backend", ["eager", "llvm"])
def test_fuzz_programs_under_autocast_equal_eager(backend):
    @settings(max_examples=EXAMPLES)
    @given(programs(backend, max_statements=8))
    def run(program):
        # Fresh outputs' strides are the plain fuzzer's business (test_fuzz.py, where their
        # open classes are listed); here they would stop the run before any dtype finding.
        relax = relaxed_checks(backend) | {"check:fresh_output_strides"}
        check(program, backend, relax, autocast=torch.bfloat16)
    run()
