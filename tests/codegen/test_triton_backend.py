"""The "triton" backend equals the interpreter, running its kernels in Triton's interpreter.

Every launch in interpreter mode costs ~0.1-0.2 s (Triton patches its language
module per launch), and importing triton ~5 s once per process, so example
budgets are small and shapes tiny.  On a machine with CUDA the same tests
would need CUDA tensors; they run here only in interpreter mode.
"""

import numpy as np
import pytest
from hypothesis import given, settings

import ir
from codegen.backends import get_backend
from codegen.torch_bridge import from_numpy, to_numpy
from tests.strategies import graphs

triton = pytest.importorskip("triton")

from codegen.triton import interpreting  # noqa: E402

pytestmark = pytest.mark.skipif(not interpreting(), reason="CUDA present: tests use CPU tensors")


def compile_triton(graph, **options):
    return get_backend("triton").compile_graph(graph, options)


def assert_matches(got, want, dtype):
    got = to_numpy(got)
    if dtype.is_float:
        np.testing.assert_allclose(got, want, rtol=3e-5, atol=3e-5, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@settings(max_examples=12, deadline=None)
@given(graphs(max_nodes=5))
def test_triton_equals_interpreter_on_random_graphs(case):
    graph, args = case
    fn = compile_triton(graph)
    tensors = [from_numpy(a, v.type.dtype) for a, v in zip(args, graph.inputs)]
    expected = ir.run(graph, args)
    results = fn(*tensors)
    assert len(results) == len(expected)
    for got, want, v in zip(results, expected, graph.outputs):
        assert tuple(got.shape) == want.shape
        assert_matches(got, want, v.type.dtype)
