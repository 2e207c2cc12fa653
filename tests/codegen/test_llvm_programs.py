"""Property: random torch programs compiled by refcomp with the "llvm" backend equal eager.

Reuses the frontend's program strategy (tests/frontend/test_random_programs.py): real
source code over random shapes, dtypes (f32, f64, i64, i32) and contiguous, transposed
or strided inputs.  Each example JIT-compiles its kernels, so the budget is small.
"""

from hypothesis import given, settings

from tests.frontend.test_random_programs import check_compiled_program_equals_eager, programs


@settings(max_examples=15)
@given(programs())
def test_llvm_compiled_programs_equal_eager(program):
    check_compiled_program_equals_eager(program, "llvm")
