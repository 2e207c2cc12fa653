"""Helpers shared by the tests of the two kernel backends, "llvm" and "triton".

tests/codegen/test_kernel_backends.py runs the contracts the backends share, parametrized
over the backend; test_llvm_backend.py and test_triton_backend.py keep what only one of
them has and call `check_equals_interpreter` from their random-graph properties (whose
budgets and options differ per backend).  Not a test module: pytest does not collect it.
"""

import numpy as np
import torch

import ir
from codegen.backends import get_backend
from codegen.torch_bridge import from_numpy, to_numpy


def compile_graph(backend: str, graph, **options):
    return get_backend(backend).compile_graph(graph, options)


def strided(t: torch.Tensor) -> torch.Tensor:
    """The same values in a non-contiguous tensor (every other element of a wider one)."""
    if t.dim() == 0 or t.numel() == 0:
        return t
    wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    wide[..., ::2] = t
    view = wide[..., ::2]
    assert not view.is_contiguous() or t.shape[-1] <= 1, t.shape
    return view


def assert_matches(got, want, dtype):
    got = to_numpy(got)
    if dtype.is_float:
        np.testing.assert_allclose(got, want, rtol=3e-5, atol=3e-5, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def check_equals_interpreter(fn, graph, args, make_strided):
    """`fn` (graph compiled by a backend) on `args`, strided or not, equals ir.run."""
    tensors = [from_numpy(a, v.type.dtype) for a, v in zip(args, graph.inputs)]
    if make_strided:
        tensors = [strided(t) for t in tensors]
    expected = ir.run(graph, args)
    results = fn(*tensors)
    assert len(results) == len(expected), (len(results), len(expected))
    for got, want, v in zip(results, expected, graph.outputs):
        assert tuple(got.shape) == want.shape, (tuple(got.shape), want.shape)
        assert_matches(got, want, v.type.dtype)


DTYPE_GRAPH = """
func @f(%x: {t}[6,5], %y: {t}[6,5]) -> ({t}[6,5], {t}[6], bool[6,5]) {{
  %0 = mul %x, %y : {t}[6,5]
  %1 = maximum %0, %x : {t}[6,5]
  %2 = amax %1 {{dims=[1]}} : {t}[6]
  %3 = ge %1, %y : bool[6,5]
  return %1, %2, %3
}}"""


# Values an explicit cast to f16/bf16 must round like eager: ties (to even), just above
# ties, f16 subnormals and underflow, overflow, signed zero, inf, NaN; for f64 and i64
# sources values whose rounding to f32 first lands on a tie (torch rounds through f32).
HALF_CAST_VALUES = {
    "f32": [1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-20, 1 + 2**-8, 1 + 3 * 2**-8,
            1 + 2**-8 + 2**-20, 3e-6, 1e-8, 7e4, 4e38 / 2, -0.0, 0.1, -2.7, float("inf"),
            float("nan")],
    "f64": [1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40, 1 + 2**-11, 0.1, -1e-9, 1e300],
    "i64": [2**24 + 2**16 + 1, 2049, 2051, -70000, 3, 0],
}
