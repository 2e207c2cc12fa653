"""Kernels equal but for sizes share one compiled body (codegen/share.py, Note [Sizes as
arguments]; spec/codegen.md, "Kernels shared across sizes")."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

import ir
import refcomp
from codegen import sizes, stats
from codegen.kernel import DivMod, Index, Kernel, Let, Stage, Store, print_kernel
from codegen.kernel_numpy import run_kernel
from codegen.lower import lower_region
from codegen.share import share
from ir.types import f32


def _row_sum(rows: int, cols: int) -> Kernel:
    g = ir.parse(f"""
func @f(%x: f32[{rows},{cols}]) -> f32[{rows}] {{
  %0 = fused %x {{kind="reduction"}} : f32[{rows}] {{
  ^(%a: f32[{rows},{cols}]):
    %1 = exp %a : f32[{rows},{cols}]
    %2 = sum %1 {{dims=[1]}} : f32[{rows}]
    return %2
  }}
  return %0
}}""")
    return lower_region(g.nodes[0].body)


def _gather(n: int, stride: int, index=None) -> Kernel:
    """out0[i] = in0[stride * i] (or in0[index]) over n points, built by hand."""
    idx = index if index is not None else Index(((("i0"), stride),), 0)
    body = (Let("t0", "load", (), (("buf", "in0"), ("index", idx)), f32),
            Store("out0", Index.var("i0"), "t0"))
    return Kernel((_buf("in0", n * max(stride, 1), False), _buf("out0", n, True)), (),
                  (), (Stage((("i0", n),), body),))


def _buf(name, numel, out):
    from codegen.kernel import Buffer
    return Buffer(name, f32, numel, out)


def _run(k: Kernel, x: np.ndarray, binding=None) -> np.ndarray:
    """Run `k` on the numpy executor, its size symbols bound by `binding`."""
    binding = binding or {}
    out_buf = k.outputs[0]
    bufs = {"in0": x.reshape(-1).copy(),
            out_buf.name: np.zeros(sizes.evaluate(out_buf.numel, binding), np.float32)}
    run_kernel(k, bufs, {str(s): v for s, v in binding.items()})
    return bufs[out_buf.name]


def test_rows_of_other_counts_share_a_body_and_compute_each_kernel():
    a, b = _row_sum(1003, 8), _row_sum(1005, 8)
    (body_a, bind_a), (body_b, bind_b) = share([a, b])
    assert body_a is body_b and bind_a != bind_b
    text = print_kernel(body_a)
    assert "sizes(" in text and "r0 < 8" in text  # the row length agrees: literal
    for k, binding in ((a, bind_a), (b, bind_b)):
        rows = k.outer[0][1]
        x = np.random.default_rng(rows).standard_normal((rows, 8)).astype(np.float32)
        np.testing.assert_array_equal(_run(body_a, x, binding), _run(k, x))


def test_a_lone_kernel_and_exact_duplicates_are_left_as_they_are():
    k = _row_sum(1007, 12)
    assert share([k]) == [(k, {})]
    assert share([k, k]) == [(k, {}), (k, {})]


def test_a_reduction_row_length_is_never_a_symbol():
    # The row length decides the order of the sum and whether it stays f32 (Note [Short
    # row sums]): other lengths are other kernels.
    a, b = _row_sum(1009, 20), _row_sum(1009, 40)
    assert [body for body, _ in share([a, b])] == [a, b]


def test_unit_strides_and_divisors_stay_literal():
    # A stride 1 against 2 is contiguous against strided: not one body.
    a, b = _gather(1011, 1), _gather(1011, 2)
    assert [body for body, _ in share([a, b])] == [a, b]
    # Strides 2 and 3 are one body with the stride an argument.
    c, d = _gather(1013, 2), _gather(1013, 3)
    (body, bind_c), (body_d, bind_d) = share([c, d])
    assert body is body_d and sorted(bind_c.values()) == [2, 2 * 1013]
    x = np.arange(3 * 1013, dtype=np.float32)
    for k, binding in ((c, bind_c), (d, bind_d)):
        n = k.inputs[0].numel
        np.testing.assert_array_equal(_run(body, x[:n], binding), _run(k, x[:n]))
    # A DivMod's divisor is a multiply when literal: other divisors are other kernels.
    e = _gather(1015, 1, Index(((DivMod(Index.var("i0"), 5, None), 1),), 0))
    f = _gather(1015, 1, Index(((DivMod(Index.var("i0"), 7, None), 1),), 0))
    assert [body for body, _ in share([e, f])] == [e, f]


def test_a_later_compile_reuses_a_shared_body_whose_literals_it_matches():
    a, b = _gather(1017, 5), _gather(1019, 5)
    (body, _), _ = share([a, b])
    ((later, binding),) = share([_gather(1021, 5)])
    assert later is body and sorted(binding.values()) == [1021, 5 * 1021]
    # A stride other than the literal 5 does not fit that body.
    other = _gather(1023, 6)
    assert share([other]) == [(other, {})]


def test_llvm_runs_two_sizes_through_one_compiled_body():
    refcomp.reset()

    def f(a, b):
        return (a.exp() + 1).sum(1), (b.exp() + 1).sum(1)

    a, b = torch.randn(5, 24), torch.randn(7, 24)
    cf = refcomp.compile(f, backend="llvm")
    torch.testing.assert_close(cf(a, b), f(a, b))
    s = stats.snapshot()
    assert (s["kernels"], s["kernels_size_shared"], s["kernels_compiled"]) == (2, 2, 1)


class _Dense(nn.Module):
    """DenseNet's pattern: each layer normalizes all features so far (channels grow)."""

    def __init__(self, layers=4, start=6, growth=3):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Sequential(nn.BatchNorm2d(start + i * growth), nn.ReLU(),
                          nn.Conv2d(start + i * growth, growth, 3, padding=1))
            for i in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = torch.cat([x, layer(x)], 1)
        return x


