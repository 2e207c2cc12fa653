"""Classes made inside the traced code and custom autograd Functions applied there
(spec/tracer.md, "Classes made in the frame"; Note [Classes made in the frame] in
refcomp/tracer/classes.py)."""

import torch

import refcomp


def masked_like(x, mask):
    # torch.masked's reductions define a Function subclass on every call and apply it only
    # to MaskedTensors: with a plain tensor the class is made and never used.
    def helper(t, m):
        return torch.where(m, t, torch.zeros_like(t))

    class Combine(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t, m):
            ctx.save_for_backward(m)
            ctx.mark_non_differentiable(m)
            return helper(t, m)

        @staticmethod
        def backward(ctx, g):
            return g, None

    if isinstance(x, Combine):  # never: a tensor is not an instance of it
        return x
    return helper(x, mask).sum(0)


def test_a_class_made_in_the_frame_is_traced_without_a_break():
    x, mask = torch.randn(3, 4), torch.rand(3, 4) > 0.5
    report = refcomp.explain(masked_like, x, mask)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, masked_like(x, mask))


def clamp_apply(x, lo):
    class Clamp(torch.autograd.Function):
        scale = 2.0

        @staticmethod
        def forward(ctx, t, low):
            ctx.low = low
            ctx.save_for_backward(t)
            return t.clamp_min(ctx.low) * Clamp.scale, t

        @staticmethod
        def backward(ctx, g, g2):
            (t,) = ctx.saved_tensors
            return g * (t > ctx.low) * Clamp.scale + g2, None

    y, same = Clamp.apply(x, lo)
    return y + 1, same


def test_apply_without_grad_inlines_forward():
    x = torch.randn(5)
    report = refcomp.explain(clamp_apply, x, 0.0)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    got, same = report.result
    want, want_same = clamp_apply(x, 0.0)
    torch.testing.assert_close(got, want)
    # forward returned its input: autograd hands back a new tensor sharing its storage
    assert same is not x and torch._C._is_alias_of(same, x) and want_same is not x
    torch.testing.assert_close(same, x)


def test_apply_with_an_input_that_requires_grad_breaks_naming_the_class():
    x = torch.randn(5, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    report = refcomp.explain(clamp_apply, x, 0.0)
    assert report.graph_break_count >= 1
    reason = report.break_reasons[0]
    assert reason["id"] == "RB004" and "Clamp.apply" in reason["reason"], reason
    refcomp.reset()
    got, _ = refcomp.compile(clamp_apply)(x, 0.0)
    want, _ = clamp_apply(x2, 0.0)
    got.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(x.grad, x2.grad)


def test_an_instance_of_a_class_made_in_the_frame_breaks():
    def f(x):
        class Box:
            def __init__(self, v):
                self.v = v

        return Box(x).v * 2

    x = torch.randn(3)
    report = refcomp.explain(f, x)
    assert report.graph_break_count >= 1
    assert "an instance of Box" in report.break_reasons[0]["reason"], report.break_reasons[0]
    torch.testing.assert_close(report.result, x * 2)
