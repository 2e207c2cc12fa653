"""The pieces of a training step after backward, each captured (issue 35; spec/tracer.md,
"Gradients, foreach ops and optimizer steps"): `p.grad` of an input, the foreach ops,
clip_grad_norm_, torch.optim's own graph_break, `f.__get__(obj)`.  Each equals eager and
each explain() counts its graphs and breaks."""

import pytest
import torch

import refcomp
from refcomp import reasons


def _params(seed=0):
    torch.manual_seed(seed)
    ps = [torch.nn.Parameter(torch.randn(6, 5)), torch.nn.Parameter(torch.randn(5)),
          torch.nn.Parameter(torch.randn(3, 6))]
    for p in ps:
        p.grad = torch.randn_like(p)
    return ps


def _counts(fn, *args):
    refcomp.reset()
    report = refcomp.explain(fn, *args) if args else refcomp.explain(fn)()
    return report.graph_count, [b["id"] for b in report.break_reasons]


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_grad_of_input_is_an_input_written_back(backend):
    def f(ps):
        out = []
        for p in ps:
            if p.grad is None:
                out.append(p.detach() * 0)
            else:
                p.grad.mul_(2)
                out.append(p.grad + 1)
        return out

    got, want = _params(), _params()
    got[1].grad = want[1].grad = None  # guarded: `.grad == None`
    fn = refcomp.compile(f, backend=backend)
    for _ in range(2):
        for r, w in zip(fn(got), f(want)):
            torch.testing.assert_close(r, w)
        for p, q in zip(got, want):
            assert (p.grad is None) == (q.grad is None)
            if p.grad is not None:
                torch.testing.assert_close(p.grad, q.grad)
    got[1].grad, want[1].grad = torch.ones(5), torch.ones(5)  # a new guard set: recompiled
    for r, w in zip(fn(got), f(want)):
        torch.testing.assert_close(r, w)
    torch.testing.assert_close(got[1].grad, want[1].grad)
    assert _counts(f, _params()) == (1, [])


def test_grad_of_a_tensor_the_graph_made_breaks():
    x = torch.randn(3, requires_grad=True)

    def f(x):
        y = x * 2
        return y.grad is None  # eager warns: not a leaf

    assert _counts(f, x)[1] == [reasons.UNSUPPORTED_TENSOR_METHOD]
    with pytest.warns(UserWarning, match="not a leaf"):
        assert refcomp.compile(f)(x) is True


@torch.no_grad()  # as optimizers run them
def _foreach_program(ps):
    g = [p.grad for p in ps]
    torch._foreach_lerp_(g, ps, 0.1)
    torch._foreach_lerp_(g, ps, 0.9)
    torch._foreach_mul_(g, 0.5)
    torch._foreach_add_(g, ps, alpha=-0.25)
    torch._foreach_addcmul_(g, g, g, value=0.3)
    torch._foreach_addcdiv_(g, g, [x.abs() + 1 for x in g], value=-0.3)
    torch._foreach_clamp_min_(g, -1.0)
    norms = torch._foreach_norm(g, 2.0)
    return torch._foreach_sqrt(torch._foreach_abs(g)) + norms + torch._foreach_pow(2.0, g)


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_foreach_ops_are_per_tensor_ops(backend):
    got, want = _params(), _params()
    out = refcomp.compile(_foreach_program, backend=backend)(got)
    # lerp and addcmul: eager rounds once through an FMA (Note [Foreach ops])
    for r, w in zip(out, _foreach_program(want)):
        torch.testing.assert_close(r, w)
    for p, q in zip(got, want):
        torch.testing.assert_close(p.grad, q.grad)
    assert _counts(_foreach_program, _params()) == (1, [])


