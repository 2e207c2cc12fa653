"""The "eager" and "interp" backends equal the reference interpreter; eager differentiates.

Spec: spec/codegen.md, "Backends".
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from codegen.backends import get_backend
from codegen.eager import EAGER_OPS, missing_ops
from codegen.torch_bridge import from_numpy, to_numpy, torch_dtype
from ir import run
from ir.ops.registry import all_ops
from ir.types import bf16, f16, f32, f64
from tests.strategies import graphs

# Absolute and relative tolerance per result dtype; ints and bools compare exactly.
TOLERANCE = {f64: 1e-9, f32: 1e-4, f16: 1e-2, bf16: 2e-2}


def assert_matches(got: torch.Tensor, want: np.ndarray, dtype, what=""):
    assert got.dtype == torch_dtype(dtype), f"{what}: dtype {got.dtype}, want {dtype}"
    assert tuple(got.shape) == want.shape, f"{what}: shape {tuple(got.shape)} != {want.shape}"
    got = to_numpy(got)
    if dtype.is_float:
        tol = TOLERANCE[dtype]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def as_tensor(array, dtype, layout="contiguous"):
    """A tensor with `array`'s values, laid out contiguously, transposed or strided."""
    t = from_numpy(array, dtype)
    if layout == "transposed" and t.dim() >= 2:
        return t.transpose(0, 1).contiguous().transpose(0, 1)
    if layout == "strided" and t.dim() >= 1:
        wide = torch.zeros(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype)
        wide[..., ::2] = t
        return wide[..., ::2]
    return t


# --- registry walk ----------------------------------------------------------------------
def test_every_registered_op_has_an_eager_implementation():
    assert missing_ops() == [], f"ops without an eager implementation: {missing_ops()}"


def test_eager_table_names_only_registered_ops():
    registered = {op.name for op in all_ops()}
    assert set(EAGER_OPS) <= registered, set(EAGER_OPS) - registered


# --- both backends equal the interpreter on random graphs ------------------------------
@given(graphs(), st.sampled_from(("contiguous", "transposed", "strided")))
def test_backends_equal_interpreter(case, layout):
    graph, args = case
    want = run(graph, args)
    tensors = [as_tensor(a, v.type.dtype, layout) for a, v in zip(args, graph.inputs)]
    for name, options in (("eager", {"check": True}), ("interp", {})):
        fn = get_backend(name).compile_graph(graph, options)
        got = fn(*tensors)
        assert len(got) == len(want)
        for i, (g, w, v) in enumerate(zip(got, want, graph.outputs)):
            assert_matches(g, w, v.type.dtype, f"{name} output {i}\n{graph}")
