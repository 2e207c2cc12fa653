"""Complex values in the IR (spec/ir.md, "Complex values"): promotion equals torch's, the
text round-trips, every op with the `complex` fact computes what torch computes on the
interpreter (numpy complex) and on every backend (the kernel backends through
`lower_complex`'s float pairs), and an op without it refuses complex values."""

import itertools

import numpy as np
import pytest
import torch

import ir
from codegen.backends import get_backend
from codegen.torch_bridge import from_numpy, torch_dtype
from ir import GraphBuilder, print_graph
from ir.ops.registry import all_ops
from ir.parser import parse
from ir.passes.manager import run_pipeline
from ir.types import (
    ALL_DTYPES,
    COMPLEX_DTYPES,
    TensorType,
    bool_,
    c64,
    c128,
    f32,
    f64,
    promote_types,
)

BACKENDS = ["interp", "eager", "llvm"]


def test_promotion_equals_torch():
    for a, b in itertools.product(ALL_DTYPES + COMPLEX_DTYPES, repeat=2):
        want = torch.promote_types(torch_dtype(a), torch_dtype(b))
        assert torch_dtype(promote_types(a, b)) == want, (a, b)


def test_weak_python_scalars_beside_complex_tensors_equal_torch():
    # torch.result_type: a Python float keeps c64; a Python complex makes a float complex
    b = GraphBuilder("f")
    z, x = b.input("z", TensorType(c64, (3,))), b.input("x", TensorType(f64, (3,)))
    assert b.mul(z, 2.5).type.dtype == c64 and b.add(z, 3).type.dtype == c64
    assert b.mul(x, 1j).type.dtype == c128
    assert torch.result_type(torch.ones(3, dtype=torch.float64), 1j) == torch.complex128
    g = b.build([b.mul(z, 1j + 2)])
    zv = np.array([1 + 2j, -3j, 0.5], np.complex64)
    np.testing.assert_allclose(ir.run(g, [zv, np.zeros(3)])[0], zv * (1j + 2), rtol=1e-6)


def test_complex_creations_are_complex_of_real_ones():
    b = GraphBuilder("f")
    full = b.full(value=1 - 2j, shape=[2, 3], dtype=c64)
    lit = b.constant(data=[[1j, 2], [3, 4 - 1j]], dtype=c128)
    g = b.build([full, lit])
    assert [n.op.name for n in g.nodes].count("complex") == 2
    got = ir.run(g, [])
    np.testing.assert_array_equal(got[0], np.full((2, 3), 1 - 2j, np.complex64))
    np.testing.assert_array_equal(got[1], np.array([[1j, 2], [3, 4 - 1j]]))
    tensors = get_backend("llvm").compile_graph(g, {})()
    assert [t.dtype for t in tensors] == [torch.complex64, torch.complex128]
    torch.testing.assert_close(tensors[1], torch.from_numpy(got[1]))


TEXT = """func @f(%x: f32[3,4,2], %z: c64[4]) -> (f32[3,4,2], f32[3,4], c64[3]) {
  %0 = view_as_complex %x : c64[3,4]
  %1 = unsqueeze %z {dim=0} : c64[1,4]
  %2 = expand %1 {shape=[3,4]} : c64[3,4]
  %3 = mul %0, %2 : c64[3,4]
  %4 = view_as_real %3 : f32[3,4,2]
  %5 = abs %3 : f32[3,4]
  %6 = sum %3 {dims=[1]} : c64[3]
  return %4, %5, %6
}
"""


def test_text_round_trips_and_verifies():
    g = parse(TEXT)
    assert print_graph(g) == TEXT and ir.verify(g) == []


def test_ops_without_a_complex_form_are_refused():
    for text in ("%1 = sigmoid %0 : c64[3,4]", "%1 = amax %0 {dims=[1]} : c64[3]",
                 "%1 = full {value=1.0} : c64[]"):
        bad = TEXT.replace("  %4 = view_as_real", f"  {text.replace('%1', '%9')}\n"
                           "  %4 = view_as_real")
        name = text.split()[2]
        assert any(f"{name} takes no complex values" in d.message
                   for d in ir.verify(parse(bad))), text


# --- every op with the complex fact, against torch --------------------------------------
def _c(shape, dtype=c64, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(dtype.np)


def _r(shape, dtype=f32, seed=1):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype.np)


