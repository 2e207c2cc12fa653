"""Worked examples moved out of spec/autograd.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_the_partition():
    """spec/autograd.md, "The partition"."""
    import numpy as np

    from ir import GraphBuilder, TensorType, run
    from ir.autodiff import joint
    from ir.types import f64

    b = GraphBuilder("f")
    x = b.input("x", TensorType(f64, (4, 3)))
    w = b.input("w", TensorType(f64, (3, 5)))
    bias = b.input("bias", TensorType(f64, (5,)))
    y = b.sum(b.gelu(b.add(b.matmul(x, w), bias)))
    j = joint(b.build([y]), wants_grad=[False, True, True], grad_outputs=[0])
    assert j.n_saved == 1 and j.forward.outputs[1].type.shape == (4, 5)  # x @ w + b
    assert j.forward.outputs[1] is j.forward.nodes[3].outputs[0]  # the add's result
    assert j.saved_inputs == [0] and j.grad_inputs == [1, 2]
    assert {n.op.name for n in j.backward.nodes} >= {"erf", "matmul"}  # gelu recomputed

    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in ((4, 3), (3, 5), (5,))]
    saved = run(j.forward, xs)[1:]
    gw, gb = run(j.backward, [xs[0], *saved, np.array(1.0)])
    eps = 1e-6  # finite difference on one weight
    bumped = [xs[0], xs[1].copy(), xs[2]]
    bumped[1][0, 0] += eps
    f = lambda a: run(b.build([y]), a)[0]
    assert abs((f(bumped) - f(xs)) / eps - gw[0, 0]) < 1e-4


@as_module
def test_training_mode_modules():
    """spec/autograd.md, "Training-mode modules"."""
    import torch
    from torch.utils.checkpoint import checkpoint

    import refcomp

    refcomp.reset()  # stats() below: this example's frame only
    w = torch.randn(8, 8, requires_grad=True)

    def block(h):
        return torch.tanh(h @ w) @ w

    def f(x):
        return checkpoint(block, x, use_reentrant=False).sum()

    x = torch.randn(4, 8)
    refcomp.compile(f)(x).backward()
    got = w.grad.clone()
    w.grad = None
    f(x).backward()
    torch.testing.assert_close(got, w.grad)
    (entry,) = [e for es in refcomp.stats()["frames"].values() for e in es]
    assert entry["reason"] is None and entry["training"]["saved_tensors"] == 0
    assert entry["training"]["recomputed_ops"] == 2  # h @ w and its tanh: recomputed
