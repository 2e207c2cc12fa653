"""u16/u32/u64 are extern-only IR dtypes (spec/ir.md, "Extern-only dtypes"): `aten` nodes
take and make them (`torch.hash_tensor`'s uint64 result is captured), graph inputs and
outputs hold them, and any other op given one breaks (RB013) so that eager runs it."""

import pytest
import torch

import refcomp
from ir import GraphBuilder, TensorType
from ir.builder import ExternDTypeError
from ir.graph import Graph
from ir.types import EXTERN_DTYPES, f32
from ir.verify import verify
from refcomp.reasons import INEXPRESSIBLE_OP

BACKENDS = ["interp", "eager", "llvm"]


def _floats():
    return (torch.arange(12.0).reshape(3, 4).sin(),)


def _uints(dtype):
    return lambda: (torch.tensor([1, 5, 60007, 3], dtype=dtype),)


# name: (function, make_args, graphs, break reasons) -- as explain reports them
CASES = {
    "hash": (lambda x: torch.hash_tensor(x), _floats, 1, []),
    "hash_dim": (lambda x: torch.hash_tensor(x, dim=1, keepdim=True), _floats, 1, []),
    "hash_and_float": (lambda x: (torch.hash_tensor(x.t(), dim=0), x * 2), _floats, 1, []),
    "u64_returned": (lambda x: x, _uints(torch.uint64), 1, []),
    "u32_sum": (lambda x: x.sum(), _uints(torch.uint32), 1, []),
    "u64_written": (lambda x: x.mul_(2), _uints(torch.uint64), 1, []),
    "u64_cat": (lambda x: torch.cat([x, x]), _uints(torch.uint64), 1, []),
    # an IR op given one: the call breaks, eager runs it
    "hash_eq": (lambda x: torch.hash_tensor(x) == torch.hash_tensor(x.clone()), _floats, 1,
                [INEXPRESSIBLE_OP]),
    "u16_to_float": (lambda x: x.float() * 2, _uints(torch.uint16), 1, [INEXPRESSIBLE_OP]),
    "to_u32": (lambda x: x.to(torch.uint32), lambda: (torch.tensor([1, 2, 3]),), 0,
               [INEXPRESSIBLE_OP]),
}


def _same(got, want):
    if isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert (got.dtype, got.shape, got.stride()) == (want.dtype, want.shape, want.stride())
    assert torch.equal(got, want), (got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_wide_unsigned_values_between_extern_calls(name, backend):
    f, make, graphs, reasons = CASES[name]
    ex = refcomp.explain(f, *make(), backend=backend)
    assert ex.graph_count == graphs
    assert [r["id"] for r in ex.break_reasons] == reasons, ex.break_reasons
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    for _ in range(2):  # the second call runs the cache entry
        args_e, args_c = make(), make()
        want = f(*args_e)
        _same(cf(*args_c), want)
        _same(tuple(args_c), tuple(args_e))  # written inputs too
    refcomp.reset()


@pytest.mark.parametrize("dtype", EXTERN_DTYPES, ids=str)
def test_only_aten_nodes_take_extern_dtypes(dtype):
    b = GraphBuilder()
    x = b.input("x", TensorType(dtype, (3,)))
    with pytest.raises(ExternDTypeError):
        b.add(x, x)
    with pytest.raises(ExternDTypeError):
        b.cast(b.input("y", TensorType(f32, (3,))), dtype=dtype)
    # a node the builder would refuse, made by hand: the verifier flags it too
    ok = GraphBuilder()
    y = ok.input("y", TensorType(f32, (3,)))
    g = ok.build([ok.neg(y)])
    node = g.nodes[0]
    node.outputs[0].type = TensorType(dtype, (3,))
    assert any("u16/u32/u64" in str(d) for d in verify(Graph(g.name, g.inputs, g.nodes,
                                                              g.outputs)))


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_chalf_result_is_an_extern_only_c32(backend):
    """`x.chalf()` makes torch's complex32, which the IR holds as the extern-only c32
    (stored as complex64, as bf16 is as float32): one graph, eager's values and dtype.
    An IR op given it refuses (ExternDTypeError): the call runs at a break (RB013)."""
    x = torch.randn(3, 4)
    refcomp.reset()
    report = refcomp.explain(lambda t: t.chalf(), backend=backend)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0, str(report)
    got = refcomp.compile(lambda t: t.chalf(), backend=backend)(x)
    assert got.dtype == torch.complex32  # torch.equal has no ComplexHalf kernel
    assert torch.equal(got.to(torch.complex64), x.chalf().to(torch.complex64))
