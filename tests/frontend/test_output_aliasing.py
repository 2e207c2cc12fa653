"""A returned view of a graph input aliases the caller's tensor, as in eager
(Note [Returned views] in spec/correctness.md; spec/tracer.md, "Outputs, mutation and
autograd")."""

import pytest
import torch
import torch.nn as nn

import refcomp


@pytest.fixture(autouse=True)
def _fresh():
    refcomp.reset()
    yield
    refcomp.reset()


VIEWS = {
    "t": lambda x: x.t(),
    "transpose": lambda x: x.transpose(0, 1),
    "permute": lambda x: x.permute(1, 0),
    "slice": lambda x: x[1:],
    "step_slice": lambda x: x[::2, 1::3],
    "int_index": lambda x: x[1],
    "view": lambda x: x.view(-1),
    "reshape": lambda x: x.reshape(2, 2, 6),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "squeeze": lambda x: x.unsqueeze(0).squeeze(0),
    "chain": lambda x: x[1:].t().unsqueeze(0)[..., ::2],
}


def _check_alias(f, make, backend):
    xe, xc = make(), make()
    want = f(xe)
    cf = refcomp.compile(f, backend=backend)
    cf(make())  # traces; the next call runs the cache entry
    got = cf(xc)
    assert torch.equal(got, want)
    assert got.stride() == want.stride() and got.shape == want.shape
    assert got.data_ptr() - xc.data_ptr() == want.data_ptr() - xe.data_ptr()
    assert got.untyped_storage().data_ptr() == xc.untyped_storage().data_ptr()
    got.add_(1)
    want.add_(1)
    assert torch.equal(xc, xe)  # the write went through to the caller's tensor


@pytest.mark.parametrize("backend", ["eager", "interp"])
@pytest.mark.parametrize("kind", sorted(VIEWS))
def test_view_of_input_aliases(kind, backend):
    shape = (4, 6) if kind == "reshape" else (3, 4)
    _check_alias(VIEWS[kind], lambda: torch.arange(float(shape[0] * shape[1])).reshape(shape),
                 backend)


def test_expand_aliases():
    f = lambda x: x[:, :1].expand(4, 5)  # noqa: E731
    xe, xc = torch.arange(12.0).reshape(4, 3), torch.arange(12.0).reshape(4, 3)
    want = f(xe)
    cf = refcomp.compile(f, backend="eager")
    cf(torch.arange(12.0).reshape(4, 3))
    got = cf(xc)
    assert torch.equal(got, want) and got.stride() == want.stride() == (3, 0)
    assert got.data_ptr() == xc.data_ptr()
    xc[2, 0] = 100.0
    assert got[2].tolist() == [100.0] * 5


@pytest.mark.parametrize("kind", ["t", "slice", "step_slice", "permute", "chain"])
def test_non_contiguous_and_offset_input(kind):
    """The input is itself a strided view with a storage offset."""
    f = VIEWS[kind]

    def make():
        return torch.arange(60.0).reshape(6, 10)[1:, 2::2].t()  # (4, 5), offset 12

    cf = refcomp.compile(f, backend="eager")
    cf(make())
    xe, xc = make(), make()
    want, got = f(xe), cf(xc)
    assert not xc.is_contiguous() and xc.storage_offset() == 12
    assert torch.equal(got, want) and got.stride() == want.stride()
    assert got.storage_offset() == want.storage_offset()
    assert got.data_ptr() - xc.data_ptr() == want.data_ptr() - xe.data_ptr()
    got.mul_(-1)
    want.mul_(-1)
    assert torch.equal(xc, xe) and torch.equal(xc._base, xe._base)


def test_reshape_that_copies_stays_a_copy():
    f = lambda x: x.reshape(-1)  # noqa: E731  (x is non-contiguous: torch copies)
    x = torch.arange(12.0).reshape(3, 4).t()
    got = refcomp.compile(f, backend="eager")(x)
    assert torch.equal(got, f(x))
    assert got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    got.add_(1)
    assert torch.equal(x, torch.arange(12.0).reshape(3, 4).t())


def test_view_and_computed_outputs():
    def f(x, y):
        return x.t(), x * 2 + y, y[1:]

    args = lambda: (torch.randn(3, 4), torch.randn(3, 4))  # noqa: E731
    cf = refcomp.compile(f, backend="interp")
    cf(*args())
    (xe, ye), = [args()]
    xc, yc = xe.clone(), ye.clone()
    want, got = f(xe, ye), cf(xc, yc)
    for g, w in zip(got, want):
        assert torch.equal(g, w) and g.stride() == w.stride()
    assert got[0].data_ptr() == xc.data_ptr() and got[2].data_ptr() == yc[1:].data_ptr()
    assert got[1].untyped_storage().data_ptr() not in (xc.data_ptr(), yc.data_ptr())
    got[0].zero_()
    got[2].fill_(7.0)
    assert torch.equal(xc, torch.zeros(3, 4))
    assert torch.equal(yc[1:], torch.full((2, 4), 7.0)) and torch.equal(yc[0], ye[0])


def test_same_view_returned_twice_is_one_tensor():
    def f(x):
        v = x.t()
        return v, v

    cf = refcomp.compile(f, backend="eager")
    a, b = cf(torch.randn(2, 3))
    assert a is b


