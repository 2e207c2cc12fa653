"""A tensor made under `torch.inference_mode()` used by a graph whose input requires grad
(spec/autograd.md): inference tensors have no version counter, and reading one raised
"Inference tensors do not track version counter" from refcomp's autograd Function on
interp and llvm where eager runs (found by the Python-level fuzzer, corpus
pyworld_inference_tensor_in_grad_graph)."""

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]


def _subtract(x):
    with torch.inference_mode():
        v = x * 2
    out = x - v          # sub saves neither operand: eager runs
    print(end="")        # a break after the graph
    return out


def _multiply(x):
    with torch.inference_mode():
        v = x * 2
    out = x * v          # mul saves v for backward: eager raises
    print(end="")
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_tensor_in_a_graph_that_requires_grad(backend):
    x = torch.randn(4, 1).t().requires_grad_()
    want = _subtract(x)
    got = refcomp.compile(_subtract, backend=backend)(x)
    torch.testing.assert_close(got, want)
    assert got.requires_grad and want.requires_grad
    (g_want,) = torch.autograd.grad(want.sum(), x)
    (g_got,) = torch.autograd.grad(got.sum(), x)
    torch.testing.assert_close(g_got, g_want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_tensor_saved_for_backward_raises_as_in_eager(backend):
    x = torch.randn(4, 1).t().requires_grad_()
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        _multiply(x)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        refcomp.compile(_multiply, backend=backend)(x)


def _multiply_unused(x0, x1):
    with torch.inference_mode():
        v = x0 * 2
    unused = v * x1.sum()  # noqa: F841 -- mul saves v for backward: eager raises here
    return v


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dead_op_that_would_save_an_inference_tensor_raises_as_in_eager(backend):
    """corpus pyworld_inference_tensor_saved_dead_result_missed_raise: the product is
    unused, so a graph would drop it and eager's check with it."""
    x0, x1 = torch.randn(2, 4), torch.randn(2, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        _multiply_unused(x0, x1)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        refcomp.compile(_multiply_unused, backend=backend)(x0, x1)
