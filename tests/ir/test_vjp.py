"""Every op's VJP rule equals torch.autograd.grad (f64).

For each op with a `vjp`: build `out = op(inputs)` and the VJP graph for an
incoming gradient `g` with GraphBuilder, run it on the interpreter, and compare
each input gradient with `torch.autograd.grad(out, inputs, g)`.  An input the VJP
calls non-differentiable (None) must be one torch cannot differentiate either.
Spec: spec/ops.md, "Conventions" (VJP).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ir import GraphBuilder, TensorType, check, run
from ir.ops.registry import all_ops, lookup
from ir.types import f32, f64
from tests.ir.test_ops import (
    CASES,
    arrays,
    binary,
    cat_inputs,
    clamp_inputs,
    conv2d_inputs,
    embedding_inputs,
    expand_inputs,
    gather_inputs,
    index_add_inputs,
    index_select_inputs,
    matmul_inputs,
    max_pool2d_grad_safe,
    pad_inputs,
    permute_inputs,
    pool2d_inputs,
    reduce_inputs,
    reshape_inputs,
    scatter_add_inputs,
    shapes,
    slice_inputs,
    slice_scatter_inputs,
    squeeze_inputs,
    to_torch,
    unary,
    unsqueeze_inputs,
    where_inputs,
    with_attrs,
)

F64 = (f64,)
POSITIVE = {"lo": 0.125, "hi": 6.0}


@st.composite
def nonzero_divisor(draw):
    (a, ta), (b, tb) = draw(binary(F64))[0]
    return [(a, ta), (np.where(np.abs(b) < 0.25, 1.5, b), tb)], {}


@st.composite
def pow_inputs(draw):
    shape = draw(shapes())
    base = draw(arrays(f64, shape, lo=0.25, hi=3.0))
    exponent = draw(arrays(f64, draw(st.sampled_from([shape, ()])), lo=-2.0, hi=3.0))
    return [(base, f64), (exponent, f64)], {}


@st.composite
def cast_inputs(draw):
    [(x, dt)], _ = draw(unary(F64))
    return [(x, dt)], {"dtype": draw(st.sampled_from([f32, f64]))}


@st.composite
def softmax_inputs(draw):
    shape = draw(shapes())
    rank = max(len(shape), 1)
    return [(draw(arrays(f64, shape, lo=-3, hi=3)), f64)], {
        "dim": draw(st.integers(-rank, rank - 1))}


@st.composite
def norm_inputs(draw, bias=True):
    shape = draw(shapes(min_rank=1, min_side=1))
    k = draw(st.integers(1, len(shape)))
    tail = shape[len(shape) - k:]
    inputs = [(draw(arrays(f64, shape, lo=-3, hi=3)), f64),
              (draw(arrays(f64, tail, lo=-2, hi=2)), f64)]
    if bias:
        inputs.append((draw(arrays(f64, tail, lo=-2, hi=2)), f64))
    return inputs, {"normalized_ndim": k, "eps": draw(st.sampled_from([1e-5, 0.1]))}


@st.composite
def batch_norm_inputs(draw):
    shape = draw(shapes(min_rank=2, min_side=1))
    c = (shape[1],)
    return [(draw(arrays(f64, shape, lo=-3, hi=3)), f64),
            (draw(arrays(f64, c, lo=-1, hi=1)), f64),
            (draw(arrays(f64, c, lo=0.25, hi=2)), f64),
            (draw(arrays(f64, c, lo=-2, hi=2)), f64),
            (draw(arrays(f64, c, lo=-2, hi=2)), f64)], {"eps": 1e-5}


def _batch_norm(x, mean, var, weight, bias, eps):
    # torch refuses gradients for the statistics (native_batch_norm): the same formula.
    shape = (1, -1) + (1,) * (x.dim() - 2)
    scale = (weight / torch.sqrt(var + eps)).reshape(shape)
    return (x - mean.reshape(shape)) * scale + bias.reshape(shape)


# torch functions for ops without a CASES entry (composites are tested by the passes).
TORCH_FNS = {
    "softmax": lambda x, dim: torch.softmax(x, dim),
    "log_softmax": lambda x, dim: torch.log_softmax(x, dim),
    "layer_norm": lambda x, w, b, normalized_ndim, eps: torch.nn.functional.layer_norm(
        x, w.shape, w, b, eps),
    "rms_norm": lambda x, w, normalized_ndim, eps: torch.nn.functional.rms_norm(
        x, w.shape, w, eps),
    "batch_norm": _batch_norm,
}

# Ops with no VJP, and why; every registered op is either here or in VJP_CASES.
NO_GRADIENT = {
    **{name: "result is bool or integer" for name in (
        "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
        "logical_not", "isnan", "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor",
        "bitwise_left_shift", "bitwise_right_shift", "any", "all", "argmax", "argmin")},
    **{name: "no tensor operands" for name in ("full", "arange", "constant", "rand", "randn",
                                                        "dropout_mask", "size_value")},
    "floor_divide": "torch has no derivative for floor_divide either",
    "stop_gradient": "passes no gradient: joint() stops there (Note [Stopped gradients])",
    "fused": "a fusion region: differentiation happens before fusion",
    "aten": "an opaque torch call: the IR has no rule for it, torch's autograd must",
    **{name: "complex only: gradients are taken after lower_complex (spec/ir.md)"
       for name in ("complex", "conj", "angle")},
    **{name: "a backward op: double backward is not supported (create_graph=True raises)"
       for name in ("conv2d_grad_input", "conv2d_grad_weight", "max_pool2d_grad",
                    "avg_pool2d_grad")},
}


VJP_CASES = {
    "neg": unary(F64), "abs": unary(F64), "relu": unary(F64), "sign": unary(F64),
    "copy": unary(F64),
    "floor": unary(F64), "ceil": unary(F64), "round": unary(F64), "trunc": unary(F64),
    "exp": unary(F64), "log": unary(F64, **POSITIVE), "log1p": unary(F64, **POSITIVE),
    "expm1": unary(F64), "sqrt": unary(F64, **POSITIVE), "rsqrt": unary(F64, **POSITIVE),
    "sin": unary(F64), "cos": unary(F64), "tanh": unary(F64), "sigmoid": unary(F64),
    "erf": unary(F64), "silu": unary(F64), "reciprocal": unary(F64, **POSITIVE),
    "gelu": with_attrs(unary(F64), st.fixed_dictionaries(
        {"approximate": st.sampled_from(["none", "tanh"])})),
    "add": binary(F64), "sub": binary(F64), "mul": binary(F64), "div": nonzero_divisor(),
    "remainder": nonzero_divisor(), "fmod": nonzero_divisor(), "pow": pow_inputs(),
    "div_floor": nonzero_divisor(),
    "maximum": binary(F64, lo=-2, hi=2), "minimum": binary(F64, lo=-2, hi=2),
    "atan2": binary(F64, lo=0.5, hi=3.0),
    "where": where_inputs(F64), "clamp": clamp_inputs(F64), "cast": cast_inputs(),
    "sum": reduce_inputs(F64), "mean": reduce_inputs(F64), "amax": reduce_inputs(F64),
    "amin": reduce_inputs(F64), "prod": reduce_inputs(F64),
    "var": reduce_inputs(F64, st.fixed_dictionaries({"correction": st.integers(0, 1)})),
    "reshape": reshape_inputs(F64), "permute": permute_inputs(F64),
    "slice": slice_inputs(F64), "slice_scatter": slice_scatter_inputs(F64),
    "squeeze": squeeze_inputs(F64),
    "unsqueeze": unsqueeze_inputs(F64), "expand": expand_inputs(F64), "cat": cat_inputs(F64),
    "pad": pad_inputs(F64), "matmul": matmul_inputs(F64),
    "index_select": index_select_inputs(F64), "gather": gather_inputs(F64),
    "index_add": index_add_inputs(F64), "scatter_add": scatter_add_inputs(F64),
    "embedding": embedding_inputs(F64), "conv2d": conv2d_inputs(F64),
    "max_pool2d": max_pool2d_grad_safe(F64), "avg_pool2d": pool2d_inputs(avg=True, dtypes=F64),
    "softmax": softmax_inputs(), "log_softmax": softmax_inputs(),
    "layer_norm": norm_inputs(), "rms_norm": norm_inputs(bias=False),
    "batch_norm": batch_norm_inputs(),
}


def test_every_vjp_has_a_case():
    with_vjp = {op.name for op in all_ops() if op.vjp is not None}
    # the complex views' VJPs: against torch in tests/frontend/test_complex_tensors.py
    assert sorted(with_vjp - set(VJP_CASES) - {"view_as_real", "view_as_complex"}) == []
    assert sorted(set(VJP_CASES) - with_vjp) == [], "VJP_CASES names ops without a vjp"


def test_every_op_has_a_vjp_or_a_reason():
    names = {op.name for op in all_ops()}
    assert sorted(names - set(VJP_CASES) - set(NO_GRADIENT) -
                  {"view_as_real", "view_as_complex"}) == []
    assert sorted(set(NO_GRADIENT) & set(VJP_CASES)) == []
    assert sorted(set(NO_GRADIENT) - names) == []


def _torch_grads(name, inputs, attrs, g):
    torch_fn = TORCH_FNS[name] if name in TORCH_FNS else CASES[name][0]
    tensors = [to_torch(a, dt) for a, dt in inputs]
    wants = [t.is_floating_point() for t in tensors]
    for t, w in zip(tensors, wants):
        t.requires_grad_(w)
    out = torch_fn(*tensors, **attrs)
    grads = torch.autograd.grad(out, [t for t, w in zip(tensors, wants) if w],
                                torch.from_numpy(g).to(out.dtype), allow_unused=True)
    it = iter(grads)
    return [next(it) if w else None for w in wants]


def _ir_grads(name, inputs, attrs, g):
    b = GraphBuilder("vjp")
    xs = [b.input(f"x{i}", TensorType(dt, a.shape)) for i, (a, dt) in enumerate(inputs)]
    out = b.op(name, *xs, **attrs)
    node_attrs = b.nodes[-1].attrs
    gv = b.input("g", out.type)
    grads = lookup(name).vjp(b, gv, out, *xs, **node_attrs)
    assert len(grads) == len(xs), f"{name}: vjp returned {len(grads)} grads for {len(xs)} inputs"
    present = [v for v in grads if v is not None]
    for x, v in zip(xs, grads):
        if v is not None:
            assert v.type == x.type, f"{name}: gradient type {v.type} for input {x.type}"
    graph = check(b.build(present))
    results = iter(run(graph, [a for a, _ in inputs] + [g]))
    return [next(results) if v is not None else None for v in grads], out.type


@pytest.mark.parametrize("name", sorted(VJP_CASES))
def test_vjp_equals_torch_autograd(name):
    strategy = VJP_CASES[name]

    @settings(max_examples=20,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(strategy, st.randoms(use_true_random=False))
    def check_case(case, rnd):
        inputs, attrs = case
        b = GraphBuilder()
        xs = [b.input(f"x{i}", TensorType(dt, a.shape)) for i, (a, dt) in enumerate(inputs)]
        try:
            out_type = b.op(name, *xs, **attrs).type
        except (TypeError, ValueError):
            assume(False)  # ill-typed for this op
        shape = tuple(int(d) for d in out_type.shape)
        g = np.array([rnd.uniform(-2, 2) for _ in range(int(np.prod(shape)))],
                     dtype=out_type.dtype.np).reshape(shape)
        try:
            expected = _torch_grads(name, inputs, attrs, g)
        except (RuntimeError, IndexError):
            assume(False)  # torch rejects the input (e.g. amax over an empty dim)
        actual, _ = _ir_grads(name, inputs, attrs, g)
        for i, (a, e) in enumerate(zip(actual, expected)):
            if e is None:
                # torch may also report None for an unused input; refcomp must then
                # have either nothing or zeros.
                assert a is None or not np.any(a), f"{name}: input {i} has a gradient"
                continue
            assert a is not None, f"{name}: no gradient for input {i}, torch has one"
            np.testing.assert_allclose(a, e.double().numpy(), rtol=1e-7, atol=1e-9,
                                       equal_nan=True, err_msg=f"{name} input {i} {attrs}")

    check_case()


@pytest.mark.parametrize("values", [[2.0, 3.0, 4.0], [0.0, 3.0, 4.0], [0.0, 0.0, 4.0]])
def test_prod_vjp_at_zeros(values):
    # One zero: only it gets a gradient (the product of the others); two zeros: none.
    x = np.array(values)
    (grad,), _ = _ir_grads("prod", [(x, f64)], {"dims": [], "keepdim": False}, np.array(1.0))
    t = torch.tensor(values, requires_grad=True)
    (expected,) = torch.autograd.grad(torch.prod(t), [t])
    assert grad.tolist() == expected.tolist()