def test_foreach_lists_of_different_lengths_raise_as_eager():
    ps = _params()

    def f(ps):
        torch._foreach_mul_([p.grad for p in ps], [1.0, 2.0])

    with pytest.raises(RuntimeError):
        f(ps)
    with pytest.raises(RuntimeError):
        refcomp.compile(f)(ps)


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_clip_grad_norm_is_one_graph(backend):
    def f(ps):
        return torch.nn.utils.clip_grad_norm_(ps, 0.5)

    got, want = _params(), _params()
    torch.testing.assert_close(refcomp.compile(f, backend=backend)(got), f(want))
    for p, q in zip(got, want):
        torch.testing.assert_close(p.grad, q.grad)
    assert _counts(f, _params()) == (1, [])


def test_grouping_of_several_dtypes_breaks():
    def params():
        ps = _params()
        ps[1] = torch.nn.Parameter(ps[1].detach().double())
        ps[1].grad = torch.ones(5, dtype=torch.float64)
        return ps

    def f(ps):
        return torch.nn.utils.clip_grad_norm_(ps, 0.5)

    got, want = params(), params()
    torch.testing.assert_close(refcomp.compile(f)(got), f(want))
    for p, q in zip(got, want):
        torch.testing.assert_close(p.grad, q.grad)
    _, ids = _counts(f, params())
    assert reasons.UNSUPPORTED_CALL in ids, ids


def test_graph_break_outside_the_optimizer_still_breaks():
    def f(x):
        y = x + 1
        torch._dynamo.graph_break()
        return y * 2

    x = torch.randn(3)
    assert _counts(f, x) == (2, [reasons.UNSUPPORTED_CALL])
    torch.testing.assert_close(refcomp.compile(f)(x), f(x))


def test_function_get_binds_a_method():
    class Box:
        def __init__(self):
            self.k = 3.0

        def scale(self, x):
            return x * self.k

    box, func = Box(), Box.scale

    def f(x):
        return func.__get__(box, Box)(x) + 1

    x = torch.randn(4)
    assert _counts(f, x) == (1, [])
    torch.testing.assert_close(refcomp.compile(f)(x), f(x))


STEPS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "adamw_foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=True),
    "adam_amsgrad": lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True),
    # `_foreach_maximum_` has no `Tensor.maximum_`: the out-of-place op copied in
    "adam_amsgrad_foreach": lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True,
                                                        foreach=True),
    "adamax_foreach": lambda ps: torch.optim.Adamax(ps, lr=1e-2, foreach=True),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
}


def _step_run(make, compiled, steps=4):
    ps = _params()
    opt = make(ps)
    fn = refcomp.compile(lambda: opt.step()) if compiled else opt.step
    for i in range(steps):
        for p in ps:
            p.grad = torch.sin(p.detach() * (i + 1))  # new gradients each step
        fn()
    return ps, opt


@pytest.mark.parametrize("name", sorted(STEPS))
def test_optimizer_step_is_one_graph_equal_to_eager(name):
    refcomp.reset()
    got, opt_got = _step_run(STEPS[name], True)
    want, opt_want = _step_run(STEPS[name], False)
    for p, q in zip(got, want):
        torch.testing.assert_close(p, q)
        s, t = opt_got.state[p], opt_want.state[q]
        assert s.keys() == t.keys() and s
        for k in s:
            torch.testing.assert_close(s[k], t[k])
    ps = _params()
    opt = STEPS[name](ps)
    opt.step()  # the state exists (SGD makes its momentum buffers in the first step)
    assert _counts(lambda: opt.step()) == (1, [])


def test_parameter_written_under_no_grad_then_used_under_grad_breaks():
    def f(w, x):
        with torch.no_grad():
            w.mul_(0.5)
        return (w * x).sum()

    x = torch.randn(4)
    w1, w2 = torch.nn.Parameter(torch.ones(4)), torch.nn.Parameter(torch.ones(4))
    refcomp.compile(f)(w1, x).backward()
    f(w2, x).backward()
    torch.testing.assert_close(w1, w2)
    torch.testing.assert_close(w1.grad, w2.grad)
    _, ids = _counts(f, torch.nn.Parameter(torch.ones(4)), x)
    assert ids == [reasons.INPLACE_ON_ALIAS], ids


