"""Torch calls without an IR rule land in the graph as opaque `aten` nodes.

spec/tracer.md, "Opaque torch calls": typed on meta tensors, run by ATen on every
backend, schema mutation and views honoured, refusals named.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import refcomp

BACKENDS = ["interp", "eager", "llvm"]


def explain(fn, *args, backend="llvm"):
    refcomp.reset()
    return refcomp.explain(fn, *args, backend=backend)


def ops_in(report) -> dict:
    return report.ops_per_graph[0] if report.ops_per_graph else {}


def mixed(x, y, z):
    a = torch.addmm(x, y, z, beta=0.5)
    b = torch.addcmul(a, y, z, value=2.0)
    c = b.clamp_min(0.1) + 1  # clamp_min: a Tensor method without an entry
    v, m = torch.var_mean(c, dim=1)
    return c * 2, v, m, torch.take_along_dim(c, torch.argsort(c, dim=1), dim=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ops_without_an_ir_rule_are_captured_and_equal_eager(backend):
    args = [torch.randn(3, 3) for _ in range(3)]
    report = explain(mixed, *args, backend=backend)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert ops_in(report)["aten"] >= 4
    for got, want in zip(report.result, mixed(*args)):
        torch.testing.assert_close(got, want)


def test_opaque_nodes_print_their_op_and_constant_arguments():
    report = explain(lambda x: torch.addcmul(x, x, x, value=0.25), torch.randn(2))
    assert 'fn="torch.addcmul"' in report.graphs[0]
    assert 'args="T[0], T[0], T[0], value=0.25"' in report.graphs[0]


def test_in_place_method_writes_the_callers_tensor():
    def f(x, y):
        x.addcmul_(y, y, value=2.0)
        return x * 1

    x, y = torch.randn(4), torch.randn(4)
    xe = x.clone()
    want = f(xe, y)
    report = explain(f, x, y)
    assert report.graph_break_count == 0
    torch.testing.assert_close(x, xe)
    torch.testing.assert_close(report.result, want)


def test_out_argument_is_written_and_returned():
    def f(a, b, o):
        r = torch.addmm(a, b, b, out=o)
        return r

    a, b = torch.randn(2, 2), torch.randn(2, 2)
    o = torch.empty(2, 2)
    report = explain(f, a, b, o)
    assert report.graph_break_count == 0
    torch.testing.assert_close(o, torch.addmm(a, b, b))
    assert report.result is o  # torch returns `out` itself


def test_returned_view_aliases_the_input_as_in_eager():
    def f(x):
        return torch.diagonal(x, 0, 0, 1)

    x = torch.randn(3, 3)
    report = explain(f, x)
    assert report.graph_break_count == 0
    torch.testing.assert_close(report.result, f(x))
    report.result.fill_(7.0)  # eager's diagonal is a view: so is refcomp's
    assert torch.equal(torch.diagonal(x), torch.full((3,), 7.0))


def test_in_place_op_on_an_opaque_view_breaks_but_stays_correct():
    def f(x):  # (diagonal is index maps now, a write through it captured: test_writes_under_grad)
        d = x.clone()
        v = d.unfold(1, 2, 2)
        v.add_(1)  # d changes through its view in eager
        return d

    x = torch.randn(3, 4)
    report = explain(f, x)
    torch.testing.assert_close(report.result, f(x))
    assert report.graph_break_count >= 1 and report.break_reasons[0]["id"] == "RB010"


def test_named_tuple_fields_of_results():
    def f(x):
        m = torch.max(x, 1)
        k = torch.kthvalue(x, 2, 1)
        return m.values, m.indices, k.values, k.indices

    x = torch.randn(3, 4)
    report = explain(f, x)
    assert report.graph_break_count == 0
    for got, want in zip(report.result, f(x)):
        torch.testing.assert_close(got, want)


_GEN = torch.Generator().manual_seed(0)


@pytest.mark.parametrize("fn, rid, names", [
    (lambda x: torch.argwhere(x) + 0, "RB004", "torch.argwhere"),
    (lambda x: torch.poisson(x.abs(), generator=_GEN) * 2, "RB004", "generator object"),
    (lambda x: x.sum() if x.is_same_size(x) else x, "RB002", "is_same_size returns bool"),
    # complex32 is extern-only (c32): an IR op given one refuses it
    (lambda x: x.chalf() * 2, "RB013", "takes no c32 values"),
])
def test_refusals_break_with_a_reason_naming_the_op(fn, rid, names):
    x = torch.rand(6)
    report = explain(fn, x)
    assert report.graph_break_count >= 1
    first = report.break_reasons[0]
    assert first["id"] == rid and names in first["reason"], first
    torch.manual_seed(0)
    got = report.result
    assert got.shape == fn(x).shape


def test_calls_that_change_global_state_are_not_run_while_tracing():
    def f(x):
        torch.seed()  # a fresh nondeterministic seed (torch.manual_seed is in the graph)
        return x + 1

    report = explain(f, torch.zeros(2))
    assert report.graph_break_count >= 1


def test_symbolic_sizes_are_specialized_for_opaque_calls():
    def f(x):
        return torch.cumsum(x, 0).clamp_min(0.0)

    cf = refcomp.compile(f, dynamic=True)
    for n in (4, 6):
        x = torch.randn(n, 3)
        torch.testing.assert_close(cf(x), f(x))


def test_an_opaque_call_on_an_automatic_dynamic_size_breaks_instead_of_recompiling():
    def f(x):
        return torch.cumsum(x * 2, 0).clamp_min(0.0) + 1

    refcomp.reset()
    cf = refcomp.compile(f, backend="eager")
    for n in (4, 6, 7, 9, 11):
        x = torch.randn(n, 3)
        torch.testing.assert_close(cf(x), f(x))
    # The size became a symbol after one recompile; the opaque cumsum then ran at a break
    # (it specialized the size and recompiled per size, up to the limit, before).
    recompiles = refcomp.stats()["recompiles"]
    assert max(len(m) for m in recompiles.values()) <= 2, recompiles


class Unlisted(nn.Module):
    """Built-in modules without a module-table entry run their forward inlined."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Hardswish(), nn.PReLU(),
                                  nn.ModuleDict({"n": nn.GroupNorm(2, 8)})["n"])

    def forward(self, x):
        return self.body(x)