def test_growing_layers_train_on_shared_bodies_with_eager_gradients():
    refcomp.reset()
    torch.manual_seed(0)
    model, x = _Dense(), torch.randn(2, 6, 9, 9)
    twin = _Dense()
    twin.load_state_dict(model.state_dict())
    out = refcomp.compile(model, backend="llvm")(x)
    out.square().sum().backward()
    ref = twin(x)
    ref.square().sum().backward()
    torch.testing.assert_close(out, ref)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    s = stats.snapshot()
    assert s["kernels_size_shared"] > 0 and s["kernels_compiled"] < s["kernels"]


_PROGRAMS = {
    "softmax_rows_streamed": (lambda x: torch.softmax(x, 1), (2048, 1024)),  # 8 MB out
    "layer_norm": (lambda x: torch.nn.functional.layer_norm(x, (96,)) * 2, (33, 96)),
    "column_sum_tiled": (lambda x: x.sum(0) + 1, (37, 300)),
    "var_of_a_permute": (lambda x: x.permute(2, 0, 1).var(0), (5, 6, 7)),
    "broadcast_pointwise": (lambda x: (x * x[:1]).sigmoid() - x.mean(), (9, 31)),
    "reshape_split": (lambda x: x.reshape(3, 4, 5).transpose(0, 2).exp(), (12, 5)),
}


def test_every_kernel_on_a_body_with_its_sizes_as_arguments(monkeypatch):
    """`share(every=True)` (the fuzzer's --sizes-as-arguments): each kernel runs on a body
    whose open sizes are all arguments; results equal eager's (the emitter's symbolic
    paths: tiled reductions, streaming stores checked at run time, strided loads)."""
    import functools

    import codegen.runtime

    monkeypatch.setattr(codegen.runtime, "share", functools.partial(share, every=True))
    for name, (fn, shape) in _PROGRAMS.items():
        refcomp.reset()
        x = torch.randn(*shape)
        got = refcomp.compile(fn, backend="llvm")(x)
        torch.testing.assert_close(got, fn(x), msg=name)
        assert stats.snapshot()["kernels_size_shared"] >= 1, name