Z, W, X = _c((3, 4)), _c((3, 4), seed=2), _r((3, 4))
# name: (input arrays with their dtypes, build(b, *values), torch(*tensors))
CASES = {
    "neg": ([(Z, c64)], lambda b, z: b.neg(z), torch.neg),
    "abs": ([(Z, c64)], lambda b, z: b.abs(z), torch.abs),
    "exp": ([(Z, c64)], lambda b, z: b.exp(z), torch.exp),
    "conj": ([(Z, c64)], lambda b, z: b.conj(z), torch.conj_physical),
    "angle": ([(Z, c64)], lambda b, z: b.angle(z), torch.angle),
    "add": ([(Z, c64), (W, c64)], lambda b, z, w: b.add(z, w), torch.add),
    "sub_real": ([(X, f32), (Z, c64)], lambda b, x, z: b.sub(x, z), torch.sub),
    "mul": ([(Z, c64), (W, c64)], lambda b, z, w: b.mul(z, w), torch.mul),
    "mul_real": ([(Z, c64), (X, f32)], lambda b, z, x: b.mul(z, x), torch.mul),
    "mul_c128": ([(Z, c64), (Z.astype(np.complex128), c128)], lambda b, z, w: b.mul(z, w),
                 torch.mul),
    "div": ([(Z, c64), (W, c64)], lambda b, z, w: b.div(z, w), torch.div),
    "div_by_real": ([(Z, c64), (X, f32)], lambda b, z, x: b.div(z, x), torch.div),
    "real_div": ([(X, f32), (Z, c64)], lambda b, x, z: b.div(x, z), torch.div),
    "eq": ([(Z, c64), (np.where(X > 0, Z, W), c64)], lambda b, z, w: b.eq(z, w), torch.eq),
    "ne": ([(Z, c64), (np.where(X > 0, Z, W), c64)], lambda b, z, w: b.ne(z, w), torch.ne),
    "where": ([(X > 0, bool_), (Z, c64), (W, c64)], lambda b, c, z, w: b.where(c, z, w),
              torch.where),
    "cast_c128": ([(Z, c64)], lambda b, z: b.cast(z, dtype=c128), lambda z: z.to(torch.cdouble)),
    "cast_real": ([(X, f32)], lambda b, x: b.cast(x, dtype=c64), lambda x: x.to(torch.cfloat)),
    "cast_bool": ([(np.where(X > 0, Z, 0), c64)], lambda b, z: b.cast(z, dtype=bool_),
                  lambda z: z.to(torch.bool)),
    "complex": ([(X, f32), (X[::-1].copy(), f32)], lambda b, x, y: b.complex(x, y),
                torch.complex),
    "sum": ([(Z, c64)], lambda b, z: b.sum(z, dims=[1]), lambda z: z.sum(1)),
    "sum_all": ([(Z, c64)], lambda b, z: b.sum(z), lambda z: z.sum()),
    "mean": ([(Z, c64)], lambda b, z: b.mean(z, dims=[0], keepdim=True),
             lambda z: z.mean(0, keepdim=True)),
    "view_as_real": ([(Z, c64)], lambda b, z: b.view_as_real(z), torch.view_as_real),
    "view_as_complex": ([(_r((3, 2, 2)), f32)], lambda b, x: b.view_as_complex(x),
                        torch.view_as_complex),
    "reshape": ([(Z, c64)], lambda b, z: b.reshape(z, shape=[2, 6]), lambda z: z.reshape(2, 6)),
    "permute": ([(Z, c64)], lambda b, z: b.permute(z, perm=[1, 0]), lambda z: z.T),
    "slice": ([(Z, c64)], lambda b, z: b.slice(z, dim=-1, start=1, stop=4, step=2),
              lambda z: z[:, 1:4:2]),
    "squeeze": ([(Z[:1], c64)], lambda b, z: b.squeeze(z), torch.squeeze),
    "unsqueeze": ([(Z, c64)], lambda b, z: b.unsqueeze(z, dim=-1), lambda z: z[..., None]),
    "expand": ([(Z[:1], c64)], lambda b, z: b.expand(z, shape=[5, 4]),
               lambda z: z.expand(5, 4)),
    "cat": ([(Z, c64), (W, c64)], lambda b, z, w: b.cat([z, w], dim=-1),
            lambda z, w: torch.cat([z, w], -1)),
    "copy": ([(Z, c64)], lambda b, z: b.copy(z), torch.clone),
    "rank0": ([(Z[0, 0], c64), (Z, c64)], lambda b, s, z: b.sum(b.mul(s, z)),
              lambda s, z: (s * z).sum()),
}


