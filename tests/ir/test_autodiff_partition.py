"""The partition of a joint graph (ir/autodiff.py, Note [Partition rule] and Note
[Checkpointed values]): what the forward saves, and that the backward's gradients do
not depend on that choice."""

from __future__ import annotations

import numpy as np

from ir import GraphBuilder, TensorType, run
from ir.autodiff import joint
from ir.types import f64


def _mlp():
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f64, (4, 3)))
    w = b.input("w", TensorType(f64, (3, 3)))
    h = b.matmul(x, w)
    t = b.tanh(h)
    y = b.sum(b.matmul(t, w))
    return b.build([y]), {"h": h, "t": t}


def _grads(j, xs):
    outs = run(j.forward, xs)
    saved = outs[j.n_outputs:]
    return run(j.backward, [xs[i] for i in j.saved_inputs] + list(saved) + [np.array(1.0)])


def test_checkpointed_values_are_recomputed_not_saved_with_equal_gradients():
    graph, v = _mlp()
    plain = joint(graph, wants_grad=[True, True], grad_outputs=[0])
    assert plain.n_saved == 1 and plain.forward.outputs[1].type.shape == (4, 3)  # tanh(x@w)
    ck = joint(graph, wants_grad=[True, True], grad_outputs=[0],
               checkpointed={v["h"], v["t"]})
    assert ck.n_saved == 0 and ck.recomputed == 2
    assert [n.op.name for n in ck.backward.nodes][:2] == ["matmul", "tanh"]
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 3)), rng.standard_normal((3, 3))]
    for a, b in zip(_grads(plain, xs), _grads(ck, xs)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_checkpointed_random_draw_is_saved():
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f64, (8,)))
    mask = b.dropout_mask(shape=[8], p=0.5, dtype="f64")
    y = b.sum(b.mul(b.exp(x), mask))
    graph = b.build([y])
    j = joint(graph, wants_grad=[True], grad_outputs=[0], checkpointed={mask})
    assert j.n_saved == 1 and "dropout_mask" not in {n.op.name for n in j.backward.nodes}
