"""Eager's version checks of saved tensors (spec/autograd.md, Note [Saved by eager] in
ir/ops/registry.py): a graph input or output that eager's backward of an op saves, modified
in place after the graph, makes the backward raise eager's error; one it does not save does
not.  Each case runs one op in a compiled graph (a print breaks it), modifies its input or
its result in place afterwards, and compares raising and gradients with eager.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import refcomp
from ir.autodiff import differentiable_values, eager_saved
from ir.builder import GraphBuilder
from ir.types import TensorType, f32

# op forms on x (and y): eager saves the result (r), the input (x), both, or neither
OPS = {
    "exp": lambda x, y: torch.exp(x),  # result
    "sigmoid": lambda x, y: torch.sigmoid(x),  # result
    "tanh": lambda x, y: x.tanh(),  # result
    "sqrt": lambda x, y: (x * x + 1).sqrt(),  # result (the input is an intermediate)
    "log_softmax": lambda x, y: F.log_softmax(x, dim=-1),  # result
    "softmax": lambda x, y: x.softmax(0),  # result
    "relu": lambda x, y: torch.relu(x),  # result
    "sin": lambda x, y: torch.sin(x),  # input
    "log": lambda x, y: torch.log(x.abs() + 1),  # the input is an intermediate
    "abs": lambda x, y: x.abs(),  # input
    "gelu": lambda x, y: F.gelu(x),  # input
    "mul": lambda x, y: x * y,  # both operands
    "mul_scalar": lambda x, y: x * 3,  # nothing of the graph's
    "add": lambda x, y: x + y,  # nothing
    "div": lambda x, y: x / (y.abs() + 1),
    "neg": lambda x, y: -x,  # nothing
    "sum": lambda x, y: x.sum(0),  # nothing
    "mean": lambda x, y: x.mean(),  # nothing
    "var": lambda x, y: x.var(0),  # input
    "std": lambda x, y: x.std(0),  # input and result (built from var, sqrt and where)
    "norm1": lambda x, y: x.norm(p=1, dim=0),  # input and result (sum of abs)
    "leaky_relu": lambda x, y: F.leaky_relu(x, 0.1),  # input (built from where and mul)
    "amax": lambda x, y: x.amax(0),  # input and result
    "matmul": lambda x, y: x @ y.t(),  # both operands
    "layer_norm": lambda x, y: F.layer_norm(x, x.shape[-1:]),  # input
    "reshape": lambda x, y: x.reshape(-1),  # a view: nothing
    "cat": lambda x, y: torch.cat([x, y]),  # nothing
    "clamp": lambda x, y: x.clamp(-0.5, 0.5),  # input
    "topk": lambda x, y: x.topk(1, dim=0).values,  # indices (an aten call: its own node)
    "max_dim": lambda x, y: x.max(1).values,  # indices (built as a gather under autograd)
    "min_dim_keepdim": lambda x, y: x.min(0, keepdim=True)[0],  # (the same)
    "gather": lambda x, y: x.gather(1, torch.tensor([[0, 2], [1, 1], [3, 0]])),  # input
    # intermediates eager saves, x not: nothing is recomputed from x (Note [Caller
    # tensors eager does not save])
    "exp_sum": lambda x, y: x.exp().sum(0),
    "tanh_of_scaled": lambda x, y: (x * 3).tanh() + 1,
    "relu_of_sum_mean": lambda x, y: torch.relu(x + y).mean(),
    "clone_beside_sin": lambda x, y: x.clone() + 0 * x.sin(),  # the clone is x's value
    "clone_and_sin": lambda x, y: torch.stack([x.clone(), x.sin()]),
}


def _program(op, modify):
    def f(x, y):
        r = op(x, y)
        print(end="")  # a graph break: r is an output of the compiled graph
        {"x": x, "r": r}[modify].mul_(2)
        return r
    return f


def _run(fn):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    x, y = a * 1, b * 1  # not leaves, so they may be modified in place
    try:
        r = fn(x, y)
        return torch.autograd.grad(r.sum(), [a, b], allow_unused=True)
    except RuntimeError as e:
        return e


CASES = [(backend, name, modify)
         for backend in ("interp", "eager") for name in sorted(OPS) for modify in "xr"]


@pytest.mark.parametrize("backend,name,modify", CASES)
def test_in_place_change_after_the_graph_raises_as_eager(backend, name, modify):
    refcomp.reset()
    f = _program(OPS[name], modify)
    want, got = _run(f), _run(refcomp.compile(f, backend=backend))
    assert isinstance(got, RuntimeError) == isinstance(want, RuntimeError), (got, want)
    if isinstance(want, RuntimeError):
        assert str(got).startswith("one of the variables needed for gradient computation")
    else:
        for g, w in zip(got, want):
            assert (g is None) == (w is None)
            if w is not None:
                torch.testing.assert_close(g, w)


@pytest.mark.parametrize("name", ["log_softmax", "mul", "sin", "add", "div", "exp_sum"])
def test_in_place_change_after_the_graph_raises_as_eager_llvm(name):
    # the compiled Function's path, as interp's, with llvm's partition
    test_in_place_change_after_the_graph_raises_as_eager("llvm", name, "x")
    test_in_place_change_after_the_graph_raises_as_eager("llvm", name, "r")


def test_a_folded_clone_is_not_the_tensor_eager_saved():
    # The IR folds `x.clone()` into x (found by the gradient soak): sin saves x, the
    # clone is another tensor, so changing the clone in place raises nothing.
    def f(x):
        c = x.clone()
        s = x.sin()
        print(end="")
        c.mul_(2)
        return s, c

    for backend in ("interp", "eager"):
        refcomp.reset()
        want, got = _run_one(lambda x: sum(f(x))), _run_one(
            lambda x, g=refcomp.compile(f, backend=backend): sum(g(x)))
        assert not isinstance(want, RuntimeError)
        assert not isinstance(got, RuntimeError), got
        torch.testing.assert_close(got, want)


def test_eager_saved_follows_the_given_outputs_and_views():
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f32, (4,)))
    w = b.input("w", TensorType(f32, (4,)))
    e = b.exp(x)                       # saves its result e
    m = b.mul(b.reshape(w, shape=[4]), x)  # saves x (for w's gradient), and w's view
    s = b.add(x, w)                    # saves nothing
    g = b.build([e, b.reshape(e, shape=[2, 2]), m, s])
    diff = differentiable_values(g, [True, True])
    outs = g.outputs
    assert eager_saved(g, diff, [0]) == {outs[0], outs[1]}  # e and its view
    assert eager_saved(g, diff, [2]) == {x, w}
    assert eager_saved(g, diff, [3]) == set()
    # w does not require grad: mul saves w for x's gradient, not x
    diff = differentiable_values(g, [True, False])
    assert eager_saved(g, diff, [2]) == {w}


def test_in_place_change_inside_the_graph_of_a_saved_tensor_raises_as_eager():
    # m does not require grad; mul saved it for x's gradient; m.add_ in the same frame
    # breaks the graph there (eager runs it on the graph's output, which the compiled
    # graph saved), so the backward raises as eager's.
    def f(x):
        m = torch.ones(3, dtype=x.dtype)
        y = x * m
        m.add_(1)
        return y

    for backend in ("interp", "eager"):
        refcomp.reset()
        want, got = _run_one(f), _run_one(refcomp.compile(f, backend=backend))
        assert isinstance(want, RuntimeError) and isinstance(got, RuntimeError), got
        breaks = refcomp.explain(f, torch.ones(3, requires_grad=True) * 1).break_reasons
        assert any("saved for its backward" in str(b) for b in breaks), breaks


def _run_one(fn):
    x = torch.linspace(-1, 1, 3, dtype=torch.float64, requires_grad=True)
    try:
        return torch.autograd.grad(fn(x * 1).sum(), [x])
    except RuntimeError as e:
        return e


def test_every_op_with_a_vjp_records_what_eager_saves():
    from ir.ops.registry import RESULT, all_ops

    for op in all_ops():
        if op.vjp is None:
            continue
        assert op.saves is not None, f"{op.name}: no saves= (Note [Saved by eager])"
        for name, saved in op.saves.items():
            assert name in op.operands, (op.name, name)
            assert set(saved) <= set(op.operands) | {RESULT}, (op.name, saved)
