"""Writes into a slice of a base become `slice_scatter` (ir/passes/scatters.py) and run equal
to eager on every backend: strided, narrowed, flattened, item-assigned and diagonal
writes (spec/memory.md, "Writes in place")."""

import pytest
import torch

import refcomp
from tests.frontend.eager_diff import assert_like_eager

BACKENDS = ["interp", "eager", "llvm"]


def strided_mul(x):
    h = x.clone()
    h[:, 1::2].mul_(3)
    return h.sin()


def tail_add(x, c):
    t = x.clone()
    t[1:].add_(c)
    return t.exp()


def flat_mul(x):
    v = x.clone()
    v.view(-1).mul_(2)
    return v.exp()


def strided_setitem(x, y):
    h = x.clone()
    h[:, ::2] = y
    return h.exp()


def diagonal_fill(x):
    h = x.clone()
    h.diagonal().fill_(0.5)
    return h.exp()


def strided_of_intermediate_returned(x, y):
    h = x * 2
    h[:, 1::2] = y  # h dies here: the window is stored over its bytes
    return h


def two_writes_then_reduce(x):
    h = x + 1
    h[1::2] *= 3
    h[:, 2:5] = 0.25
    return h.sum(0), h.amax(1)


def write_keeps_old_reader(x):
    h = x * 2
    before = h.exp()  # reads h's old value after the write is built: no in place
    h[:, ::3] = 1.0
    return h + before


def self_updates(x, c):
    h = x.exp()
    h[:, 1::2] *= 3  # a scatter region reading only its window: in place
    h[2:9] += c[2:9]
    return h.sin()


def window_from_own_base(x):
    h = x * 2
    h[:, ::2] = h[:, 1::2] + 1  # src is computed from the base the window is written into
    return h.exp()


def empty_windows(x, c):
    h = x * 2
    h[3:3] = 1.0
    h[:, 4:4].add_(c[:, :0])
    return h.exp()


N = 16
CASES = [
    (strided_mul, lambda: (torch.randn(N, N),)),
    (tail_add, lambda: (torch.randn(N, N), torch.randn(N))),
    (flat_mul, lambda: (torch.randn(N, N),)),
    (strided_setitem, lambda: (torch.randn(N, N), torch.randn(N, N // 2))),
    (diagonal_fill, lambda: (torch.randn(N, N),)),
    (diagonal_fill, lambda: (torch.randn(80, 80),)),  # a mask too big to fold
    (strided_of_intermediate_returned, lambda: (torch.randn(70, 70), torch.randn(70, 35))),
    (two_writes_then_reduce, lambda: (torch.randn(N, 2 * N),)),
    (write_keeps_old_reader, lambda: (torch.randn(N, N),)),
    (window_from_own_base, lambda: (torch.randn(N, N),)),
    (empty_windows, lambda: (torch.randn(N, N), torch.randn(N, N))),
    (self_updates, lambda: (torch.randn(N, N), torch.randn(N, N))),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", CASES, ids=[f"{c[0].__name__}{i}" for i, c in enumerate(CASES)])
def test_like_eager(fn, make, backend):
    assert_like_eager(fn, make, backend)


@pytest.mark.parametrize("fn,make", [CASES[0], CASES[3], CASES[5], CASES[6]],
                         ids=["strided_mul", "strided_setitem", "diagonal_big", "returned"])
def test_write_is_one_slice_scatter(fn, make):
    """The captured graph names the write once: no pad or where is left of it."""
    refcomp.reset()
    report = refcomp.explain(fn, *make())
    assert report.graph_count == 1 and report.graph_break_count == 0
    text = "\n".join(str(g) for g in report.graphs)
    assert "slice_scatter" in text and "pad" not in text and "where" not in text, text


def test_triton_refuses_the_two_stage_scatter():
    """Triton programs run a kernel's stages side by side, so a program's copy could land
    after another's scatter: the kernel is refused (torch runs the node), never raced."""
    from codegen.lower import lower_node
    from codegen.triton.emit import emit_kernel
    from ir import parse

    g = parse("""func @f(%x: f32[8,8], %v: f32[8,4]) -> f32[8,8] {
  %0 = slice_scatter %x, %v {dim=1, start=1, stop=8, step=2} : f32[8,8]
  return %0
}""")
    with pytest.raises(NotImplementedError, match="a scatter"):
        emit_kernel(lower_node(g.nodes[0]), "k")


def window_writes_under_grad(x, w):
    h = x * 2
    h[:, 1::2] *= w[:, 1::2]  # mul_ by a value requiring grad: the window's old value is saved
    h[1:] += 1
    h.diagonal().fill_(0.5)
    return (h * w).sin(), h


@pytest.mark.parametrize("backend", BACKENDS)
def test_window_writes_under_grad(backend):
    """A base the backward needs is a saved value, an output of the forward graph, which
    the plan never writes over: gradients equal eager's."""
    from tests.training.test_writes_under_grad import assert_like_eager as grads_like_eager

    grads_like_eager(window_writes_under_grad,
                     lambda: (torch.randn(12, 12, requires_grad=True),
                              torch.randn(12, 12, requires_grad=True)), backend)
