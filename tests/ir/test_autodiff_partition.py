"""The partition of a joint graph (ir/autodiff.py; spec/autograd.md, Note [Partition rule]
and Note [Checkpointed values]): what the forward saves, and that the backward's gradients do
not depend on that choice."""

from __future__ import annotations

import numpy as np

from ir import GraphBuilder, TensorType, run, verify
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
    y = b.sum(b.mul(b.sin(x), mask))  # sin saves x, so sin(x) is recomputed from it
    graph = b.build([y])
    j = joint(graph, wants_grad=[True], grad_outputs=[0], checkpointed={mask})
    assert j.n_saved == 1 and "dropout_mask" not in {n.op.name for n in j.backward.nodes}


def test_copies_of_matmul_operands_are_saved_not_recomputed():
    # Head-split q/k (a reshape and a permute of a matmul result) read by a batched
    # matmul: ATen would copy them; materialize makes the copies IR values and the
    # partition saves them (a tie in bytes with the matmul result they copy), so the
    # backward copies only gradients (Note [Partition rule], Note [Copies]).
    from ir.passes.registry import get_pass

    b = GraphBuilder("f")
    x = b.input("x", TensorType(f64, (32, 16)))
    w = b.input("w", TensorType(f64, (16, 16)))
    h = b.reshape(b.matmul(x, w), shape=[2, 16, 2, 8])
    q = b.permute(h, perm=[0, 2, 1, 3])  # [2, 2, 16, 8]
    k = b.permute(h, perm=[0, 2, 3, 1])  # [2, 2, 8, 16]
    y = b.sum(b.tanh(b.matmul(q, k)))
    graph = get_pass("materialize")(b.build([y]))
    copies = [n.outputs[0] for n in graph.nodes if n.op.name == "copy"]
    assert len(copies) == 2
    j = joint(graph, wants_grad=[False, True], grad_outputs=[0])
    saved = j.forward.outputs[j.n_outputs:]
    assert set(copies) <= set(saved)
    assert not any(n.op.name == "copy" for n in j.backward.nodes)  # nothing recomputed
    # Without the copies the forward saved x @ w once (4 KiB) for both; now q's and k's
    # copies (4 KiB each), as eager's batched matmul saves its copied operands.
    plain = joint(b.build([y]), wants_grad=[False, True], grad_outputs=[0])
    assert (plain.saved_bytes(), j.saved_bytes()) == (8192 + 4096, 8192 + 2 * 4096)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((32, 16)), rng.standard_normal((16, 16))]
    for a, c in zip(_grads(plain, xs), _grads(j, xs)):
        np.testing.assert_allclose(a, c, rtol=1e-12)


def test_nothing_is_recomputed_from_a_tensor_eager_does_not_save():
    # Note [Caller tensors eager does not save]: eager's exp saves its result, not x, so
    # the caller may change x in place before backward; recomputing exp(x) would read x.
    def graph(with_sin):
        b = GraphBuilder("f")
        x = b.input("x", TensorType(f64, (8,)))
        e = b.exp(x)
        outs = [b.sum(e)] + ([b.sum(b.sin(x))] if with_sin else [])
        return b.build(outs), e
    g, e = graph(False)
    j = joint(g, wants_grad=[True], grad_outputs=[0])
    assert j.n_saved == 1 and j.forward.outputs[1] is e and j.saved_inputs == []
    # eager's sin saves x: then exp is recomputed from it
    g, e = graph(True)
    j = joint(g, wants_grad=[True], grad_outputs=[0, 1])
    assert j.n_saved == 0 and j.saved_inputs == [0]


def _normed(two_outputs=False):
    """gelu(x @ w) through layer_norm, then tanh: layer_norm's VJP reads its row statistics."""
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f64, (4, 8)))
    w = b.input("w", TensorType(f64, (8, 8)))
    lw = b.input("lw", TensorType(f64, (8,)))
    lb = b.input("lb", TensorType(f64, (8,)))
    h = b.gelu(b.matmul(x, w))
    y = b.sum(b.tanh(b.layer_norm(h, lw, lb, normalized_ndim=1, eps=1e-5)))
    return b.build([y, b.sum(b.mul(h, h))] if two_outputs else [y])


