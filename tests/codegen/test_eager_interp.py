"""The "eager" and "interp" backends equal the reference interpreter; eager differentiates.

Spec: spec/codegen.md, "Backends".
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from codegen.backends import get_backend
from codegen.eager import EAGER_OPS, EagerError, missing_ops
from codegen.torch_bridge import from_numpy, to_numpy, torch_dtype
from ir import GraphBuilder, TensorType, run, verify
from ir.ops.registry import all_ops
from ir.types import bf16, bool_, f16, f32, f64, i8, i16, i32, i64, round_to_dtype, u8
from tests.strategies import graphs

# Absolute and relative tolerance per result dtype; ints and bools compare exactly.
TOLERANCE = {f64: 1e-9, f32: 1e-4, f16: 1e-2, bf16: 2e-2}


def graph_tolerance(graph) -> float:
    """The tolerance of the least precise float dtype any value of the graph has."""
    return max((TOLERANCE[v.type.dtype] for v in graph.values() if v.type.dtype.is_float),
               default=0.0)


def assert_matches(got: torch.Tensor, want: np.ndarray, dtype, what="", tol=None):
    assert got.dtype == torch_dtype(dtype), f"{what}: dtype {got.dtype}, want {dtype}"
    assert tuple(got.shape) == want.shape, f"{what}: shape {tuple(got.shape)} != {want.shape}"
    got = to_numpy(got)
    if dtype.is_float:
        tol = max(tol or 0.0, TOLERANCE[dtype])
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
LAYOUTS = st.sampled_from(("contiguous", "transposed", "strided"))


def check_backends(graph, args, layout, backends):
    want = run(graph, args)
    tensors = [as_tensor(a, v.type.dtype, layout) for a, v in zip(args, graph.inputs)]
    tol = graph_tolerance(graph)
    for name, options in backends:
        got = get_backend(name).compile_graph(graph, options)(*tensors)
        assert len(got) == len(want)
        for i, (g, w, v) in enumerate(zip(got, want, graph.outputs)):
            assert_matches(g, w, v.type.dtype, f"{name} output {i}\n{graph}", tol)


@given(graphs(), LAYOUTS)
def test_backends_equal_interpreter(case, layout):
    check_backends(*case, layout, [("eager", {"check": True}), ("eager", {}), ("interp", {})])


@given(graphs(max_nodes=5, dtypes=(f16, bf16)), LAYOUTS)
def test_eager_equals_interpreter_in_half_precision(case, layout):
    # The ref rounds every f16/bf16 result, as torch's CPU kernels do (compute in f32).
    check_backends(*case, layout, [("eager", {"check": True})])


# --- every op, one node at a time, over dtypes and edge values --------------------------
ALL_DTYPES = (f32, f64, f16, bf16, i64, i32, i16, i8, u8, bool_)
FLOATS = (f32, f64, f16, bf16)
SPECIALS = (np.nan, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0)


def make_data(rng, dtype, shape, kind="any"):
    """Inputs for one operand: `kind` is any, pos, finite, nonzero, expo, shift, idx<N>
    (indices in [-N, N)) or bool."""
    if kind == "bool" or dtype.is_bool:
        return np.ones(shape, bool) if kind == "nonzero" else rng.random(shape) < 0.5
    if kind == "shift":  # shift amounts, some outside [0, bits)
        return rng.integers(0 if dtype == u8 else -2, dtype.bits + 3, shape).astype(dtype.np)
    if kind.startswith("idx"):
        n = int(kind[3:])
        return rng.integers(-n, n, shape).astype(dtype.np)
    if dtype.is_float:
        if kind == "pos":
            values = rng.uniform(0.1, 3.0, shape)
        else:
            values = rng.uniform(-3.0, 3.0, shape)
            if kind == "any" and values.size:  # sprinkle the values rounding and NaN rules see
                flat = values.reshape(-1)
                flat[: len(SPECIALS)] = SPECIALS[: flat.size]
                rng.shuffle(flat)
        return round_to_dtype(values, dtype)
    low = 0 if dtype == u8 or kind in ("pos", "expo") else -5
    high = 4 if kind == "expo" else 10 if dtype == u8 else 6
    values = rng.integers(low, high, shape)
    if kind in ("nonzero", "pos"):
        values[values == 0] = 1
    return values.astype(dtype.np)


def _unary(kind="any"):
    return [([((3, 4), kind, None)], {}), ([((), kind, None)], {})]


def _binary(kind_b="any"):
    # Equal shapes; a rank-0 second operand; mixed dtypes either way (promotion).
    return [([((3, 4), "any", None), ((3, 4), kind_b, None)], {}),
            ([((2, 3), "any", None), ((), kind_b, None)], {}),
            ([((2, 3), "any", None), ((), kind_b, f32)], {}),
            ([((), "any", f64), ((2, 3), kind_b, None)], {}),
            ([((2, 3), "any", i64), ((2, 3), kind_b, None)], {})]


def _reduce(extra=None):
    out = []
    for dims in ([], [0], [1], [0, 1], [-1]):
        for keepdim in (False, True):
            out.append(([((3, 4), "any", None)], dict(dims=dims, keepdim=keepdim, **(extra or {}))))
    out.append(([((), "any", None)], dict(dims=[], **(extra or {}))))
    out.append(([((0, 3), "any", None)], dict(dims=[1], **(extra or {}))))
    return out


def _arg():
    out = [([((3, 4), "any", None)], dict(dim=dim, keepdim=keep))
           for dim in (None, 0, 1, -1) for keep in (False, True)]
    return out + [([((), "any", None)], dict(dim=None)), ([((), "any", None)], dict(dim=0))]


X = ((3, 4), "any", None)
# op name -> (cases, dtypes).  A case is ([(shape, data kind, dtype or None = the
# dtype under test)], attrs).  Dtypes the op's type rule rejects are skipped.
SAMPLES = {
    **{name: (_unary(), ALL_DTYPES) for name in (
        "neg", "abs", "relu", "sign", "floor", "ceil", "round", "trunc", "exp", "log1p",
        "expm1", "sin", "cos", "tanh", "sigmoid", "erf", "silu", "reciprocal", "logical_not",
        "isnan", "bitwise_not", "copy", "stop_gradient")},
    **{name: (_unary("pos"), ALL_DTYPES) for name in ("log", "sqrt", "rsqrt")},
    "gelu": (_unary() + [([X], {"approximate": "tanh"})], FLOATS),
    **{name: (_binary(), ALL_DTYPES) for name in (
        "add", "sub", "mul", "div", "maximum", "minimum", "atan2", "eq", "ne", "lt", "le",
        "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
        "bitwise_xor")},
    # Integer division by zero raises in torch and gives 0 in numpy: divisors are nonzero.
    **{name: (_binary("nonzero"), ALL_DTYPES) for name in ("floor_divide", "div_floor",
                                                             "remainder", "fmod")},
    "pow": (_binary("expo"), ALL_DTYPES),
    **{name: (_binary("shift"), ALL_DTYPES) for name in ("bitwise_left_shift",
                                                          "bitwise_right_shift")},
    "where": ([([((3, 4), "bool", bool_), X, X], {}),
               ([((3, 4), "bool", bool_), ((), "any", f32), X], {})], ALL_DTYPES),
    "clamp": ([([X], {"min": -1.5, "max": 2.5}), ([X], {"min": 0}), ([X], {"max": 1})],
              ALL_DTYPES),
    "cast": ([([((3, 4), "finite", None)], {"dtype": d}) for d in ALL_DTYPES if d != u8]
             + [([((3, 4), "pos", None)], {"dtype": u8})], ALL_DTYPES),
    "sum": (_reduce(), ALL_DTYPES), "prod": (_reduce(), ALL_DTYPES),
    "amax": (_reduce()[:-1], ALL_DTYPES), "amin": (_reduce()[:-1], ALL_DTYPES),
    "mean": (_reduce(), FLOATS), "any": (_reduce(), ALL_DTYPES), "all": (_reduce(), ALL_DTYPES),
    "var": (_reduce() + _reduce({"correction": 0})[:4] + _reduce({"correction": 2})[:4],
            FLOATS),
    "argmax": (_arg(), ALL_DTYPES), "argmin": (_arg(), ALL_DTYPES),
    "reshape": ([([X], {"shape": [2, 6]}), ([X], {"shape": [12]}),
                 ([((), "any", None)], {"shape": [1, 1]})], ALL_DTYPES),
    "permute": ([([((2, 3, 4), "any", None)], {"perm": [2, 0, 1]})], ALL_DTYPES),
    "slice": ([([X], dict(dim=d, start=a, stop=b, step=s))
               for d, a, b, s in ((0, 0, 2, 1), (1, 1, 100, 2), (-1, -3, -1, 1), (0, 5, 9, 1),
                                  (1, 3, 1, 1), (1, -100, 3, 3))], ALL_DTYPES),
    "squeeze": ([([((1, 3, 1), "any", None)], {"dims": []}),
                 ([((1, 3, 1), "any", None)], {"dims": [0, 1]}),
                 ([((1, 3, 1), "any", None)], {"dims": [-1]})], ALL_DTYPES),
    "unsqueeze": ([([X], {"dim": 0}), ([X], {"dim": -1}), ([X], {"dim": 1})], ALL_DTYPES),
    "expand": ([([((3, 1), "any", None)], {"shape": [3, 5]}),
                ([((1, 1), "any", None)], {"shape": [2, 4]})], ALL_DTYPES),
    "cat": ([([X, ((2, 4), "any", None), ((0, 4), "any", None)], {"dim": 0}),
             ([X, X], {"dim": -1})], ALL_DTYPES),
    "pad": ([([X], {"pads": [1, 2]}), ([X], {"pads": [0, 1, 2, 0], "value": 1.5}),
             ([X], {"pads": [1, 1], "value": -2})], ALL_DTYPES),
    "index_select": ([([X, ((5,), "idx3", i64)], {"dim": 0}),
                      ([X, ((2,), "idx4", i32)], {"dim": -1})], ALL_DTYPES),
    "gather": ([([X, ((3, 2), "idx4", i64)], {"dim": 1}),
                ([X, ((2, 4), "idx3", i64)], {"dim": 0})], ALL_DTYPES),
    "index_add": ([([X, ((5,), "idx3", i64), ((5, 4), "any", None)], {"dim": 0}),
                   ([X, ((2,), "idx4", i32), ((3, 2), "any", None)], {"dim": -1})],
                  ALL_DTYPES),
    "slice_scatter": ([([X, ((3, 2), "any", None)], {"dim": 1, "start": 1, "stop": 4, "step": 2}),
                       ([X, ((2, 4), "any", None)], {"dim": 0, "start": -2, "stop": 9})],
                      ALL_DTYPES),
    "scatter_add": ([([X, ((3, 2), "idx4", i64), ((3, 2), "any", None)], {"dim": 1}),
                     ([X, ((2, 4), "idx3", i64), ((2, 4), "any", None)], {"dim": 0})],
                    ALL_DTYPES),
    "full": ([([], {"value": 2.5, "shape": [2, 3], "dtype": f64}),
              ([], {"value": 3, "shape": [], "dtype": i32}),
              ([], {"value": 1.1, "shape": [2], "dtype": bf16}),
              ([], {"value": True, "shape": [2], "dtype": bool_})], (f32,)),
    "size_value": ([([], {"value": 7}), ([], {"value": 3, "dtype": f32}),
                    ([], {"value": 1000, "dtype": bf16})], (f32,)),
    "arange": ([([], {"end": 5}), ([], {"start": 7, "end": -2, "step": -3, "dtype": f32}),
                ([], {"start": 3, "end": 3})], (f32,)),
    "constant": ([([], {"data": [[1.1, 2.2], [3.3, -4.4]], "dtype": d}) for d in FLOATS]
                 + [([], {"data": [1, -2, 3], "dtype": i32}),
                    ([], {"data": 7, "dtype": i64})], (f32,)),
    "matmul": ([([((3, 4), "any", None), ((4, 2), "any", None)], {}),
                ([((2, 3, 4), "any", None), ((2, 4, 5), "any", None)], {}),
                ([((4,), "any", None), ((4, 2), "any", None)], {}),
                ([((3, 4), "any", None), ((4,), "any", None)], {})], (f32, f64, i64)),
    "conv2d": ([([((2, 4, 5, 6), "any", None), ((6, 2, 3, 2), "any", None)],
                 dict(stride=[2, 1], padding=[1, 0], dilation=[1, 2], groups=2)),
                ([((1, 1, 4, 4), "any", None), ((1, 1, 2, 2), "any", None)], {})],
               (f32, f64)),
    "conv2d_grad_input": ([([((2, 6, 3, 4), "any", None), ((6, 2, 3, 2), "any", None)],
                            dict(input_shape=[2, 4, 5, 6], stride=[2, 1], padding=[1, 0],
                                 dilation=[1, 2], groups=2))], (f32, f64)),
    "conv2d_grad_weight": ([([((2, 4, 5, 6), "any", None), ((2, 6, 3, 4), "any", None)],
                             dict(weight_shape=[6, 2, 3, 2], stride=[2, 1], padding=[1, 0],
                                  dilation=[1, 2], groups=2))], (f32, f64)),
    "max_pool2d_grad": ([([((2, 3, 2, 3), "any", None), ((2, 3, 5, 6), "any", None)],
                          dict(kernel_size=[2, 2], stride=[2, 2]))], FLOATS),
    "avg_pool2d_grad": ([([((1, 2, 4, 6), "any", None)],
                          dict(input_shape=[1, 2, 7, 5], kernel_size=[3, 2], stride=[2, 1],
                               padding=[1, 1], ceil_mode=True, count_include_pad=False))],
                        FLOATS),
    "max_pool2d": ([([((2, 3, 5, 6), "any", None)], dict(kernel_size=[2, 2], stride=[2, 2])),
                    ([((1, 2, 7, 5), "any", None)],
                     dict(kernel_size=[3, 2], stride=[2, 1], padding=[1, 1], dilation=[2, 1],
                          ceil_mode=True))], FLOATS),
    "avg_pool2d": ([([((2, 3, 5, 6), "any", None)], dict(kernel_size=[2, 2], stride=[2, 2])),
                    ([((1, 2, 7, 5), "any", None)],
                     dict(kernel_size=[3, 2], stride=[2, 1], padding=[1, 1], ceil_mode=True)),
                    ([((1, 2, 6, 6), "any", None)],
                     dict(kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], ceil_mode=True,
                          count_include_pad=False))], FLOATS),
    "embedding": ([([((5, 3), "any", None), ((2, 4), "idx5", i64)], {}),
                   ([((5, 3), "any", None), ((4,), "idx5", i32)], {})], FLOATS),
    "softmax": ([([X], {"dim": -1}), ([X], {"dim": 0}), ([((), "any", None)], {"dim": 0})],
                FLOATS),
    "log_softmax": ([([X], {"dim": 1}), ([X], {"dim": -2})], FLOATS),
    "layer_norm": ([([((2, 3, 4), "any", None), ((4,), "any", None), ((4,), "any", None)],
                     {"normalized_ndim": 1}),
                    ([((2, 3, 4), "any", None), ((3, 4), "any", None), ((3, 4), "any", None)],
                     {"normalized_ndim": 2, "eps": 1e-3})], FLOATS),
    "rms_norm": ([([((2, 3, 4), "any", None), ((4,), "any", None)], {"normalized_ndim": 1}),
                  ([((2, 3, 4), "any", None), ((3, 4), "any", None)],
                   {"normalized_ndim": 2, "eps": 1e-2})], FLOATS),
    "batch_norm": ([([((2, 3, 4), "any", None), ((3,), "any", None), ((3,), "pos", None),
                      ((3,), "any", None), ((3,), "any", None)], {}),
                    ([((2, 3), "any", None), ((3,), "any", None), ((3,), "pos", None),
                      ((3,), "any", None), ((3,), "any", None)], {"eps": 0.1})], FLOATS),
}
# Ops checked elsewhere in this file: random draws (no reference values to compare
# with) and fused regions (a body, not a standalone op); `aten` (an opaque torch call)
# in tests/ir/test_opaque.py.
# dropout_mask's draws are compared with eager's F.dropout in tests/training.
# The complex-only ops: eager against torch in tests/ir/test_complex_values.py.
ELSEWHERE = {"rand", "randn", "dropout_mask", "fused", "aten", "view_as_real", "view_as_complex",
             "complex", "conj", "angle"}


def test_every_registered_op_has_samples():
    registered = {op.name for op in all_ops()}
    assert registered - set(SAMPLES) - ELSEWHERE == set(), "ops without samples below"
    assert set(SAMPLES) <= registered


def single_op_graph(name, types, attrs):
    b = GraphBuilder(name)
    inputs = [b.input(f"x{i}", t) for i, t in enumerate(types)]
    out = b.op(name, *inputs, **attrs)
    return b.build(list(out) if isinstance(out, tuple) else [out])


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_op_equals_reference(name):
    cases, dtypes = SAMPLES[name]
    rng = np.random.default_rng(0)
    backends = [get_backend("eager").compile_graph, get_backend("interp").compile_graph]
    checked = 0
    for dtype in dtypes:
        for operands, attrs in cases:
            types = [TensorType(d or dtype, shape) for shape, _, d in operands]
            try:
                graph = single_op_graph(name, types, attrs)
            except TypeError:
                continue  # the type rule rejects this dtype (e.g. sub of bools)
            args = [make_data(rng, t.dtype, t.shape, kind)
                    for t, (_, kind, _) in zip(types, operands)]
            want = run(graph, args)
            tensors = [from_numpy(a, t.dtype) for a, t in zip(args, types)]
            for compile_graph, options in zip(backends, ({"check": True}, {})):
                got = compile_graph(graph, options)(*tensors)
                for g, w, v in zip(got, want, graph.outputs):
                    assert_matches(g, w, v.type.dtype,
                                   f"{name} {options} on {types} {attrs}: {args}")
            checked += 1
    assert checked, f"no sample of {name} type-checks"



# --- gradients --------------------------------------------------------------------------
MLP_TEXT = """func @mlp(%x: f64[4,3], %w: f64[3,5], %b: f64[5], %g: f64[5], %beta: f64[5]) -> f64[] {
  %0 = matmul %x, %w : f64[4,5]
  %1 = reshape %b {shape=[1,5]} : f64[1,5]
  %2 = expand %1 {shape=[4,5]} : f64[4,5]
  %3 = add %0, %2 : f64[4,5]
  %4 = gelu %3 : f64[4,5]
  %5 = layer_norm %4, %g, %beta {normalized_ndim=1} : f64[4,5]
  %6 = log_softmax %5 {dim=1} : f64[4,5]
  %7 = slice %6 {dim=1, start=1, stop=4} : f64[4,3]
  %8 = mul %7, %x : f64[4,3]
  %9 = tanh %8 : f64[4,3]
  %10 = sum %9 : f64[]
  return %10
}"""


def mlp_by_hand(x, w, b, g, beta):
    h = torch.nn.functional.gelu(x @ w + b)
    h = torch.nn.functional.layer_norm(h, (5,), g, beta)
    return torch.tanh(torch.log_softmax(h, 1)[:, 1:4] * x).sum()


CONV_TEXT = """func @conv(%x: f64[2,3,5,5], %w: f64[4,3,3,3], %m: f64[4], %v: f64[4], %g: f64[4], %b: f64[4], %e: f64[6,4], %i: i64[2,3], %j: i64[4]) -> (f64[], f64[2,3,4]) {
  %0 = conv2d %x, %w {padding=[1,1]} : f64[2,4,5,5]
  %1 = batch_norm %0, %m, %v, %g, %b : f64[2,4,5,5]
  %2 = pad %1 {pads=[1,0,0,1], value=0.5} : f64[2,4,6,6]
  %3 = amax %2 {dims=[2,3]} : f64[2,4]
  %4 = var %2 {dims=[2,3]} : f64[2,4]
  %5 = clamp %4 {min=0.05, max=3.0} : f64[2,4]
  %6 = maximum %3, %5 : f64[2,4]
  %7 = softmax %6 {dim=1} : f64[2,4]
  %8 = cat %7, %5 {dim=0} : f64[4,4]
  %9 = index_select %8, %j {dim=0} : f64[4,4]
  %10 = embedding %e, %i : f64[2,3,4]
  %11 = rms_norm %10, %g {normalized_ndim=1} : f64[2,3,4]
  %12 = sum %9 : f64[]
  return %12, %11
}"""


def conv_by_hand(x, w, m, v, g, b, e, i, j):
    F = torch.nn.functional
    h = F.batch_norm(F.conv2d(x, w, padding=1), m, v, g, b, training=False)
    h = F.pad(h, (1, 0, 0, 1), value=0.5)
    var = torch.clamp(h.var(dim=(2, 3)), 0.05, 3.0)
    top = torch.softmax(torch.maximum(h.amax(dim=(2, 3)), var), 1)
    rows = torch.cat([top, var]).index_select(0, j)
    return rows.sum(), F.rms_norm(F.embedding(i, e), (4,), g, 1e-6)


@pytest.mark.parametrize("text, by_hand", [(MLP_TEXT, mlp_by_hand), (CONV_TEXT, conv_by_hand)],
                         ids=["mlp", "conv"])
def test_eager_gradients_equal_plain_torch(text, by_hand):
    from ir import parse

    graph = parse(text)
    assert verify(graph) == []
    gen = torch.Generator().manual_seed(0)
    leaves = []
    for value in graph.inputs:
        shape = [int(d) for d in value.type.shape]
        if value.type.dtype.is_float:
            t = torch.rand(shape, generator=gen, dtype=torch.float64) + 0.1
            # Running statistics are buffers (F.batch_norm does not differentiate them).
            leaves.append(t.requires_grad_(value.name not in ("m", "v")))
        else:
            leaves.append(torch.tensor([[0, 2, 3], [1, 1, 0]] if value.name == "i"
                                       else [0, 2, 3, 1]))
    floats = [t for t in leaves if t.requires_grad]
    got_outs = get_backend("eager").compile_graph(graph, {})(*leaves)
    want_outs = by_hand(*leaves)
    want_outs = want_outs if isinstance(want_outs, tuple) else (want_outs,)
    weights = [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in want_outs]
    for g, w in zip(got_outs, want_outs):
        assert g.requires_grad
        torch.testing.assert_close(g, w)
    got = torch.autograd.grad(sum((o * k).sum() for o, k in zip(got_outs, weights)), floats)
    want = torch.autograd.grad(sum((o * k).sum() for o, k in zip(want_outs, weights)), floats)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    assert all(g.abs().sum() > 0 for g in got)  # every float input reaches an output


def test_eager_batch_norm_differentiates_running_statistics():
    graph = single_op_graph("batch_norm", [TensorType(f64, (2, 3, 2))]
                            + [TensorType(f64, (3,))] * 4, {})
    fn = get_backend("eager").compile_graph(graph, {})
    gen = torch.Generator().manual_seed(1)
    args = [torch.rand(s, generator=gen, dtype=torch.float64, requires_grad=True) + 0.5
            for s in [(2, 3, 2)] + [(3,)] * 4]
    args = [a.detach().requires_grad_() for a in args]
    assert torch.autograd.gradcheck(lambda *xs: fn(*xs)[0], args)


@pytest.mark.parametrize("eps, stats", [(None, "mv"), (0.25, "mv"), (None, "m"), (0.25, "v")])
@pytest.mark.parametrize("shape", [(2, 3, 2), (4, 3)])
def test_eager_batch_norm_with_differentiable_statistics_equals_torch(shape, eps, stats):
    # Statistics that require grad (both, or only the mean or the variance) take the eager
    # backend's own formula instead of F.batch_norm (codegen/eager.py `_make_batch_norm`):
    # its values equal F.batch_norm's and its gradients those of the formula written out
    # in torch, for every operand that requires grad.
    attrs = {} if eps is None else {"eps": eps}
    graph = single_op_graph("batch_norm", [TensorType(f64, shape)]
                            + [TensorType(f64, (3,))] * 4, attrs)
    eps = 1e-5 if eps is None else eps
    gen = torch.Generator().manual_seed(2)
    x, m, v, w, b = [(torch.randn(s, generator=gen, dtype=torch.float64)
                      + (2.0 if i == 2 else 0.0)).requires_grad_()
                     for i, s in enumerate([shape] + [(3,)] * 4)]
    v = (v.detach().abs() + 0.1).requires_grad_()
    m, v = m.requires_grad_("m" in stats), v.requires_grad_("v" in stats)
    leaves = [t for t in (x, m, v, w, b) if t.requires_grad]
    got = get_backend("eager").compile_graph(graph, {})(x, m, v, w, b)[0]
    want = torch.nn.functional.batch_norm(x, m.detach(), v.detach(), w, b, False, 0.0, eps)
    torch.testing.assert_close(got, want)
    view = (1, 3) + (1,) * (len(shape) - 2)
    by_hand = ((x - m.reshape(view)) / torch.sqrt(v.reshape(view) + eps) * w.reshape(view)
               + b.reshape(view))
    weight = torch.randn(shape, generator=gen, dtype=torch.float64)
    grads = torch.autograd.grad((got * weight).sum(), leaves)
    wants = torch.autograd.grad((by_hand * weight).sum(), leaves)
    for g, w_ in zip(grads, wants, strict=True):
        torch.testing.assert_close(g, w_)


@given(graphs(dtypes=(f64,), max_nodes=6, differentiable=True), st.integers(0, 2**32 - 1))
def test_eager_gradients_match_finite_differences(case, seed):
    """<J^T w, v> from autograd through the eager backend equals <w, J v> by central
    differences of the numpy oracle, for random directions v and weights w."""
    graph, args = case
    # A cast to f32 on the way makes finite differences in f64 meaningless.
    assume(all(v.type.dtype != f32 for v in graph.values()))
    rng = np.random.default_rng(seed)
    # Move inputs off the kinks of relu/abs/floor that hypothesis likes to hit (0, 1, ...).
    args = [a + rng.uniform(0.01, 0.02, a.shape) for a in args]
    floats = [i for i, v in enumerate(graph.outputs) if v.type.dtype.is_float]
    assume(floats)
    leaves = [torch.tensor(a, requires_grad=True) for a in args]
    outs = get_backend("eager").compile_graph(graph, {})(*leaves)
    weights = {i: rng.standard_normal(np.shape(outs[i])) for i in floats}
    assume(all(torch.isfinite(outs[i]).all() for i in floats))
    total = sum((outs[i] * torch.from_numpy(weights[i])).sum() for i in floats)
    grads = [torch.zeros_like(x) for x in leaves]
    if isinstance(total, torch.Tensor) and total.requires_grad:
        found = torch.autograd.grad(total, leaves, allow_unused=True)
        grads = [g if g is not None else z for g, z in zip(found, grads)]
    direction = [rng.standard_normal(a.shape) for a in args]
    by_autograd = sum(float((g.numpy() * v).sum()) for g, v in zip(grads, direction))

    def objective(step):
        outs = run(graph, [a + step * v for a, v in zip(args, direction)])
        return sum(float((outs[i] * weights[i]).sum()) for i in floats)

    h = 1e-6
    by_differences = (objective(h) - objective(-h)) / (2 * h)
    assert abs(by_autograd - by_differences) <= 1e-5 * (1 + abs(by_differences)), str(graph)


# --- random ops -------------------------------------------------------------------------
RANDOM_TEXT = """func @noise(%x: f32[3,4]) -> (f32[3,4], f64[2]) {
  %0 = rand {shape=[3,4]} : f32[3,4]
  %1 = add %x, %0 : f32[3,4]
  %2 = randn {shape=[2], dtype=f64} : f64[2]
  return %1, %2
}"""


RANDOM_MORE_TEXT = """func @more(%x: bf16[5,6]) -> (bf16[5,6], f16[7]) {
  %0 = dropout_mask {shape=[5,6], p=0.25, dtype=bf16} : bf16[5,6]
  %1 = mul %x, %0 : bf16[5,6]
  %2 = rand {shape=[7], dtype=f16} : f16[7]
  return %1, %2
}"""


@pytest.mark.parametrize("backend", ["eager", "interp"])
def test_random_ops_draw_what_eager_torch_draws(backend):
    """Both backends draw from torch's generator as eager torch does (the interp's
    numpy draws differed from eager's for the same seed before)."""
    from ir import parse

    fn = get_backend(backend).compile_graph(parse(RANDOM_TEXT), {})
    x = torch.ones(3, 4)
    torch.manual_seed(7)
    got = fn(x)
    after = torch.rand(1)
    torch.manual_seed(7)
    want = [x + torch.rand(3, 4), torch.randn(2, dtype=torch.float64)]
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    assert torch.equal(after, torch.rand(1))  # the generator left where eager leaves it
    assert not torch.equal(fn(x)[0], got[0])  # and it moved on

    more = get_backend(backend).compile_graph(parse(RANDOM_MORE_TEXT), {})
    y = torch.randn(5, 6, dtype=torch.bfloat16)
    torch.manual_seed(11)
    got = more(y)
    torch.manual_seed(11)
    want = [y * torch.nn.functional.dropout(torch.ones(5, 6, dtype=torch.bfloat16), 0.25),
            torch.rand(7, dtype=torch.float16)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and torch.equal(g, w)


def test_interp_leaves_torch_generator_alone_without_random_ops():
    graph = single_op_graph("exp", [TensorType(f32, (2,))], {})
    fn = get_backend("interp").compile_graph(graph, {})
    torch.manual_seed(5)
    fn(torch.zeros(2))
    after = torch.rand(1)
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(1))


