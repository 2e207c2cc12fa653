"""Worked examples moved out of spec/correctness.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_output_aliasing():
    """spec/correctness.md, "Output aliasing"."""
    import torch

    import refcomp

    def f(x0, x1):  # issue 11's minimal case: the clone after a break once came back as v0
        v0 = torch.take_along_dim(x1, x1.argmax(dim=0, keepdim=True), dim=0)
        v2 = v0.clone()
        v2.narrow(0, 0, 1).mul_(0.5)
        return torch.where(v0 > x1, v0, 0.0), v0

    def view_of_intermediate(x):
        y = x.abs()
        return y, y.t()

    x0, x1 = torch.randn(3, 4), torch.randn(3, 4)
    for backend in ("interp", "eager", "llvm"):
        refcomp.reset()
        got = refcomp.compile(f, backend=backend)(x0, x1)
        want = f(x0, x1)
        assert all(torch.equal(g, w) for g, w in zip(got, want))

        refcomp.reset()
        x = torch.randn(4)
        a, b, c = refcomp.compile(lambda x: (x.clone(), x * 2, x * 2), backend=backend)(x)
        assert a.data_ptr() != x.data_ptr() and b.data_ptr() != c.data_ptr()
        assert refcomp.compile(lambda x: x.float(), backend=backend)(x) is x

        refcomp.reset()
        y, yt = refcomp.compile(view_of_intermediate, backend=backend)(x0)
        assert yt.data_ptr() == y.data_ptr() and yt.stride() == (1, 4)


@as_module
def test_mutation_and_write_back():
    """spec/correctness.md, "Mutation and write-back"."""
    import torch

    import refcomp

    def f(x):
        t = x * 2
        v = t[1:]
        v.mul_(3)
        t.sum().item()            # a graph break (RB002; a print would be replayed, no break)
        v.add_(1)
        x[0].add_(1)
        return t, v

    for backend in ("interp", "eager", "llvm"):
        refcomp.reset()
        xe, xc = torch.randn(4, 4), None
        xc = xe.clone()
        want, got = f(xe), refcomp.compile(f, backend=backend)(xc)
        assert all(torch.allclose(g, w) for g, w in zip(got, want))
        assert torch.equal(xc, xe)  # the input after the call
        got[1].zero_()  # v is a view of t, as in eager
        assert torch.equal(got[0][1:], torch.zeros(3, 4))

    def g(x):
        t = x.exp()
        u = t.view(-1)
        u.mul_(2)                 # through a view of an intermediate: captured
        n = t.narrow(1, 1, 2)
        n.fill_(7)
        t.add_(1)                 # the base: its view n follows
        t[1::2, ::3] *= 2         # a strided slice, in place, then assigned back
        return t, n

    x = torch.randn(3, 4)
    report = refcomp.explain(g, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    for got, want in zip(refcomp.compile(g, backend="llvm")(x), g(x)):
        torch.testing.assert_close(got, want)

    def block(x, w):
        out = x * w
        out += x                  # `out += identity`: eager records add of the old value
        return out.relu_().exp()  # (relu_ saves its result: writing it again would raise)

    def saved(x, w):
        z = (x * w).sigmoid()     # sigmoid's backward saves z
        z.mul_(2)
        return z

    x, w = torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)
    block(x, w).sum().backward()
    want = x.grad, w.grad
    x.grad = w.grad = None
    refcomp.reset()
    report = refcomp.explain(block, x, w)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    refcomp.compile(block)(x, w).sum().backward()
    torch.testing.assert_close((x.grad, w.grad), want)
    def column(x, w):
        h = x * w
        h[:, 0].mul_(3)           # CopySlices in eager: captured, eager's gradients
        return h.sin()

    x2, w2 = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    want = torch.autograd.grad(column(x2, w2).sum(), [x2, w2])
    refcomp.reset()
    assert refcomp.explain(column, x2, w2).graph_break_count == 0
    got = torch.autograd.grad(refcomp.compile(column)(x2, w2).sum(), [x2, w2])
    torch.testing.assert_close(got, want)
    for fn in (saved, refcomp.compile(saved)):
        try:
            fn(x, w).sum().backward()
            raise AssertionError("eager raises")
        except RuntimeError as err:
            assert "modified by an inplace operation" in str(err)


@as_module
def test_exceptions():
    """spec/correctness.md, "Exceptions"."""
    import pytest
    import torch
    import torch.nn.functional as F

    import refcomp

    def f(inp, target, var, y):
        loss = F.gaussian_nll_loss(inp, target, var)
        y.add_(1)  # after the check: not written when it raises, as in eager
        return loss

    i, t, v = torch.randn(3, 4), torch.randn(3, 4), torch.rand(3, 4)
    for backend in ("interp", "eager", "llvm"):
        refcomp.reset()
        ex = refcomp.explain(f, i, t, v, torch.zeros(2), backend=backend)
        assert ex.graph_count == 1 and ex.graph_break_count == 0
        cf, y = refcomp.compile(f, backend=backend), torch.zeros(2)
        torch.testing.assert_close(cf(i, t, v, y), F.gaussian_nll_loss(i, t, v))
        with pytest.raises(ValueError, match="^var has negative entry/entries$"):
            cf(i, t, -v, y)
        assert y.tolist() == [1.0, 1.0]
