"""In-place writes through views of an intermediate are captured (Note [Writes through
views], refcomp/tracer/mutation.py; issue 33): the base takes the written elements and
every live view follows, equal to eager on every backend, in one graph."""

import logging

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import refcomp


def headline(x0, x1):  # issue 33's program: Graph Count 0 before
    v3 = F.elu(1.0 / (x0.abs() + 1))
    v5 = F.softmax(v3, -1)
    v8 = v3.clone()
    _u = v8.view(-1)
    _u.mul_(2)
    return v8, v5


def slice_then_transpose(x):
    t = x * 1.5
    s = t[1:]
    s.add_(10)
    d = t.transpose(0, 1)
    d.mul_(3)
    return t, s, d


def narrow_fill_then_base(x):
    t = x + 1
    n = t.narrow(1, 1, 2)
    n.fill_(7)              # an opaque ATen write through the view
    t.mul_(2)               # the base written: the view follows
    return n, t


def index_and_none(x):
    t = x.exp()
    row = t[1, None, ..., 1:3]
    row.relu_()
    row.sub_(0.5)
    return t, row


PROGRAMS = {
    "headline": (headline, lambda: (torch.randn(3, 4), torch.randn(3, 4))),
    "slice_then_transpose": (slice_then_transpose, lambda: (torch.randn(4, 4),)),
    "narrow_fill_then_base": (narrow_fill_then_base, lambda: (torch.randn(3, 4),)),
    "index_and_none": (index_and_none, lambda: (torch.randn(3, 5, 4),)),
}


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_write_through_a_view_is_one_graph_equal_to_eager(name, backend):
    fn, make = PROGRAMS[name]
    args = make()
    refcomp.reset()
    report = refcomp.explain(fn, *[a.clone() for a in args], backend=backend)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    mine = [a.clone() for a in args]
    theirs = [a.clone() for a in args]
    got = refcomp.compile(fn, backend=backend)(*mine)
    expected = fn(*theirs)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    for m, t in zip(mine, theirs):  # inputs as eager leaves them
        torch.testing.assert_close(m, t)


def test_densenet_style_block_in_eval_is_one_graph():
    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.BatchNorm2d(8)
            self.relu = nn.ReLU(inplace=True)
            self.conv = nn.Conv2d(8, 4, 3, padding=1)

        def forward(self, features):
            return self.conv(self.relu(self.norm(torch.cat(features, 1))))

    layer = Layer().eval()
    feats = [torch.randn(2, 4, 6, 6), torch.randn(2, 4, 6, 6)]
    with torch.no_grad():
        report = refcomp.explain(layer, feats)
        assert (report.graph_count, report.graph_break_count) == (1, 0)
        torch.testing.assert_close(refcomp.compile(layer)(feats), layer(feats))


def test_a_view_of_an_input_is_written_back():
    # tests/frontend/test_input_view_writes.py has the cases (Note [Writes through views
    # of a graph input]); before, this broke with RB010
    def writes_input_view(x):
        x.view(-1).mul_(2)
        return x + 1

    report = refcomp.explain(writes_input_view, torch.ones(2, 3))
    assert report.break_reasons == [] and report.graph_count == 1
    x, x_e = torch.ones(2, 3), torch.ones(2, 3)
    torch.testing.assert_close(refcomp.compile(writes_input_view)(x), writes_input_view(x_e))
    torch.testing.assert_close(x, x_e)


def _copy_cases():
    def into_intermediate(x, y):
        t = x * 2
        t.copy_(y)                  # y broadcast to t's shape
        return t + 1

    def into_a_slice(x, y):
        t = x.clone()
        t[1:].copy_(y[0])           # through a view: the base follows
        return t

    def into_the_input(x, y):
        x.copy_(y)                  # written back to the caller's tensor
        return x * 2

    def with_a_cast(x, y):
        t = x * 1
        t.copy_(y.int())
        return t

    return {"into_intermediate": (into_intermediate, (torch.randn(3, 4), torch.randn(4))),
            "into_a_slice": (into_a_slice, (torch.randn(3, 4), torch.randn(2, 4))),
            "into_the_input": (into_the_input, (torch.randn(3), torch.randn(3))),
            "with_a_cast": (with_a_cast, (torch.randn(3), torch.randn(3) * 5))}


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("name", sorted(_copy_cases()))
def test_copy_is_captured(name, backend):
    """Tensor.copy_ was on the opaque deny list (RB004): every fuzzer program left running
    wholly in eager by this session's fixes was one."""
    fn, args = _copy_cases()[name]
    refcomp.reset()
    report = refcomp.explain(fn, *[a.clone() for a in args], backend=backend)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    mine, theirs = [a.clone() for a in args], [a.clone() for a in args]
    torch.testing.assert_close(refcomp.compile(fn, backend=backend)(*mine), fn(*theirs))
    for m, t in zip(mine, theirs):
        torch.testing.assert_close(m, t)


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_overlapping_copy_raises_as_eager(backend):
    def f(x):
        x[1:].copy_(x[:-1])
        return x

    with pytest.raises(RuntimeError) as eager:
        f(torch.randn(4))
    refcomp.reset()
    with pytest.raises(RuntimeError) as compiled:
        refcomp.compile(f, backend=backend)(torch.randn(4))
    assert str(compiled.value) == str(eager.value)



def test_a_write_through_a_view_of_a_symbolic_size_tensor_breaks_with_its_reason(caplog):
    """A view of an intermediate with a symbolic size (automatic dynamic, the second
    call): its view steps ran on a meta tensor of int sizes, an internal error (RB018),
    where it is a write the IR does not take through views of symbolic sizes (RB010,
    Note [Writes through views]); corpus grad_empty_clone_written_twice_false_raise's
    second call."""
    def writes_a_slice(x):
        w = x * 2
        w[1:] *= 2
        return w

    refcomp.reset()
    refcomp.set_logs("graph_breaks")
    caplog.set_level(logging.INFO)
    try:
        f = refcomp.compile(writes_a_slice, backend="interp")
        for n in (4, 5):
            x = torch.randn(3, n)
            torch.testing.assert_close(f(x), writes_a_slice(x))
    finally:
        refcomp.set_logs("")
    breaks = [r.getMessage() for r in caplog.records if r.name == "refcomp.graph_breaks"]
    assert len(breaks) == 1 and "[RB010]" in breaks[0], breaks