# --- fused regions, symbolic sizes, aliasing, conversions -------------------------------
FUSED_TEXT = """func @f(%x: f32[s0,4], %y: f32[4]) -> (f32[s0,4], f32[]) {
  %0 = reshape %y {shape=[1,4]} : f32[1,4]
  %1 = expand %0 {shape=[s0,4]} : f32[s0,4]
  %2, %3 = fused %x, %1 {kind="pointwise"} : f32[s0,4], f32[] {
  ^(%a: f32[s0,4], %b: f32[s0,4]):
    %4 = mul %a, %b : f32[s0,4]
    %5 = full {value=1.5, shape=[s0,4]} : f32[s0,4]
    %6 = add %4, %5 : f32[s0,4]
    %7 = sum %6 : f32[]
    return %6, %7
  }
  return %2, %3
}"""


@pytest.mark.parametrize("backend", ["eager", "interp"])
def test_fused_bodies_and_symbolic_sizes(backend):
    from ir import parse

    fn = get_backend(backend).compile_graph(parse(FUSED_TEXT), {})
    y = torch.arange(4.0)
    for rows in (1, 3, 6):  # one compiled function serves every size of s0
        x = torch.randn(rows, 4)
        prod, total = fn(x, y)
        torch.testing.assert_close(prod, x * y + 1.5)
        torch.testing.assert_close(total, (x * y + 1.5).sum())


