"""OpInfo and model breaks of issue 36: each captured in one graph equal to eager, or a
break with a specific reason (never an internal error)."""

import itertools

import pytest
import torch
import torch.nn.functional as F

import refcomp


def explain(fn, *args):
    refcomp.reset()
    return refcomp.explain(fn, *args, backend="llvm")


def check_one_graph(fn, *args):
    want = fn(*args)
    report = explain(fn, *args)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    got = report.result
    for g, w in zip(got if isinstance(want, tuple) else [got],
                    want if isinstance(want, tuple) else [want]):
        torch.testing.assert_close(g, w)
    return report


def test_batch_norm_of_a_1d_input_is_an_opaque_node_not_an_internal_error():
    # Regression: `like.shape[1]` of a 1-d input raised IndexError (RB018); the IR rule
    # now declines, and ATen's batch_norm runs in the graph.
    for training in (False, True):
        def f(x, mean, var):
            return F.batch_norm(x, mean, var, training=training)

        check_one_graph(f, torch.randn(0), torch.randn(0), torch.rand(0))


def test_narrow_with_a_tensor_start_breaks_as_a_host_read():
    # Regression: the meta run raised "Tensor.item() cannot be called on meta tensors",
    # reported as an exception eager raises too (RB017).
    def f(x, start):
        return torch.narrow(x, 0, start, 2)

    x, start = torch.randn(5, 3), torch.tensor(1)
    report = explain(f, x, start)
    assert [r["id"] for r in report.break_reasons] == ["RB002"], report
    torch.testing.assert_close(report.result, f(x, start))


def test_broadcast_shapes_of_constant_shapes_is_computed_while_tracing():
    # It read torch.fx's is_nested_int, on the inline skip list (RB004).
    def f(x):
        return x.expand(torch.broadcast_shapes((2, 1), (1, 3), (3,)))

    check_one_graph(f, torch.randn(1, 1))


def test_unravel_index_traces_itertools_accumulate_and_operator_calls():
    # itertools.accumulate was a class the tracer could not construct (RB004), and
    # operator.mul(2, 3) on Python numbers went to the torch table (RB013).
    check_one_graph(lambda i: torch.unravel_index(i, (3, 4, 5)), torch.tensor([1, 17, 59]))

    def f(x, sizes):
        steps = list(itertools.accumulate(sizes, initial=1))
        return x * steps[-1] + x * list(itertools.accumulate(sizes))[1]

    check_one_graph(f, torch.randn(3), [2, 3, 4])


def test_list_and_dict_copy_are_new_containers():
    # swin_t's `list.copy` was RB013.
    def f(x, dims, opts):
        mine = dims.copy()
        mine.append(2)
        o = opts.copy()
        o["scale"] = 3.0
        return x.sum(mine) * o["scale"] + len(dims) + len(opts)

    dims, opts = [0], {"a": 1}
    check_one_graph(f, torch.randn(2, 3, 4), dims, opts)
    assert dims == [0] and opts == {"a": 1}


@pytest.mark.parametrize("grad,training,need_weights",
                         [(True, False, False), (False, False, False), (True, True, False),
                          (True, False, True), (False, False, True)])
def test_multihead_attention_row_that_masks_every_key_equals_eager(grad, training,
                                                                   need_weights):
    # Regression: a row whose mask hides every key gave NaN where eager's path through
    # scaled_dot_product_attention (need_weights=False, no native fast path) gives 0.
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).train(training)
    x = torch.randn(2, 3, 8)
    mask = torch.tensor([[False, True, True], [True, True, True], [False, False, True]])

    def f(x, mask):
        return mha(x, x, x, attn_mask=mask, need_weights=need_weights)[0]

    with torch.set_grad_enabled(grad):
        want = f(x, mask)
        report = explain(f, x, mask)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, want, equal_nan=True)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("grad,training", [(True, False), (False, False), (True, True)])
def test_key_padding_masks_equal_eager(batch_first, grad, training):
    # nn.MultiheadAttention(key_padding_mask=) and TransformerEncoder(src_key_padding_mask=)
    # were RB013; now one graph equal to eager where eager's path is modelled (a row of
    # the second batch masks every key), a break on torch's fused eval path.
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first).train(training)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=batch_first)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).train(training)
    x = torch.randn(2, 3, 8) if batch_first else torch.randn(3, 2, 8)
    pad = torch.tensor([[False, False, True], [True, True, True]])
    float_pad = torch.zeros(2, 3).masked_fill(pad, float("-inf"))
    attn = torch.tensor([[False, True, False]] * 3)
    cases = [lambda x, p, a: mha(x, x, x, key_padding_mask=p, need_weights=False)[0],
             lambda x, p, a: mha(x, x, x, key_padding_mask=p, attn_mask=a)[0],
             lambda x, p, a: mha(x, x, x, key_padding_mask=p.float() * 0 + float_pad,
                                 need_weights=False)[0],
             lambda x, p, a: enc(x, src_key_padding_mask=p)]
    for i, f in enumerate(cases):
        with torch.set_grad_enabled(grad):
            want = f(x, pad, attn)
            report = explain(f, x, pad, attn)
        fused = batch_first and not grad and not training and i != 2  # float: slow
        assert report.graph_break_count == (1 if fused else 0), (i, report)
        torch.testing.assert_close(report.result, want, equal_nan=True)
