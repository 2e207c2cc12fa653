"""A clone under grad is a tensor of its own, with its own version counter (issue 33; Note
[Clones under grad], spec/autograd.md).

The tracer used to fold `w = x.clone()` into x's value, so the compiled backward and the
version checks could not tell the clone from x: `w = x.clone(); y = w * w`, a graph break,
then `w.add_(1)` ran a backward eager refuses (mul saved the clone), and `x.add_(1)` there
raised where eager's backward runs.  Each case compares with eager: whether the backward
raises, the start of its message, and the gradient.
"""

import pytest
import torch

import refcomp
from tests.breaks import graph_break


def _clone_written_after_break(x):
    w = x.clone()
    y = w * w  # MulBackward saves the clone w
    graph_break("between")
    w.add_(1)
    return y


def _source_written_after_break(x):
    w = x.clone()
    y = w * w
    graph_break("between")
    x.add_(1)  # nothing eager saved
    return y


def _clone_returned(x):
    w = x.clone()
    return w * w, w


def _source_returned(x):
    w = x.clone()
    return w * w, x


def _written_then_cloned_then_written(x):
    # corpus grad_empty_clone_written_twice_false_raise, shrunk: exp_ saves w's new value,
    # and the write into the clone w2 is no write into that value
    w = x * 2
    graph_break("between")
    w.exp_()
    w2 = w.clone()
    w2[..., ::2] += 1
    return w2


def _folded_identity_written_after_break(x):
    # `* 1` folds into exp's result, which the compiled backward reads; eager's v is
    # its own tensor (Note [Tensors the Function holds], refcomp/aliasing.py)
    v = x.exp() * 1
    graph_break("between")
    v.add_(1)
    return v


CASES = {f.__name__.lstrip("_"): f for f in [
    _clone_written_after_break, _source_written_after_break, _clone_returned,
    _source_returned, _written_then_cloned_then_written,
    _folded_identity_written_after_break]}


def _outcome(fn, after):
    """(error text or None, the gradient of the leaf)."""
    leaf = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3),
                       requires_grad=True)
    x = leaf * 1  # a non-leaf, so it may be changed in place
    try:
        out = fn(x)
        outs = out if isinstance(out, tuple) else (out,)
        if after is not None:
            with torch.no_grad():
                outs[after].add_(1)  # the caller changes an output in place
        sum(o.sum() for o in outs).backward()
    except RuntimeError as err:
        return str(err)[:80], None
    return None, leaf.grad


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("name, after", [(n, None) for n in CASES] +
                         [("clone_returned", 1), ("source_returned", 1)])
def test_backward_raises_as_eager(name, after, backend):
    fn = CASES[name]
    want = _outcome(fn, after)
    refcomp.reset()
    got = _outcome(refcomp.compile(fn, backend=backend), after)
    assert got[0] == want[0]
    if want[1] is not None:
        torch.testing.assert_close(got[1], want[1])


def test_eagers_error_is_the_one_expected():
    """The cases above compare with eager; this pins what eager does for the issue's case."""
    err, _ = _outcome(_clone_written_after_break, None)
    assert err is not None and err.startswith(
        "one of the variables needed for gradient computation has been modified by an")
    assert _outcome(_source_written_after_break, None)[0] is None


def test_a_write_into_a_clone_of_a_saved_result_is_captured():
    """The clone is not the tensor exp_ saved, so writing into it needs no break (RB010
    before: the folded clone was exp_'s result)."""
    def f(x):
        w = x * 2
        w.exp_()
        w2 = w.clone()
        w2[..., ::2] += 1
        return w2
    x = torch.randn(3, 4, requires_grad=True)
    report = refcomp.explain(f, x * 1)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_a_clone_without_grad_is_folded():
    """No output requires grad: the clone is folded into its operand as before (no copy
    node), and the caller still gets a tensor of its own."""
    def f(x):
        w = x.clone()
        return w, x + 1
    x = torch.randn(3, 4)
    report = refcomp.explain(f, x)
    assert report.graph_count == 1 and "copy" not in report.graphs[0]
    w, _ = refcomp.compile(f)(x)
    assert w.data_ptr() != x.data_ptr()
    torch.testing.assert_close(w, x)