def test_interp_outputs_never_alias_inputs():
    graph = single_op_graph("reshape", [TensorType(f32, (2, 3))], {"shape": [6]})
    x = torch.zeros(2, 3)
    (out,) = get_backend("interp").compile_graph(graph, {})(x)
    out[0] = 1.0
    assert x[0, 0] == 0.0


def test_eager_writes_no_input_and_accepts_views():
    graph = single_op_graph("add", [TensorType(f32, (3, 2)), TensorType(f32, (3, 2))], {})
    base = torch.arange(6.0).reshape(2, 3)
    x = base.t()  # a transposed view
    before = base.clone()
    (out,) = get_backend("eager").compile_graph(graph, {})(x, x)
    assert torch.equal(out, 2 * x) and torch.equal(base, before)


def test_unknown_options_are_rejected_with_the_valid_ones():
    graph = single_op_graph("exp", [TensorType(f32, (2,))], {})
    with pytest.raises(ValueError, match="valid: check"):
        get_backend("eager").compile_graph(graph, {"chek": True})
    with pytest.raises(ValueError, match="takes no options"):
        get_backend("interp").compile_graph(graph, {"check": True})


def test_torch_bridge_round_trips_every_dtype():
    from codegen.torch_bridge import dtype_of, tensor_type
    from ir.types import ALL_DTYPES, COMPLEX_DTYPES

    for dtype in ALL_DTYPES + COMPLEX_DTYPES:
        assert dtype_of(torch_dtype(dtype)) is dtype
        t = torch.zeros(2, 3, dtype=torch_dtype(dtype))[:, 1:]
        assert tensor_type(t) == TensorType(dtype, (2, 2))
        assert to_numpy(t).dtype == dtype.np
    # complex32 is the extern-only c32, stored as complex64 (as bf16 is as float32)
    from ir.types import c32
    assert dtype_of(torch.complex32) is c32
    assert to_numpy(torch.zeros(2, dtype=torch.complex32)).dtype == np.complex64
    with pytest.raises(ValueError, match="no dtype for torch.float8_e4m3fn"):
        dtype_of(torch.float8_e4m3fn)
    # bf16 values survive the trip through float32 storage exactly.
    t = torch.tensor([1.0 / 3, -2.5e-3, 3e38], dtype=torch.bfloat16)
    assert torch.equal(from_numpy(to_numpy(t), bf16), t)