def test_view_of_intermediate_stays_a_graph_output():
    f = lambda x: (x + 1).t()  # noqa: E731
    x = torch.randn(3, 4)
    got = refcomp.compile(f, backend="interp")(x)
    assert torch.equal(got, f(x))
    assert got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_view_of_mutated_input_is_not_rebuilt():
    def f(x):
        x.add_(1)
        return x * 2

    x = torch.zeros(2, 2)
    out = refcomp.compile(f, backend="eager")(x)
    assert torch.equal(x, torch.ones(2, 2)) and torch.equal(out, torch.full((2, 2), 2.0))


def test_requires_grad_view_backprops_as_eager():
    f = lambda x, w: (x.t()[1:], (x * w).sum())  # noqa: E731
    cf = refcomp.compile(f, backend="interp")
    cf(torch.randn(3, 4, requires_grad=True), torch.randn(3, 4))
    base = torch.randn(3, 4)
    w = torch.randn(3, 4)
    xe = base.clone().requires_grad_()
    xc = base.clone().requires_grad_()
    ve, se = f(xe, w)
    vc, sc = cf(xc, w)
    assert vc.requires_grad and vc.grad_fn is not None and vc._base is xc
    assert vc.data_ptr() == ve.data_ptr() - xe.data_ptr() + xc.data_ptr()
    g = torch.randn(ve.shape)
    ((ve * g).sum() + se).backward()
    ((vc * g).sum() + sc).backward()
    torch.testing.assert_close(xc.grad, xe.grad)


def test_requires_grad_input_under_no_grad_records_nothing():
    f = lambda x: x[:, ::2]  # noqa: E731
    cf = refcomp.compile(f, backend="eager")
    with torch.no_grad():
        cf(torch.randn(3, 4, requires_grad=True))
        x = torch.randn(3, 4, requires_grad=True)
        out = cf(x)
        want = f(x)
    assert out.grad_fn is None and want.grad_fn is None
    assert out.requires_grad == want.requires_grad and out._base is x
    assert out.data_ptr() == x.data_ptr() and out.stride() == want.stride()


def test_expand_view_backprops_as_eager():
    f = lambda x: x.unsqueeze(0).expand(3, 2, 4)  # noqa: E731
    cf = refcomp.compile(f, backend="eager")
    cf(torch.randn(2, 4, requires_grad=True))
    base = torch.randn(2, 4)
    xe, xc = base.clone().requires_grad_(), base.clone().requires_grad_()
    g = torch.randn(3, 2, 4)
    (f(xe) * g).sum().backward()
    (cf(xc) * g).sum().backward()
    torch.testing.assert_close(xc.grad, xe.grad)


def test_parameter_view_aliases():
    lin = nn.Linear(3, 2)

    def f(x):
        return lin(x), lin.weight.t()

    cf = refcomp.compile(f, backend="interp")
    with torch.no_grad():
        cf(torch.randn(4, 3))
        y, wt = cf(torch.randn(4, 3))
    assert wt.data_ptr() == lin.weight.data_ptr() and wt.stride() == lin.weight.t().stride()
    assert torch.equal(wt, lin.weight.t())


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_dynamic_sizes_replay_the_view_ops(backend):
    # Found by the fuzzer (corpus select_view_after_recompile, transpose_output_after_
    # recompile, unbind_of_unbind_after_recompile): with dynamic sizes the view's strides
    # and offset are functions of the sizes, so the traced view ops run again on the
    # caller's tensor with this call's sizes.
    def f(x):
        return x.t(), x[1:, ::2], x.unbind(1)[0], x.split([1, x.shape[0] - 1])[1].select(1, 0)

    cf = refcomp.compile(f, backend=backend, dynamic=True)
    for n in (5, 7, 4):
        x = torch.randn(n, 3)
        outs, want = cf(x), f(x)
        for o, w in zip(outs, want):
            assert torch.equal(o, w) and o.stride() == w.stride()
            assert o.storage_offset() == w.storage_offset() and o.data_ptr() == w.data_ptr()
        outs[0].add_(1)
        assert torch.equal(x.t(), outs[0])


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_dynamic_view_shaped_by_another_tensor_replays_its_sizes(backend):
    # x.expand_as(y) replays as x.expand(y's sizes of this call)
    def f(x, y):
        return x.expand_as(y), x.t().view_as(y[:1].t())

    cf = refcomp.compile(f, backend=backend, dynamic=True)
    for n, m in ((5, 4), (3, 6)):
        x, y = torch.randn(1, m), torch.randn(n, m)
        for o, w in zip(cf(x, y), f(x, y)):
            assert torch.equal(o, w) and o.stride() == w.stride()
            assert o.data_ptr() == x.data_ptr()


def test_flatten_of_a_1d_tensor_returns_the_tensor_itself():
    # Found by the fuzzer once frames resume after breaks: eager's flatten of a 1-d
    # tensor is `self`, so the compiled frame must return the very input object.
    def g(x0):
        return x0.flatten()

    x0 = torch.randn(1, dtype=torch.float64).expand(4)
    assert refcomp.compile(g, backend="eager")(x0) is x0
