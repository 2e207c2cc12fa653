"""A compiled graph whose outputs get only some gradients (spec/autograd.md, Note [Given
gradients], Note [Saved versions] in spec/autograd.md): the backward
that runs is the one of the given gradients, and only the tensors it reads are
version-checked, as eager runs and checks only the backward nodes the loss reaches.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import refcomp

BACKENDS = ["interp", "llvm", "eager"]


@pytest.fixture(autouse=True)
def fresh():
    refcomp.reset()
    yield
    refcomp.reset()


def _softmax_beside_scale(x, modify):
    v1 = x.softmax(0)  # eager's backward saves the result; refcomp's saves it too
    v2 = x * 3
    print("a graph break: v1 and v2 are outputs of one compiled graph")
    if modify:
        v1.add_(1)
    return v1, v2


def _grads(fn, which, modify):
    """(gradient of x, or the exception) of the loss of outputs `which`."""
    x = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
    outs = fn(x, modify)
    try:
        (g,) = torch.autograd.grad(sum(outs[i].sum() * (i + 1) for i in which), [x])
    except RuntimeError as e:
        return e
    return g


@pytest.mark.parametrize("backend", BACKENDS)
def test_modified_saved_output_of_an_output_without_gradient(backend):
    # v1 is modified in place after the graph and only v2 gets a gradient: eager never
    # runs softmax's backward, so nothing raises (it did on llvm, whose partition saves
    # the softmax).
    want = _grads(_softmax_beside_scale, [1], modify=True)
    got = _grads(refcomp.compile(_softmax_beside_scale, backend=backend), [1], modify=True)
    assert isinstance(want, torch.Tensor), want
    assert isinstance(got, torch.Tensor), got
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", ["llvm"])
def test_modified_saved_output_with_a_gradient_raises_eagers_error(backend):
    # The same in-place change where v1's gradient is given: eager raises at backward;
    # so does the compiled backward, which reads the saved softmax.
    want = _grads(_softmax_beside_scale, [0, 1], modify=True)
    got = _grads(refcomp.compile(_softmax_beside_scale, backend=backend), [0, 1],
                 modify=True)
    message = "one of the variables needed for gradient computation has been modified"
    assert isinstance(want, RuntimeError) and str(want).startswith(message)
    assert isinstance(got, RuntimeError) and str(got).startswith(message)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("which", [[0], [1], [0, 1]])
def test_each_set_of_given_gradients(backend, which):
    compiled = refcomp.compile(_softmax_beside_scale, backend=backend)
    for _ in range(2):  # the second call reuses the cached backward of that set
        torch.testing.assert_close(_grads(compiled, which, modify=False),
                                   _grads(_softmax_beside_scale, which, modify=False))


def test_saved_tensors_are_freed_and_a_second_backward_raises():
    compiled = refcomp.compile(_softmax_beside_scale, backend="llvm")
    x = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
    v1, v2 = compiled(x, False)
    v2.sum().backward(retain_graph=True)
    v2.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        v2.sum().backward()
    # No reference cycle through the saved outputs: the node dies with its outputs.
    gc.disable()
    try:
        v1, v2 = compiled(x, False)
        node = weakref.ref(v2.grad_fn)
        del v1, v2
        assert node() is None
    finally:
        gc.enable()


def test_users_saved_tensor_hooks_still_see_every_saved_tensor():
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t

    compiled = refcomp.compile(_softmax_beside_scale, backend="llvm")
    x = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        v1, v2 = compiled(x, False)
    assert packed  # the compiled Function saved through the user's hooks
    (g,) = torch.autograd.grad(v1.sum() + 2 * v2.sum(), [x])
    torch.testing.assert_close(g, _grads(_softmax_beside_scale, [0, 1], False))