CONSTANT_TEXT = """func @f(%x: f32[2]) -> (f32[2], f32[1,1], f32[2]) {
  %0 = full {value=2.0} : f32[]
  %1 = mul %x, %0 : f32[2]
  %2 = reshape %0 {shape=[1,1]} : f32[1,1]
  %3 = constant {data=[1.0, 2.0], dtype=f32} : f32[2]
  return %1, %2, %3
}"""


def test_eager_outputs_that_may_be_a_constant_itself_are_copies():
    from ir import parse

    # floor of an int and a cast to the same dtype return their operand in torch.
    graph = parse("""func @f() -> (i64[2], i64[2]) {
  %0 = full {value=3, shape=[2], dtype=i64} : i64[2]
  %1 = floor %0 : i64[2]
  %2 = cast %1 {dtype=i64} : i64[2]
  return %1, %2
}""")
    fn = get_backend("eager").compile_graph(graph, {})
    for out in fn():
        out.fill_(-1)
    assert [t.tolist() for t in fn()] == [[3, 3], [3, 3]]


def test_eager_constants_are_made_once_and_never_handed_out():
    from ir import parse

    with torch.inference_mode():  # compiling here must not make inference-only tensors
        fn = get_backend("eager").compile_graph(parse(CONSTANT_TEXT), {})
    assert "full" not in fn.plan_source and "f0(" not in fn.plan_source  # made at compile
    x = torch.ones(2, requires_grad=True)
    scaled, view, data = fn(x)
    scaled.sum().backward()
    assert torch.equal(x.grad, torch.full((2,), 2.0))
    view.fill_(-1.0)  # the caller owns its outputs: writing them changes no later call
    data.fill_(-1.0)
    again = fn(x)
    assert again[1].item() == 2.0 and again[2].tolist() == [1.0, 2.0]