def test_every_op_with_a_complex_form_has_a_case():
    covered = {name.split("_")[0] for name in CASES} | {"view", "stop", "cast", "aten"}
    missing = [op.name for op in all_ops() if op.complex and op.name.split("_")[0] not in
               covered]
    assert missing == []


def _graph(name):
    inputs, build, _ = CASES[name]
    b = GraphBuilder(name)
    values = [b.input(f"x{i}", TensorType(dt, a.shape)) for i, (a, dt) in enumerate(inputs)]
    return b.build([build(b, *values)]), [a for a, _ in inputs]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_op_equals_torch(name, backend):
    inputs, _, torch_fn = CASES[name]
    g, arrays = _graph(name)
    tensors = [from_numpy(a, dt) for a, dt in inputs]
    want = torch_fn(*tensors)
    if backend == "interp":
        got = torch.from_numpy(np.asarray(ir.run(g, arrays)[0]))
    else:
        got = get_backend(backend).compile_graph(g, {})(*tensors)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want.resolve_conj(), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowering_keeps_the_interpreters_results(name):
    g, _ = _graph(name)
    lowered = run_pipeline(g, ["lower_complex"], check_semantics=True)
    computed = [n for n in lowered.nodes if n.op.name not in ("view_as_real", "view_as_complex")
                for v in list(n.inputs) + list(n.outputs) if v.type.dtype.is_complex]
    assert computed == [], "only the two views touch complex values after lowering"


def test_lowered_chain_has_no_round_trip_through_complex():
    """view_as_real(view_as_complex(p)) -> p joins one rule's pair to the next."""
    b = GraphBuilder("f")
    z = b.input("z", TensorType(c64, (8,)))
    out = b.view_as_real(b.exp(b.mul(b.add(z, z), z)))
    lowered = run_pipeline(b.build([out]), ["lower_complex"], check_semantics=True)
    assert [n.op.name for n in lowered.nodes].count("view_as_complex") == 0
    assert [n.op.name for n in lowered.nodes].count("view_as_real") == 1  # the input's


def test_strided_complex_inputs_on_a_kernel_backend():
    g, _ = _graph("mul")
    z, w = (torch.from_numpy(a) for a in (Z, W))
    wide = torch.zeros(3, 8, dtype=torch.complex64)
    wide[:, ::2] = z
    got = get_backend("llvm").compile_graph(g, {})(wide[:, ::2], w.T.contiguous().T)[0]
    torch.testing.assert_close(got, z * w)
    conj = z.conj()  # a lazily conjugated input: its values are conj(z)
    got = get_backend("llvm").compile_graph(g, {})(conj, w)[0]
    torch.testing.assert_close(got, conj.resolve_conj() * w)


def test_f64_parts_stay_f64():
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f64, (4, 2)))
    z = b.view_as_complex(x)
    g = b.build([b.abs(b.mul(z, z))])
    assert g.outputs[0].type.dtype == f64
    xv = _r((4, 2), f64)
    got = get_backend("llvm").compile_graph(g, {})(torch.from_numpy(xv))[0]
    want = torch.view_as_complex(torch.from_numpy(xv)).square().abs()
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_infinite_parts_stay_apart(backend):
    # Regression: the references built re + 1j * im, and 1j * inf is nan + inf j
    parts = np.array([[1.0, np.inf], [-np.inf, 0.0], [np.nan, 2.0]], np.float32)
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f32, (3, 2)))
    z = b.view_as_complex(x)
    g = b.build([b.complex(b.slice(x, dim=1, start=1, stop=2), b.slice(x, dim=1, start=0,
                                                                       stop=1)),
                 b.div(z, b.full(value=0j, shape=[3], dtype=c64))])
    t = torch.from_numpy(parts)
    want = [torch.complex(t[:, 1:], t[:, :1]),
            torch.view_as_complex(t) / torch.zeros(3, dtype=torch.cfloat)]
    if backend == "interp":
        got = [torch.from_numpy(np.asarray(a)) for a in ir.run(g, [parts])]
    else:
        got = get_backend(backend).compile_graph(g, {})(t)
    for a, w in zip(got, want):
        torch.testing.assert_close(torch.view_as_real(a), torch.view_as_real(w), equal_nan=True)