def _inputs():
    rng = np.random.default_rng(1)
    return [rng.standard_normal(s) for s in ((4, 8), (8, 8), (8,), (8,))]


def _gradient_free_reductions(graph, g_inputs) -> list:
    reached = set(g_inputs)
    found = []
    for node in graph.nodes:
        if any(v in reached for v in node.inputs):
            reached.update(node.outputs)
        elif node.op.name in ("mean", "sum"):
            found.append(node)
    return found


def test_row_statistics_are_saved_by_the_forward(monkeypatch):
    # Note [Row statistics saved by the forward]: the backward recomputes no statistics (it
    # recomputed gelu and two row sums); the forward saves x-hat and rstd; same gradients.
    import ir.autodiff as autodiff

    graph = _normed()
    j = joint(graph, wants_grad=[True] * 4, grad_outputs=[0])
    g_inputs = j.backward.inputs[len(j.backward.inputs) - 1:]
    assert _gradient_free_reductions(j.backward, g_inputs) == []
    assert "gelu" not in {n.op.name for n in j.backward.nodes}
    assert {v.type.shape for v in j.forward.outputs[j.n_outputs:]} >= {(4, 1), (4, 8)}
    monkeypatch.setattr(autodiff, "_row_statistics", lambda nodes, g, c=(): ([], frozenset()))
    old = joint(graph, wants_grad=[True] * 4, grad_outputs=[0])
    assert _gradient_free_reductions(old.backward, old.backward.inputs[-1:])  # the old way
    xs = _inputs()
    for a, b in zip(_grads(j, xs), _grads(old, xs)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_two_differentiable_outputs_move_no_statistics():
    # Note [Row statistics saved by the forward]: only a graph with one differentiable
    # output moves them, so a backward for fewer given gradients (backward_for) derives
    # its VJPs from values the forward saved as before (the moved nodes of an amax's tie
    # count beside other outputs left one undefined: corpus grad_max_dim_ties)
    from ir.autodiff import backward_for

    graph = _normed(two_outputs=True)
    xs = _inputs()
    j = joint(graph, wants_grad=[True] * 4, grad_outputs=[0, 1])
    assert not j.hoisted
    backward, grad_inputs = backward_for(j, frozenset({0}))
    assert verify(backward) == []
    saved = run(j.forward, xs)[j.n_outputs:]
    ins = [xs[i] for i in j.saved_inputs] + list(saved) + [np.array(1.0), np.array(0.0)]
    assert len(run(backward, ins)) == len(grad_inputs) > 0


def test_statistics_of_a_widened_half_input_are_not_moved():
    # under autocast the norm's VJP computes in f32 from the bf16 x (`_in_opmath`): an f32
    # x-hat saved in place of the bf16 x would double its bytes, so the backward keeps the
    # statistics (Note [Row statistics saved by the forward])
    from ir.types import bf16, f32

    b = GraphBuilder("f")
    x = b.input("x", TensorType(bf16, (4, 8)))
    lw = b.input("lw", TensorType(bf16, (8,)))
    lb = b.input("lb", TensorType(bf16, (8,)))
    y = b.sum(b.cast(b.layer_norm(b.gelu(x), lw, lb, normalized_ndim=1, eps=1e-5), dtype=f32))
    j = joint(b.build([y]), wants_grad=[True] * 3, grad_outputs=[0])
    assert not j.hoisted
    assert all(v.type.dtype == bf16 for v in j.forward.outputs[j.n_outputs:]
               if len(v.type.shape) == 2)


def test_statistics_of_a_checkpointed_value_are_not_moved():
    # Note [Checkpointed values]: the backward recomputes the norm's checkpointed input and
    # its statistics; saving x-hat would keep the bytes checkpointing frees
    graph = _normed()
    region = {n.outputs[0] for n in graph.nodes if n.op.name in ("matmul", "gelu")}
    j = joint(graph, wants_grad=[True] * 4, grad_outputs=[0], checkpointed=region)
    assert not j.hoisted
    assert (4, 1) not in {v.type.shape for v in j.forward.outputs[j.n_outputs:]}
    assert _gradient_free_reductions(j.backward, j.backward.inputs[-1:])
    plain = joint(graph, wants_grad=[True] * 4, grad_outputs=[0])
    xs = _inputs()
    for a, b in zip(_grads(j, xs), _grads(plain, xs)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)

