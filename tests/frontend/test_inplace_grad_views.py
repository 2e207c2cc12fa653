"""In-place ops through a view of an intermediate under grad (eager's CopySlices),
compiled with eager's gradients (issue 33; Note [Writes through views under grad] in
refcomp/tracer/mutation.py).  Each case compares with eager (outputs, raises, every
gradient) through `.backward()` and through `torch.autograd.grad`."""

import pytest
import torch

import refcomp
from tests.frontend.test_inplace_grad import _args, _outcome, _same_as_eager


def _column_mul(x, w):
    h = x * 2
    h[:, 0].mul_(3)
    return h


def _row_add_operand_requires_grad(x, w):
    h = x * w
    h[1:].add_(w[1:] * x[1:])  # the written value requires grad too
    return h.sin()


def _flat_view_beside_base(x, w):
    h = x + w
    v = h.view(-1)
    v.mul_(2)
    return h * 1, v * 1


def _transposed_row(x, w):
    h = x * 2
    h.t()[0].mul_(w[0])
    return h


def _strided_slice(x, w):
    h = x * 2
    h[::2].mul_(w[0])
    return h


def _view_taken_before_base_written(x, w):
    h = x * 2
    r = h[0]
    h.mul_(w)  # r reads the new values, as eager's view does
    return r * 1, h


def _into_fresh_buffer_view(x, w):
    buf = torch.zeros(4, 4)
    buf[1:3].add_(x[1:3] * w[1:3])  # buf becomes part of the graph, as in eager
    return buf * 2


CAPTURED = [_column_mul, _row_add_operand_requires_grad, _flat_view_beside_base,
            _transposed_row, _strided_slice, _view_taken_before_base_written,
            _into_fresh_buffer_view]
SQUARE = _args(((4, 4), True), ((4, 4), True))


@pytest.mark.parametrize("f", CAPTURED, ids=lambda f: f.__name__)
def test_write_through_view_under_grad_is_captured(f):
    _same_as_eager(f, SQUARE)
    refcomp.reset()
    report = refcomp.explain(f, *SQUARE())
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)


@pytest.mark.parametrize("f", CAPTURED, ids=lambda f: f.__name__)
def test_autograd_grad_equals_eager(f):
    def grads(fn):
        x, w = SQUARE()
        out = fn(x, w)
        outs = out if isinstance(out, tuple) else (out,)
        weights = [torch.linspace(-1, 2, o.numel()).reshape(o.shape) for o in outs]
        loss = sum((o * k).sum() for o, k in zip(outs, weights))
        return torch.autograd.grad(loss, [x, w], allow_unused=True)

    refcomp.reset()
    want, got = grads(f), grads(refcomp.compile(f))
    for g, e in zip(got, want):
        assert (g is None) == (e is None)
        if e is not None:
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)


# --- eager refuses: the compiled call raises the same error ----------------------------------
def _view_saved_then_base_written(x, w):
    h = x * 2
    s = h[0].sin()  # sin saves h[0]
    h.mul_(w)
    return s


def _base_saved_then_view_written(x, w):
    h = x * 2
    s = h.sin()  # sin saves h
    h[0].mul_(2)
    return s


def _view_made_under_no_grad(x, w):
    h = x * 2
    with torch.no_grad():
        v = h[0]
    v.mul_(w[0])  # "A view was created in no_grad mode and is being modified inplace"
    return h


def _chunk_view(x, w):
    h = x * 2
    h.chunk(2)[0].mul_(2)  # a view of a function returning several views
    return h


@pytest.mark.parametrize("f", [_view_saved_then_base_written, _base_saved_then_view_written,
                               _view_made_under_no_grad, _chunk_view],
                         ids=lambda f: f.__name__)
def test_eager_refusal_raises_the_same(f):
    assert _outcome(f, SQUARE)[1] is not None  # eager raises
    _same_as_eager(f, SQUARE)


# --- autograd-silent writes stay eager's -----------------------------------------------------
def _write_through_detached_view(x, w):
    h = x * 2
    h.detach()[0].mul_(3)  # eager: h's values change, its gradient does not
    return h * w


def _write_under_no_grad_through_view(x, w):
    h = x * 2
    with torch.no_grad():
        h[0].mul_(3)
    return h * w


@pytest.mark.parametrize("f", [_write_through_detached_view, _write_under_no_grad_through_view],
                         ids=lambda f: f.__name__)
def test_silent_writes_keep_eagers_gradient(f):
    _same_as_eager(f, SQUARE)


@pytest.mark.parametrize("backend", ["llvm", "interp", "eager"])
def test_base_written_through_a_permuted_view_keeps_eagers_strides(backend):
    """The base's new value is the permuted view's written back through the inverse
    permutation; under grad the llvm backend handed that view of its buffer back as the
    output (strides (1, 3), eager's (2, 1)): the row-major fix of Note [Output layout]
    was skipped for graphs with a compiled backward (corpus
    grad_pow_scalar_saves_input_eager, found by this change)."""
    def f(x):
        h = x ** 2
        h.T.neg_()
        return h

    refcomp.reset()
    x = torch.randn(3, 2, requires_grad=True)
    got, want = refcomp.compile(f, backend=backend)(x), f(x)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want)


# --- item assignment under grad (eager: copy_ into a view, CopySlices) -----------------------
def _assign_row_from_operand(x, w):
    h = x * 2
    h[0] = w[0]
    return h.exp()


def _augmented_slice(x, w):
    h = x * w
    h[1:] += w[1:]  # a view's add_, then its assignment back
    return h


def _strided_assign_into_buffer(x, w):
    buf = torch.zeros(4, 4)
    buf[::2] = x[::2] * w[::2]
    return buf.sin()


def _assign_constant_into_grad_tensor(x, w):
    h = x * w
    h[:, 1:3] = 0.5
    return h


CAPTURED_ASSIGN = [_assign_row_from_operand, _augmented_slice, _strided_assign_into_buffer,
                   _assign_constant_into_grad_tensor]


@pytest.mark.parametrize("f", CAPTURED_ASSIGN, ids=lambda f: f.__name__)
def test_item_assignment_under_grad_is_captured(f):
    _same_as_eager(f, SQUARE)
    refcomp.reset()
    report = refcomp.explain(f, *SQUARE())
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)


def _assign_everything(x, w):
    h = x * 2
    h[:] = w  # eager: x.grad is zeros (the old value's gradient), not None
    return h


def _assign_into_saved(x, w):
    h = x * 2
    s = h.sin()
    h[0] = 1.0  # sin saved h: eager's backward raises
    return s


def _assign_into_leaf(x, w):
    x[0] = 1.0  # a leaf that requires grad: eager raises
    return x * w


@pytest.mark.parametrize("f", [_assign_everything, _assign_into_saved, _assign_into_leaf],
                         ids=lambda f: f.__name__)
def test_item_assignment_eager_semantics_kept(f):
    _same_as_eager(f, SQUARE)
