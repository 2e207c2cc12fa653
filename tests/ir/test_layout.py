"""ir/layout.py's ATen facts checked against torch, and the materialize pass
(ir/passes/materialize.py, Note [Copies])."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.profiler import ProfilerActivity, profile

from ir import GraphBuilder, TensorType, run
from ir.layout import matmul_reads_in_place, reshape_strides
from ir.passes.registry import get_pass
from ir.types import f32, f64

SHAPES = [(2, 3, 4, 5), (4, 6), (3, 1, 4, 2), (6, 4, 2)]


def _factorizations(n: int, rank: int):
    if rank == 1:
        yield (n,)
        return
    for d in range(1, n + 1):
        if n % d == 0:
            for rest in _factorizations(n // d, rank - 1):
                yield (d,) + rest


@pytest.mark.parametrize("shape", SHAPES)
def test_reshape_strides_are_atens_view_rule(shape):
    # Every permutation of a contiguous tensor, reshaped to every shape of ranks 1..4:
    # reshape_strides is None exactly where torch's view refuses, else torch's strides.
    n = int(np.prod(shape))
    base = torch.empty(shape)
    targets = [s for r in range(1, 5) for s in _factorizations(n, r)]
    checked = 0
    for perm in itertools.permutations(range(len(shape))):
        t = base.permute(perm)
        for new in targets:
            got = reshape_strides(tuple(t.shape), t.stride(), new)
            try:
                want = t.view(new).stride()
            except RuntimeError:
                want = None
            assert got == want, (perm, new)
            checked += 1
    assert checked > 100


def _copies(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return sum(e.name == "aten::copy_" for e in p.events())  # clone and contiguous copy_ too


@given(st.sampled_from([(4, 8, 16, 32), (8, 4, 32, 16)]), st.permutations(range(4)),
       st.booleans())
def test_matmul_reads_in_place_is_whether_aten_copies(shape, perm, left):
    # A batched matmul with one permuted operand: ATen copies it (whole, or matrix by
    # matrix inside bmm) exactly where matmul_reads_in_place says it cannot read it
    # (the other operand is row-major).
    a = torch.randn(shape).permute(perm)
    if left:
        other = torch.randn(tuple(a.shape[:2]) + (a.shape[3], 24))
        fn = lambda: torch.matmul(a, other)  # noqa: E731
    else:
        other = torch.randn(tuple(a.shape[:2]) + (24, a.shape[2]))
        fn = lambda: torch.matmul(other, a)  # noqa: E731
    assert matmul_reads_in_place(tuple(other.shape), other.stride())
    assert (_copies(fn) > 0) == (not matmul_reads_in_place(tuple(a.shape), a.stride()))


def test_matmul_reads_in_place_2d():
    base = torch.randn(32, 96)
    for t in (base[:, :48], base[:, :48].t(), base[:, ::2], base[:, ::2].t()):
        b = torch.randn(t.shape[1], 40)
        need = not matmul_reads_in_place(tuple(t.shape), t.stride())
        assert _copies(lambda: torch.matmul(t, b)) == int(need)
    assert not matmul_reads_in_place((32, 48), (96, 2))  # a stride-2 row: copied


def _attention_like():
    """q @ k^T with q, k split into heads as a transformer does."""
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f32, (2, 16, 32)))
    w = b.input("w", TensorType(f32, (32, 32)))
    h = b.matmul(b.reshape(x, shape=[32, 32]), w)
    q = b.permute(b.reshape(h, shape=[2, 16, 4, 8]), perm=[0, 2, 1, 3])  # [2, 4, 16, 8]
    k = b.permute(b.reshape(h, shape=[2, 16, 4, 8]), perm=[0, 2, 3, 1])  # [2, 4, 8, 16]
    s = b.matmul(q, k)
    o = b.matmul(s, q)  # q read twice: one copy
    out = b.reshape(b.permute(o, perm=[0, 2, 1, 3]), shape=[32, 32])
    y = b.sum(b.matmul(out, w))
    return b.build([y])


def test_materialize_copies_what_aten_would_copy_once_per_value():
    g = _attention_like()
    m = get_pass("materialize")(g)
    copies = [n for n in m.nodes if n.op.name == "copy"]
    # q (read by two matmuls: one copy), k, and the permuted o before its reshape; k
    # (q's layout transposed) is copied as its transpose, read through a transposed view
    # (Note [Transposed operand copies]): the copy reads along h's rows.
    assert [c.outputs[0].type.shape for c in copies] == [(2, 4, 16, 8), (2, 4, 16, 8),
                                                         (2, 16, 4, 8)]
    (qk,) = [n for n in m.nodes if n.op.name == "matmul" and n.outputs[0].type.shape[-1] == 16]
    k_view = next(n for n in m.nodes if n.outputs[0] is qk.inputs[1])
    assert k_view.op.name == "permute" and k_view.attrs["perm"] == [0, 1, 3, 2]
    assert k_view.inputs[0] is copies[1].outputs[0]
    kc = torch.randn(2, 4, 16, 8)
    assert _copies(lambda: torch.matmul(torch.randn(2, 4, 16, 8), kc.transpose(2, 3))) == 0
    reshape_of_o = [n for n in m.nodes if n.op.name == "reshape" and
                    n.inputs[0] is copies[2].outputs[0]]
    assert len(reshape_of_o) == 1
    assert get_pass("materialize")(m).nodes == m.nodes  # idempotent
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((2, 16, 32)).astype(np.float32),
          rng.standard_normal((32, 32)).astype(np.float32)]
    np.testing.assert_allclose(run(m, xs)[0], run(g, xs)[0], rtol=1e-6)


def test_materialize_leaves_row_major_operands_and_dynamic_sizes_alone():
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f64, (4, 3)))
    w = b.input("w", TensorType(f64, (4, 5)))
    y = b.matmul(b.transpose(x, 0, 1), w)  # column-major: ATen reads it as it is
    g = b.build([y])
    assert get_pass("materialize")(g) is g