def test_tensor_scalars_and_tensor_values_are_one_per_tensor():
    def f(xs, a, b, s):
        torch._foreach_addcdiv_(xs, a, b, s)
        torch._foreach_addcmul_(xs, a, b, s)
        xs[0].addcdiv_(a[0], b[0], value=s[1])
        return xs

    def args():
        torch.manual_seed(0)
        return ([torch.randn(3), torch.randn(4)], [torch.randn(3), torch.randn(4)],
                [torch.rand(3) + 1, torch.rand(4) + 1], torch.tensor([0.5, -2.0]))

    want = f(*args())  # eager reads a 0-d `value` as a number
    for r, w in zip(refcomp.compile(f)(*args()), want):
        torch.testing.assert_close(r, w)
    assert _counts(f, *args()) == (1, [])


def test_one_parameter_at_two_sources_is_one_value():
    # clip_grad_norm_(ps) and opt.step(): each parameter is read as `ps[i]` and as
    # `opt.param_groups[0]['params'][i]`; one traced value (guarded `is`), so the step's
    # writes are not refused as writes into an aliased input (RB010), and a list holding
    # other parameters than the optimizer's recompiles.
    def make():
        ps = _params()
        return ps, torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1)

    (ps1, o1), (ps2, o2) = make(), make()

    def post(ps, opt):
        torch.nn.utils.clip_grad_norm_(ps, 0.5)
        opt.step()

    refcomp.reset()
    fn = refcomp.compile(post)
    for _ in range(3):
        for a, b in zip(ps1, ps2):
            a.grad, b.grad = torch.cos(a.detach()), torch.cos(b.detach())
        fn(ps1, o1)
        post(ps2, o2)
    for a, b in zip(ps1, ps2):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(a.grad, b.grad)
    other = _params(1)
    for p in other:
        p.grad = torch.ones_like(p)
    want = [p.detach().clone() for p in ps1]
    fn(other, o1)  # the guard `... is ...` fails: traced again, nothing written wrongly
    assert refcomp.stats()["counters"]["recompiles"] >= 1
    assert _counts(post, ps1, o1) == (1, [])
    assert all(not torch.equal(p, w) for p, w in zip(ps1, want))  # o1 stepped its own


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_lerp_addcmul_addcdiv_methods_are_written_out(backend):
    def f(x, a, b):
        x.lerp_(a, 0.1)
        x.lerp_(b, 0.75)
        x.addcmul_(a, b, value=0.5)
        x.addcdiv_(a, b.abs() + 1, value=-2)
        return x.lerp(b, 0.3).addcmul(a, a)

    def args():
        torch.manual_seed(2)
        return torch.randn(5, 4), torch.randn(5, 4), torch.randn(5, 4)

    got, want = args(), args()
    torch.testing.assert_close(refcomp.compile(f, backend=backend)(*got), f(*want))
    torch.testing.assert_close(got[0], want[0])  # within eager's FMA rounding
    refcomp.reset()
    report = refcomp.explain(f, *args())
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert "aten" not in report.ops_per_graph[0]  # pointwise ops, fused


def test_module_parameters_is_traced_and_guarded():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 3, bias=False)
    model = torch.nn.Sequential(lin, torch.nn.Tanh(), lin, torch.nn.Linear(3, 2))

    def f(x):
        ps = model.parameters()
        assert not isinstance(ps, torch.Tensor)
        return x * sum(p.sum() for p in ps), len(list(model.parameters()))

    x = torch.randn(2)
    assert _counts(f, x) == (1, [])
    refcomp.reset()
    fn = refcomp.compile(f)
    for got, want in zip(fn(x), f(x)):  # the shared weight counted once, as eager
        torch.testing.assert_close(got, want)
    model[3].register_parameter("extra", torch.nn.Parameter(torch.ones(2)))
    for got, want in zip(fn(x), f(x)):  # a new parameter: the names' guard recompiles
        torch.testing.assert_close(got, want)
    assert refcomp.stats()["counters"]["recompiles"] >= 1
