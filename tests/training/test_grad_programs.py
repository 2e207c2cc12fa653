"""Property: gradients of random differentiable programs compiled by refcomp equal eager's.

A small generator (the fuzzer of tests/fuzz/ had not landed when this was written)
writes straight-line torch code over a few inputs, some requiring grad: unary
pointwise ops, binary ops with broadcasting, matmuls, reductions kept as dims,
softmax/log_softmax/layer_norm, views.  The function is compiled by refcomp (one
graph, compiled forward + backward) and its gradients with respect to every input
that requires grad are compared with eager's: float64 tight, float32 at
`torch.testing.assert_close` defaults.  Spec: spec/autograd.md.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import refcomp

UNARY = ["torch.tanh({})", "torch.sigmoid({})", "torch.relu({})", "torch.sin({})",
         "({0} * {0})", "torch.nn.functional.gelu({})", "torch.exp({}.clamp(-3, 3))",
         "torch.softmax({}, dim=-1)", "torch.log_softmax({}, dim=0)",
         "torch.nn.functional.layer_norm({}, (5,))", "({}.sum(dim=1, keepdim=True) * 0.3)",
         "{}.mean(dim=0, keepdim=True)", "{}.t().reshape(4, 5)", "torch.abs({})",
         "torch.sqrt({}.abs() + 1.0)", "{}.amax(dim=-1, keepdim=True)"]
BINARY = ["({} + {})", "({} - {})", "({} * {})", "({} / (1.0 + {} ** 2))",
          "torch.maximum({}, {})", "({} @ W)", "torch.where({1} > 0, {0}, {1} * 0.5)"]


@st.composite
def programs(draw):
    n_in = draw(st.integers(1, 3))
    wants = draw(st.lists(st.booleans(), min_size=n_in, max_size=n_in))
    if not any(wants):
        wants[0] = True
    names = [f"x{i}" for i in range(n_in)]
    # A chain: each line reads the previous result (the first, an input that wants a
    # gradient), so the returned last value always has a grad_fn.
    prev = f"x{draw(st.sampled_from([i for i, w in enumerate(wants) if w]))}"
    lines = []
    for k in range(draw(st.integers(1, 7))):
        if draw(st.booleans()):
            expr = draw(st.sampled_from(UNARY)).format(prev)
        else:
            other = draw(st.sampled_from(names))
            a, b = (prev, other) if draw(st.booleans()) else (other, prev)
            expr = draw(st.sampled_from(BINARY)).format(a, b)
        lines.append(f"    t{k} = {expr}")
        names.append(f"t{k}")
        prev = f"t{k}"
    extra = draw(st.sampled_from(names[n_in:]))
    outs = [prev] if extra == prev else [prev, extra]
    src = f"def prog({', '.join(f'x{i}' for i in range(n_in))}, W):\n" + "\n".join(lines) + \
        f"\n    return {', '.join(outs)},\n"
    return src, wants


def _run(fn, src_inputs, wants, w, weights):
    xs = [x.detach().clone().requires_grad_(r) for x, r in zip(src_inputs, wants)]
    wt = w.detach().clone().requires_grad_()
    outs = fn(*xs, wt)
    loss = sum((o * c[: o.shape[0], : o.shape[1]]).sum() for o, c in zip(outs, weights))
    grads = torch.autograd.grad(loss, [x for x, r in zip(xs, wants) if r] + [wt],
                                allow_unused=True)
    return outs, grads


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_random_program_gradients_equal_eager(dtype):
    @settings(max_examples=15, deadline=None)
    @given(programs(), st.integers(0, 2**16))
    def check(program, seed):
        src, wants = program
        namespace: dict = {"torch": torch}
        exec(compile(src, f"<program {seed}>", "exec"), namespace)
        prog = namespace["prog"]
        g = torch.Generator().manual_seed(seed)
        inputs = [torch.randn(4, 5, generator=g, dtype=dtype) for _ in wants]
        w = torch.randn(5, 5, generator=g, dtype=dtype)
        weights = [torch.randn(4, 5, generator=g, dtype=dtype) for _ in range(2)]
        refcomp.reset()
        want_out, want = _run(prog, inputs, wants, w, weights)
        got_out, got = _run(refcomp.compile(prog, fullgraph=True), inputs, wants, w, weights)
        tight = {"rtol": 1e-9, "atol": 1e-10} if dtype == torch.float64 else {}
        for a, e in zip(got_out, want_out):
            torch.testing.assert_close(a, e, **tight, msg=src)
        for a, e in zip(got, want):
            if e is None:
                assert a is None or not a.any(), src
            else:
                assert a is not None, f"no gradient where eager has one:\n{src}"
                torch.testing.assert_close(a, e, **tight, msg=src)
        entries = [e for es in refcomp.stats()["frames"].values() for e in es]
        assert [e["training"] is not None for e in entries] == [True], (src, entries)

    check()
    refcomp.reset()