def test_eager_rejects_a_size_symbol_no_input_binds():
    from ir import parse

    graph = parse("""func @f(%x: f32[s0]) -> f32[s1] {
  %0 = full {value=1.0, shape=[s1]} : f32[s1]
  return %0
}""")
    with pytest.raises(EagerError, match="size symbol.*s1 are bound by no input"):
        get_backend("eager").compile_graph(graph, {})


def test_layouts_under_test_are_really_non_contiguous():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    for layout in ("transposed", "strided"):
        t = as_tensor(array, f32, layout)
        assert not t.is_contiguous() and t.tolist() == array.tolist()


def test_interp_expand_is_a_view_not_a_copy():
    # Regression: the interpreter's expand copied its broadcast, so a (4, 2**33) expand of
    # a (4, 1) tensor, sliced to two columns, tried to allocate 128 GiB (llvm computes it).
    b = GraphBuilder("expand_slice")
    x = b.input("x", TensorType(f32, (4, 1)))
    wide = b.op("expand", x, shape=[4, 2 ** 33])
    out = b.op("add", b.op("slice", wide, dim=1, start=0, stop=2), b.op("slice", wide, dim=1,
                                                                       start=2 ** 33 - 2,
                                                                       stop=2 ** 33))
    graph = b.build([out])
    verify(graph)
    xs = np.arange(4, dtype=np.float32).reshape(4, 1)
    (got,) = run(graph, [xs])
    np.testing.assert_array_equal(got, np.broadcast_to(2 * xs, (4, 2)))
    t = torch.from_numpy(xs)
    fn = get_backend("interp").compile_graph(graph, {})
    torch.testing.assert_close(fn(t)[0], (t.expand(4, 2 ** 33)[:, :2] * 2))
