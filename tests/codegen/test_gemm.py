"""The matmul extern without torch.matmul's copies of strided batches (codegen/gemm.py,
Note [Strided batched matmul])."""

import pytest
import torch

import refcomp
from codegen import gemm
from codegen.stats import STATS


def _attention(batch=8, seq=128, heads=8, dim=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    flat = [torch.randn(batch * seq, heads * dim, generator=g) for _ in range(3)]
    q, k, v = (t.reshape(batch, seq, heads, dim) for t in flat)
    att = torch.softmax(torch.randn(batch, heads, seq, seq, generator=g), -1)
    return q.permute(0, 2, 1, 3), k.permute(0, 2, 3, 1), v.permute(0, 2, 1, 3), att


def test_attention_products_take_the_strided_path_and_equal_torch():
    q, kt, v, att = _attention()
    for a, b in ((q, kt), (att, v)):
        assert gemm._strided_batches(a, b, None), (a.stride(), b.stride())
        want = torch.matmul(a, b)
        got = gemm.matmul(a, b)
        assert got.shape == want.shape and got.is_contiguous()
        # the same MKL GEMM on the same matrices: equal on these shapes
        assert torch.equal(got, want), (got - want).abs().max()
        buf = torch.full_like(want, float("nan"))
        assert gemm.matmul(a, b, out=buf) is buf
        assert torch.equal(buf, want)


def test_strided_path_on_odd_shapes_is_torch_within_rounding():
    g = torch.Generator().manual_seed(1)
    base = torch.randn(3, 5, 2, 7, generator=g, dtype=torch.float64)  # [b, m, h, k]
    a = base.permute(0, 2, 1, 3)                                      # [b, h, m, k]
    b = torch.randn(3, 2, 4, 7, generator=g, dtype=torch.float64).transpose(-1, -2)
    a5 = torch.randn(2, 3, 4, 6, 5, generator=g).permute(0, 2, 1, 3, 4)  # 5-d, 8 slices
    b5 = torch.randn(2, 4, 3, 5, 2, generator=g)
    for x, y in ((a, b), (a5, b5)):
        assert gemm._strided_batches(x, y, None)
        torch.testing.assert_close(gemm.matmul(x, y), torch.matmul(x, y))


@pytest.mark.parametrize("case", ["contiguous", "broadcast", "3d", "grad", "too_many",
                                  "integer", "bad_out"])
def test_other_products_are_torch_matmul(case):
    g = torch.Generator().manual_seed(2)
    a = torch.randn(2, 3, 4, 5, generator=g)
    b = torch.randn(2, 3, 5, 6, generator=g)
    out = None
    if case == "broadcast":
        a = a.permute(1, 0, 2, 3)[:1]                 # [1, 2, 4, 5]
        b = torch.randn(3, 2, 5, 6, generator=g)
    elif case == "3d":
        a, b = a[0].transpose(0, 1).contiguous().transpose(0, 1), b[0]
    elif case == "grad":
        a = a.permute(1, 0, 2, 3).requires_grad_()
        b = b.permute(1, 0, 2, 3)
    elif case == "too_many":
        a = torch.randn(2, 65, 3, 4, generator=g).transpose(0, 1)  # 65 bmm calls
        b = torch.randn(65, 2, 4, 3, generator=g)
    elif case == "integer":
        a = torch.randint(-3, 3, (2, 3, 4, 5), generator=g).permute(1, 0, 2, 3)
        b = torch.randint(-3, 3, (3, 2, 5, 6), generator=g)
    elif case == "bad_out":
        a = a.permute(1, 0, 2, 3)
        b = b.permute(1, 0, 2, 3)
        out = torch.empty(3, 2, 6, 4).transpose(-1, -2)
    assert not gemm._strided_batches(a, b, out)
    want = torch.matmul(a, b)
    got = gemm.matmul(a, b) if out is None else gemm.matmul(a, b, out=out)
    assert torch.equal(got, want)
    if case == "grad":
        got.sum().backward()
        assert a.grad is not None


def test_compiled_attention_uses_no_copy_and_matches_eager():
    def attention(x, wq, wk, wv):
        q = (x @ wq).reshape(2, 16, 4, 8).permute(0, 2, 1, 3)
        k = (x @ wk).reshape(2, 16, 4, 8).permute(0, 2, 3, 1)
        v = (x @ wv).reshape(2, 16, 4, 8).permute(0, 2, 1, 3)
        return torch.softmax(q @ k, -1) @ v

    g = torch.Generator().manual_seed(3)
    args = [torch.randn(2, 16, 32, generator=g)] + [torch.randn(32, 32, generator=g)
                                                    for _ in range(3)]
    refcomp.reset()
    cf = refcomp.compile(attention)
    cf(*args)  # compiling runs the graph's ops too (shapes, meta): profile a later call
    before = STATS.extern_calls
    with torch.profiler.profile() as prof:
        got = cf(*args)
    assert STATS.extern_calls - before == 5
    names = {e.key for e in prof.key_averages()}
    assert "aten::bmm" in names and "aten::clone" not in names, sorted(names)
    torch.testing.assert_close(got, attention(*args))