def test_unlisted_torch_nn_modules_and_functions_are_inlined():
    m = Unlisted().eval()
    x = torch.randn(3, 4)
    report = explain(m, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, m(x))

    def g(x, t):
        y = F.interpolate(x, scale_factor=2.0, mode="nearest")
        return F.cross_entropy(y.flatten(1), t), F.scaled_dot_product_attention(x, x, x)

    args = (torch.randn(2, 2, 3, 3), torch.tensor([0, 5]))
    report = explain(g, *args)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    for got, want in zip(report.result, g(*args)):
        torch.testing.assert_close(got, want)


def test_arguments_a_table_entry_does_not_model_are_not_dropped():
    # Regression: the unary entries ignored extra arguments, so round(decimals=3) rounded
    # to integers and exp(out=o) left o unwritten.  Such calls now become opaque nodes.
    def f(x, o):
        torch.exp(x, out=o)
        return torch.round(x, decimals=3), x.round(decimals=-1)

    x = torch.randn(5) * 100
    o, oe = torch.empty(5), torch.empty(5)
    want = f(x, oe)
    report = explain(f, x, o)
    assert report.graph_break_count == 0
    for got, exp in zip(report.result, want):
        torch.testing.assert_close(got, exp)
    torch.testing.assert_close(o, oe)


def test_an_unused_opaque_call_still_raises_as_eager_does():
    # Regression (fuzzer): an unused `take` out of range was removed as dead code, so the
    # compiled call returned where eager raised.
    def f(x):
        x.take(torch.tensor([0, 1]))
        return x + 1

    cf = refcomp.compile(f, backend="eager")
    with pytest.raises(IndexError):
        f(torch.randn(1))
    with pytest.raises(IndexError):
        cf(torch.randn(1))


def _resumed_take(x, idx):
    y = x * 2
    n = y.sum().item()  # a break: what follows is a resume function
    x.take(idx)  # unused; raises for an index out of range
    return y + n


def _resumed_cholesky(x):
    y = x * 2
    n = y.sum().item()
    torch.linalg.cholesky(x)  # unused; raises for a matrix that is not positive definite
    return y + n


def _returns_constant(x, idx):
    x.take(idx)
    return 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, good, bad, error", [
    (_resumed_take, (torch.randn(6), torch.tensor([0, 1])),
     (torch.randn(6), torch.tensor([0, 9])), IndexError),
    (_resumed_cholesky, (torch.eye(2),), (-torch.eye(2),), RuntimeError),
    (_returns_constant, (torch.randn(6), torch.tensor([0, 1])),
     (torch.randn(6), torch.tensor([0, 9])), IndexError),
])
def test_an_unused_opaque_call_in_a_resumed_segment_still_raises(fn, good, bad, error, backend):
    # Regression: a segment whose graph had no live tensor to hand on was not run at all
    # (no graph was built), so an unused call that raises in eager was dropped.  Here the
    # second call also changes the Python number `n`, so the resume function recompiles
    # with `n` opaque and breaks again right after the unused call.
    refcomp.reset()
    cf = refcomp.compile(fn, backend=backend)
    torch.testing.assert_close(cf(*good), fn(*good))
    with pytest.raises(error):
        fn(*bad)
    with pytest.raises(error):
        cf(*bad)


def test_an_unused_in_place_opaque_call_in_a_resumed_segment_writes_its_operand():
    def f(x, idx):
        y = x * 2
        n = y.sum().item()
        x.index_fill_(0, idx, 7.0)  # unused result; the write must happen
        return y + n

    refcomp.reset()
    cf = refcomp.compile(f, backend="llvm")
    for seed in range(3):
        torch.manual_seed(seed)
        x, idx = torch.randn(5), torch.tensor([1, 3])
        xe = x.clone()
        torch.testing.assert_close(cf(x, idx), f(xe, idx))
        torch.testing.assert_close(x, xe)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_writes_nothing(backend):
    # aten::sort's TorchScript list overloads (`sort.Tensor(Tensor(a!)[] self)`) write
    # their list; Tensor.sort writes nothing.  Counted as a write, it broke every sort of
    # a tensor requiring grad (RB010) and wrote the operand back otherwise.
    def f(x):
        v, i = x.sort(0)
        return v * 2, i

    x = torch.randn(4, 3)
    version = x._version
    report = explain(f, x, backend=backend)
    assert report.graph_break_count == 0, report
    assert x._version == version
    leaf = torch.randn(4, 3, requires_grad=True)
    report = explain(f, leaf, backend=backend)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    got = refcomp.compile(f, backend=backend)(leaf)
    want = f(leaf)
    torch.testing.assert_close(got, want)
    got[0].sum().backward()
    compiled_grad, leaf.grad = leaf.grad, None
    want[0].sum().backward()
    torch.testing.assert_close(compiled_grad, leaf.grad)
