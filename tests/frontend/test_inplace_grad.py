"""In-place ops on tensors that take part in autograd, compiled as eager runs them (issue 33).

An in-place op on a non-view intermediate that requires grad (`out += identity`,
`ReLU(inplace=True)` after a BatchNorm) is captured: eager's autograd records it as the
out-of-place op on the old value, which is what the functionalized IR differentiates.
Each case compares with eager: the outputs, whether the forward or the backward raises
(eager's "modified by an inplace operation", "a leaf Variable that requires grad"), and
every gradient.
"""

import pytest
import torch
import torch.nn as nn

import refcomp
from bench.models import BasicBlock


def _outcome(fn, make_args):
    """(outputs, error text or None, gradients of the inputs that require grad)."""
    args = make_args()
    try:
        out = fn(*args)
        loss = sum(o.float().pow(2).sum() for o in (out if isinstance(out, tuple) else (out,))
                   if o.requires_grad)
        if isinstance(loss, torch.Tensor):
            loss.backward()
    except RuntimeError as err:
        return None, str(err)[:90], None  # eager's message (then tensor details differ)
    outs = tuple(o.detach() for o in (out if isinstance(out, tuple) else (out,)))
    return outs, None, [a.grad for a in args if a.requires_grad]


def _same_as_eager(f, make_args):
    torch.manual_seed(0)
    want = _outcome(f, make_args)
    refcomp.reset()
    torch.manual_seed(0)
    got = _outcome(refcomp.compile(f), make_args)
    assert got[1] == want[1]
    if want[0] is not None:
        torch.testing.assert_close(got[0], want[0])
        assert [g is None for g in got[2]] == [g is None for g in want[2]]
        for g, w in zip(got[2], want[2]):
            if w is not None:
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def _args(*shapes_rg):
    def make():
        g = torch.Generator().manual_seed(1)
        return [torch.randn(*s, generator=g).requires_grad_(rg) for s, rg in shapes_rg]
    return make


# --- in-place ops eager allows under grad: captured, eager's gradients ----------------------
def _relu_then_op(x, w):
    y = x * w
    y.relu_()  # relu_'s result requires grad, and what follows it must still record
    return y.exp()


def _add_residual(x, w):
    out = x * w  # (not tanh: its backward saves its result, and eager then raises)
    out += x  # `out += identity`: both require grad
    return out.relu()


def _add_into_buffer(x, w):
    buf = torch.zeros(4)
    buf.add_(x * w)  # a value that requires grad written into a fresh tensor
    return buf * 2


def _inplace_chain(x, w):
    y = x * w
    y.mul_(x)  # mul_ saves its operands' old values, not y's new one
    y.add_(1)
    return y.sin()


def _copy_over_grad(x, w):
    y = x * 2
    y.copy_(w)  # eager: x.grad is zeros (CopyBackwards), not None
    return y.exp()


def test_copy_over_a_tensor_that_requires_grad_gives_eagers_zero_gradient():
    _same_as_eager(_copy_over_grad, _args(((4,), True), ((4,), True)))


CAPTURED = [_relu_then_op, _add_residual, _add_into_buffer, _inplace_chain]


@pytest.mark.parametrize("f", CAPTURED, ids=lambda f: f.__name__)
def test_inplace_under_grad_is_captured_with_eagers_gradients(f):
    make = _args(((4,), True), ((4,), True))
    _same_as_eager(f, make)
    refcomp.reset()
    report = refcomp.explain(f, *make())
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)


# --- eager raises: the compiled call raises the same error ----------------------------------
def _sigmoid_result_modified(x, w):
    z = (x * w).sigmoid()  # sigmoid's backward saves its result z
    z.mul_(2)
    return z


def _relu_result_modified(x, w):
    z = x * w
    z.relu_()  # relu_'s backward saves its result
    z.add_(1)
    return z


def _operand_saved_by_mul(x, w):
    y = x * 2
    z = y * w  # mul saves y for w's gradient
    y.add_(1)
    return z


def _leaf_made_in_the_frame(x, w):
    u = torch.ones(4, requires_grad=True)
    u.relu_()  # eager: a leaf Variable that requires grad is used in an in-place operation
    return u * x


def _input_leaf(x, w):
    w.add_(1)
    return x * w


RAISING = [_sigmoid_result_modified, _relu_result_modified, _operand_saved_by_mul,
           _leaf_made_in_the_frame, _input_leaf]


@pytest.mark.parametrize("f", RAISING, ids=lambda f: f.__name__)
def test_inplace_eager_refuses_raises_the_same(f):
    make = _args(((4,), True), ((4,), True))
    assert _outcome(f, make)[1] is not None  # eager raises
    _same_as_eager(f, make)


# --- gradients cut by no_grad / detach stay cut ---------------------------------------------
def _accumulate_under_no_grad(x, w):
    buf = torch.zeros(4)
    with torch.no_grad():
        buf.add_(w)  # buf does not require grad: w gets no gradient through it
    return buf * x


def _add_into_detached_copy(x, w):
    d = x.detach().clone()
    d.add_(w)  # gradient reaches w, not x
    return d * 3


def _assign_under_no_grad(x, w):
    buf = torch.zeros(4)
    with torch.no_grad():
        buf[1:] = w[1:]  # item assignment
    return buf * x


def _opaque_write_under_no_grad(x, w):
    buf = torch.zeros(4)
    with torch.no_grad():
        buf.addcmul_(w, x)  # an in-place op the table has no entry for (an opaque call)
    return buf * x


@pytest.mark.parametrize("f", [_accumulate_under_no_grad, _add_into_detached_copy,
                               _assign_under_no_grad, _opaque_write_under_no_grad],
                         ids=lambda f: f.__name__)
def test_inplace_keeps_gradient_cuts(f):
    _same_as_eager(f, _args(((4,), True), ((4,), True)))


def test_leaf_made_in_the_frame_is_returned_as_a_leaf():
    def f(x):
        u = torch.ones(3, requires_grad=True)
        return u, u * x

    refcomp.reset()
    got = refcomp.compile(f)(torch.randn(3))
    want = f(torch.randn(3))
    assert [(t.requires_grad, t.is_leaf) for t in got] == \
        [(t.requires_grad, t.is_leaf) for t in want]


# --- models ---------------------------------------------------------------------------------
def _stem():
    return nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4),
                         nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))


@pytest.mark.parametrize("make", [_stem, lambda: BasicBlock(4, 4), lambda: BasicBlock(4, 8, 2)],
                         ids=["stem", "basic_block", "basic_block_downsample"])
def test_training_step_with_inplace_ops_is_one_graph_with_eagers_gradients(make):
    """ResNet's stem (BatchNorm, ReLU(inplace=True), then max-pool) and basic block
    (`out += identity`): the reverted first version lost requires_grad after the
    in-place op, so the max-pool after the stem's relu_ cut every gradient before it
    (resnet_tiny's conv1.weight)."""
    torch.manual_seed(0)
    model, twin = make().train(), make().train()
    twin.load_state_dict(model.state_dict())
    x = torch.randn(2, 3 if make is _stem else 4, 8, 8)
    want = model(x)
    want.pow(2).mean().backward()
    refcomp.reset()
    got = refcomp.compile(twin)(x)
    got.pow(2).mean().backward()
    torch.testing.assert_close(got, want)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        assert q.grad is not None, name
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)
    refcomp.reset()
    report = refcomp.explain(make().train(), x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
