"""Complex tensors through refcomp.compile (spec/ir.md, "Complex values"): a Llama-style
rotary embedding is one graph equal to eager on every backend, forward and backward;
complex gradients follow torch's convention; what the IR does not compute breaks with
its reason (RB025) or becomes an opaque call, never a wrong answer."""

import warnings

import pytest
import torch

import refcomp
from codegen.backends import available_backends
from refcomp.reasons import COMPLEX_UNSUPPORTED

BACKENDS = ["interp", "eager", "llvm"] + (["triton"] if "triton" in available_backends()
                                          else [])


def rope(xq, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    out = torch.view_as_real(xq_ * freqs_cis[None, :, None, :]).flatten(3)
    return out.type_as(xq)


def freqs(s, d, theta=10000.0):
    f = 1.0 / (theta ** (torch.arange(0, d, 2)[: (d // 2)].float() / d))
    angles = torch.outer(torch.arange(s, device=f.device), f).float()
    return torch.polar(torch.ones_like(angles), angles)


def rope_inside(xq):
    return rope(xq, freqs(xq.shape[1], xq.shape[3]))


def _backend(backend, monkeypatch):
    if backend == "triton":
        pytest.importorskip("triton")
        from codegen.triton import interpreting

        if not interpreting():
            pytest.skip("CUDA present: these tests use CPU tensors")


def _check(fn, args, backend, grad_of=()):
    """fn compiled on `backend` is one graph, no break, and equals eager: results, and the
    gradients of the arguments at `grad_of` under a random output gradient."""
    refcomp.reset()
    eager_args = [a.detach().clone().requires_grad_(i in grad_of) for i, a in enumerate(args)]
    ours = [a.detach().clone().requires_grad_(i in grad_of) for i, a in enumerate(args)]
    report = refcomp.explain(fn, backend=backend)(*[a.detach().clone() for a in ours])
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons
    want, got = fn(*eager_args), refcomp.compile(fn, backend=backend)(*ours)
    torch.testing.assert_close(got, want)
    if grad_of:
        g = torch.randn_like(want)
        want.backward(g)
        got.backward(g)
        for i in grad_of:
            torch.testing.assert_close(ours[i].grad, eager_args[i].grad)
    return report


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grad", [False, True])
def test_rotary_embedding_is_one_graph_equal_to_eager(backend, grad, monkeypatch):
    _backend(backend, monkeypatch)
    torch.manual_seed(0)
    xq = torch.randn(2, 5, 3, 8)
    _check(rope, [xq, freqs(5, 8)], backend, grad_of=(0,) if grad else ())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grad", [False, True])
def test_rotary_embedding_with_freqs_made_in_the_frame(backend, grad, monkeypatch):
    _backend(backend, monkeypatch)
    torch.manual_seed(1)
    report = _check(rope_inside, [torch.randn(2, 6, 2, 4)], backend,
                    grad_of=(0,) if grad else ())
    opaque = [ln for ln in report.graphs[0].splitlines() if " aten " in ln]
    assert not any("c64" in ln for ln in opaque), opaque  # polar, the views: IR ops


def _abs_of_product(z, w):
    return (z * w).abs().sum()


def _mixed(z, x):
    return torch.view_as_real((z / (x + 1j)).exp() - z.conj_physical() * 2.5)


def _parts(z):
    return z.real * z.imag + torch.angle(z) - z.mean(0).abs()


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("fn", [_abs_of_product, _mixed, _parts], ids=lambda f: f.__name__)
def test_complex_gradients_follow_torch(fn, backend):
    """torch's convention: the gradient of a real loss L at z is dL/d re + i dL/d im."""
    torch.manual_seed(2)
    z = torch.randn(3, 4, dtype=torch.cfloat)
    other = torch.randn(3, 4, dtype=torch.cfloat) if fn is _abs_of_product else torch.randn(3, 4)
    args = [z, other] if fn is not _parts else [z]
    _check(fn, args, backend, grad_of=tuple(range(len(args)))
           if fn is _abs_of_product else (0,))


def test_complex_input_written_in_place_is_written_back():
    def f(z, w):
        z.mul_(w)
        return z.real.sum()
    z, w = torch.randn(4, dtype=torch.cfloat), torch.randn(4, dtype=torch.cfloat)
    ze = z.clone()
    want = f(ze, w)
    got = refcomp.compile(f, backend="llvm")(z, w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(z, ze)


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_lazily_conjugated_inputs_behave_as_in_eager(backend):
    """A conjugate (or negative) bit is part of what the graph was traced for: an op eager
    refuses on a lazily conjugated tensor raises eager's error, on the first call and
    after a call without the bit; ops that read it compute the resolved values."""
    def to_real(z):
        return torch.view_as_real(z) * 2

    def parts(z):
        return z * 2 + z.imag, z.imag.is_neg()

    def written(z, w):
        z.mul_(w)
        return z.real.sum()

    plain = torch.randn(3, dtype=torch.cfloat)
    compiled = refcomp.compile(to_real, backend=backend)
    torch.testing.assert_close(compiled(plain), to_real(plain))
    for _ in range(2):  # after a plain call, then traced for the conjugated one
        with pytest.raises(RuntimeError, match="unresolved conjugated"):
            to_real(plain.conj())
        with pytest.raises(RuntimeError, match="unresolved conjugated"):
            compiled(plain.conj())
    got, want = refcomp.compile(parts, backend=backend)(plain.conj()), parts(plain.conj())
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] is True
    w = torch.randn(3, dtype=torch.cfloat)
    base_eager, base = plain.clone(), plain.clone()
    want = written(base_eager.conj(), w)
    got = refcomp.compile(written, backend=backend)(base.conj(), w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(base, base_eager)


def test_what_the_ir_does_not_compute_breaks_or_runs_opaque():
    z = torch.randn(4, dtype=torch.cfloat, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ComplexHalf support is experimental
        half = torch.randn(4, dtype=torch.cfloat).to(torch.complex32)
    report = refcomp.explain(lambda t: t * 2, backend="llvm")(half)
    assert report.break_reasons[0]["id"] == COMPLEX_UNSUPPORTED
    # sigmoid has no complex form: an opaque call, whose complex result needs grad here
    report = refcomp.explain(lambda t: torch.sigmoid(t).abs(), backend="llvm")(z)
    assert report.break_reasons[0]["id"] == COMPLEX_UNSUPPORTED
    refcomp.reset()
    report = refcomp.explain(lambda t: torch.fft.fft(t).abs(), backend="llvm")(z.real.detach())
    assert report.graph_count == 1 and 'fn="torch._C._fft.fft_fft"' in report.graphs[0]


def test_complex_scalars_and_promotion_equal_eager():
    def f(x, z):
        return x * 1j + z.to(torch.complex128) * 2, (x.double() + z).dtype
    x, z = torch.randn(3), torch.randn(3, dtype=torch.cfloat)
    got, want = refcomp.compile(f, backend="llvm")(x, z), f(x, z)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] == torch.complex128


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_abs_gradient_at_zero_and_division_by_zero_equal_eager(backend):
    # Regressions: the scaled |z| = s sqrt((re/s)^2 + (im/s)^2) had gradient NaN at z = 0
    # (eager: 0), and a / 0 was NaN where eager's c10 division gives (re/0, im/0)
    z = torch.tensor([0j, 1 + 1j, 3 - 4j])
    _check(lambda z: z.abs().sum(), [z], backend, grad_of=(0,))
    a = torch.tensor([1 + 1j, 0j, -2 + 0j, 3 + 4j])
    b = torch.tensor([0j, 0j, 0j, 1e-30 + 1e-30j])
    refcomp.reset()
    got = refcomp.compile(lambda a, b: torch.view_as_real(a / b), backend=backend)(a, b)
    torch.testing.assert_close(got, torch.view_as_real(a / b), equal_nan=True)


_INF = float("inf")


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_real_operands_and_identities_keep_torchs_cross_terms(backend):
    """`z * 1.0` of an infinite imaginary part is NaN + inf j in torch (1.0 is 1 + 0j):
    simplify's identities skip complex values and a real operand's imaginary part is an
    explicit +0.0 (spec/ir.md, "Complex values")."""
    z = torch.tensor([complex(1, _INF), complex(2, -0.0), complex(_INF, 1), complex(-0.0, -0.0)])
    r = torch.tensor([1.0, -0.0, 2.0, 0.0])
    for fn in (lambda z: z * 1.0, lambda z: 1.0 * z, lambda z: z + 0.0, lambda z: z + (-0.0),
               lambda z: z / 1.0, lambda z: z * r, lambda z: z + r, lambda z: z / r):
        want, got = torch.view_as_real(fn(z)), torch.view_as_real(
            refcomp.compile(fn, backend=backend)(z))
        assert torch.equal(want.isnan(), got.isnan())
        assert torch.equal(want.nan_to_num().signbit(), got.nan_to_num().signbit())
        assert torch.equal(want.nan_to_num(), got.nan_to_num())
