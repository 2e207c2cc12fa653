"""FX interop (spec/codegen.md, "FX interop"): graphs exported to torch.fx for callable
backends, and refcomp as a torch.compile backend."""

import numpy as np
import pytest
import torch

import refcomp
from codegen.fx import to_fx
from ir import run
from refcomp.dynamo import refcomp_backend
from tests.breaks import graph_break
from tests.fusion.models import mlp_graph, pointwise_chain, transformer_block


@pytest.fixture(autouse=True)
def clean():
    refcomp.reset()
    torch._dynamo.reset()
    yield
    refcomp.reset()
    torch._dynamo.reset()


@pytest.mark.parametrize("make", [pointwise_chain, mlp_graph, transformer_block])
def test_exported_module_computes_the_graph(make):
    graph = make()
    gm = to_fx(graph)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d) for d in v.type.shape]).astype(np.float32)
              for v in graph.inputs]
    want = run(graph, arrays)
    got = gm(*[torch.from_numpy(a) for a in arrays])
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5)
    ops = {n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"}
    assert ops == {n.op.name for n in graph.nodes}     # one call per IR node, by op name


def test_callable_backend_receives_graph_modules():
    seen = []

    def my_backend(gm, example_inputs):
        assert isinstance(gm, torch.fx.GraphModule)
        seen.append((gm.code, [tuple(t.shape) for t in example_inputs]))
        return gm

    lin = torch.nn.Linear(4, 8)

    def f(x):
        y = torch.relu(lin(x)).softmax(-1)
        graph_break("break")                               # two graphs
        return y.max(dim=-1).values + 1

    x = torch.randn(3, 4)
    with torch.no_grad():
        out = refcomp.compile(f, backend=my_backend)(x)
        torch.testing.assert_close(out, f(x))
    assert len(seen) == 2
    code, shapes = seen[0]
    assert "def forward(self, x," in code and "matmul" in code and "relu" in code
    assert "perm = [1, 0]" in code                   # attributes are readable keywords
    assert shapes[0] == (3, 4)


def test_callable_backend_with_dynamic_sizes():
    calls = []

    def counting(gm, example_inputs):
        calls.append(gm)
        return gm

    f = refcomp.compile(lambda x: x.reshape(-1, 2).sum(1), backend=counting, dynamic=True)
    for n in (6, 8, 10):  # (not 4: a 4x4 first call duck-sizes both dims to one symbol)
        t = torch.randn(n, 4)
        torch.testing.assert_close(f(t), t.reshape(-1, 2).sum(1))
    assert len(calls) == 1 and "sizes" in calls[0].code


def test_an_fx_pass_on_the_exported_module_changes_what_runs():
    def swap_relu_for_neg(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target.__name__ == "relu":
                node.target = torch.neg
        gm.recompile()
        return gm

    x = torch.randn(5)
    out = refcomp.compile(lambda x: torch.relu(x) * 2, backend=swap_relu_for_neg)(x)
    torch.testing.assert_close(out, -x * 2)


def test_backend_must_be_a_name_or_callable():
    with pytest.raises(TypeError, match="backend must be a name or a callable"):
        refcomp.compile(lambda x: x, backend=3)


def test_backend_returning_a_non_callable_is_named():
    def bad(gm, example_inputs):
        return 42

    with pytest.raises(TypeError, match="backend 'bad' returned int, not a callable"):
        refcomp.compile(lambda x: x + 1, backend=bad)(torch.randn(2))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, x):
        return torch.nn.functional.gelu(self.ln(self.fc(x))).softmax(-1) * 2 + x.mean()


@pytest.mark.parametrize("backend", ["refcomp", refcomp_backend])
def test_torch_compile_with_refcomp_backend(backend):
    if backend == "refcomp" and "refcomp" not in torch._dynamo.list_backends():
        pytest.fail("the torch_dynamo_backends entry point is not installed: "
                    "pip install -e . registers it (setup.cfg)")
    m = Block()
    x = torch.randn(4, 8)
    with torch.no_grad():
        out = torch.compile(m, backend=backend)(x)
        torch.testing.assert_close(out, m(x))
    stats = refcomp.stats()
    assert stats["counters"].get("graphs") == 1 and "fallbacks" not in stats["counters"]
    assert stats["codegen"]["kernels"] >= 2            # refcomp's own kernels ran


def test_torch_compile_with_refcomp_backend_under_grad():
    m = Block()
    x = torch.randn(4, 8)
    out = torch.compile(m, backend=refcomp_backend)(x)
    torch.testing.assert_close(out, m(x))
    out.sum().backward()
    assert m.fc.weight.grad is not None
