"""Property: random torch programs compiled by refcomp with the "llvm" backend equal eager.

Reuses the frontend's program strategy (tests/frontend/test_random_programs.py): real
source code over random shapes, dtypes (f32, f64, i64, i32) and contiguous, transposed
or strided inputs.  Each example JIT-compiles its kernels, so the budget is small.
"""

import torch
from hypothesis import given, settings

import refcomp
from tests.frontend.test_random_programs import _load, _make, programs


@settings(max_examples=15)
@given(programs())
def test_llvm_compiled_programs_equal_eager(program):
    source, dtype, shape, layouts, seed = program
    f = _load(source)
    gen = torch.Generator().manual_seed(seed)
    args = [_make(shape, dtype, layout, gen) for layout in layouts]
    try:
        want = f(*[a.clone() for a in args])
    except Exception:
        return  # the program is invalid in eager (e.g. a shape mismatch): nothing to compare
    got = refcomp.compile(f, backend="llvm")(*args)
    assert len(got) == len(want), source
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, source
        tol = 1e-4 if dtype == torch.float32 else 1e-9
        torch.testing.assert_close(g, w, rtol=tol, atol=tol, equal_nan=True,
                                   msg=lambda m: f"{source}\n{m}")
