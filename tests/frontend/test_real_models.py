"""Whole models from tiny configs (bench/models.py): forward equal eager in one graph, and
a training step's gradients equal eager's (seq2seq_transformer's in the thorough
profile only).  bench/MODELS.md has their table."""

import os

import pytest
import torch

import refcomp
from bench import models


@pytest.mark.parametrize("name", list(models.MODELS))
def test_model_forward_is_one_graph_and_equals_eager(name):
    model, args = models.build(name)
    with torch.no_grad():
        want = model(*args)
        refcomp.reset()
        report = refcomp.explain(model, *args)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    torch.testing.assert_close(report.result, want, rtol=1e-4, atol=1e-4)


THOROUGH = os.environ.get("REFCOMP_HYPOTHESIS") == "thorough"
# seq2seq_transformer's training compile costs ~10 s on the shared CI machine: thorough only.
TRAINED = ["resnet_tiny", "lstm_lm", "gru_classifier"] + (
    ["seq2seq_transformer"] if THOROUGH else [])


@pytest.mark.parametrize("name", TRAINED)
def test_model_training_step_gradients_equal_eager(name):
    model, args = models.build(name)
    twin, _ = models.build(name)
    model.train()
    twin.train()
    model(*args).float().pow(2).mean().backward()
    refcomp.reset()
    out = refcomp.compile(twin)(*args)
    out.float().pow(2).mean().backward()
    for (pname, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-3, atol=1e-5, msg=pname)
    for b, c in zip(model.buffers(), twin.buffers()):  # batch-norm running statistics
        torch.testing.assert_close(c, b)
