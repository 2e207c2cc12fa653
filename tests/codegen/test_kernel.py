"""Lowering (codegen/lower.py) checked against the interpreter, without LLVM.

Each region is lowered to a Kernel, run by the numpy executor
(codegen/kernel_numpy.py) and compared with `ir.run` on the same region.
"""

import numpy as np
import pytest
from hypothesis import given, settings

import ir
from codegen.kernel import Index, print_kernel
from codegen.kernel_numpy import run_kernel
from codegen.lower import Unsupported, lower_region, single_node_body
from ir.passes.registry import get_pass
from tests.strategies import graphs

REGIONS = {
    "pointwise_layout": """
func @f(%x: f32[4,6], %y: f32[6,4]) -> f32[4,6] {
  %0 = fused %x, %y {kind="pointwise"} : f32[4,6] {
  ^(%a: f32[4,6], %b: f32[6,4]):
    %1 = permute %b {perm=[1,0]} : f32[4,6]
    %2 = mul %a, %1 : f32[4,6]
    %3 = tanh %2 : f32[4,6]
    return %3
  }
  return %0
}""",
    "reshape_slice_expand": """
func @f(%x: f32[24], %y: f32[4,1], %z: f32[4,12]) -> f32[4,3] {
  %0 = fused %x, %y, %z {kind="pointwise"} : f32[4,3] {
  ^(%a: f32[24], %b: f32[4,1], %c: f32[4,12]):
    %1 = reshape %a {shape=[4,6]} : f32[4,6]
    %2 = slice %1 {dim=1, start=1, stop=6, step=2} : f32[4,3]
    %3 = expand %b {shape=[4,3]} : f32[4,3]
    %4 = slice %c {dim=1, start=0, stop=12, step=4} : f32[4,3]
    %5 = add %2, %3 : f32[4,3]
    %6 = sub %5, %4 : f32[4,3]
    return %6
  }
  return %0
}""",
    "softmax_rowwise": """
func @f(%x: f32[3,5]) -> f32[3,5] {
  %0 = fused %x {kind="rowwise"} : f32[3,5] {
  ^(%a: f32[3,5]):
    %1 = amax %a {dims=[1], keepdim=true} : f32[3,1]
    %2 = expand %1 {shape=[3,5]} : f32[3,5]
    %3 = sub %a, %2 : f32[3,5]
    %4 = exp %3 : f32[3,5]
    %5 = sum %4 {dims=[1], keepdim=true} : f32[3,1]
    %6 = expand %5 {shape=[3,5]} : f32[3,5]
    %7 = div %4, %6 : f32[3,5]
    return %7
  }
  return %0
}""",
    "reduce_middle_dim_var": """
func @f(%x: f64[2,5,3]) -> (f64[2,3], f64[2,1,3]) {
  %0, %1 = fused %x {kind="reduction"} : f64[2,3], f64[2,1,3] {
  ^(%a: f64[2,5,3]):
    %2 = var %a {dims=[1], correction=1} : f64[2,3]
    %3 = mean %a {dims=[1], keepdim=true} : f64[2,1,3]
    return %2, %3
  }
  return %0, %1
}""",
    "grad_and_column_sum": """
func @f(%x: f32[6,5], %g: f32[6,5]) -> (f32[6,5], f32[5], f32[6,5]) {
  %0, %1, %2 = fused %x, %g {kind="reduction"} : f32[6,5], f32[5], f32[6,5] {
  ^(%a: f32[6,5], %b: f32[6,5]):
    %3 = erf %a : f32[6,5]
    %4 = mul %b, %3 : f32[6,5]
    %5 = sum %4 {dims=[0]} : f32[5]
    %6 = exp %a : f32[6,5]
    return %4, %5, %6
  }
  return %0, %1, %2
}""",
    "var_and_its_input": """
func @f(%x: f64[4,7]) -> (f64[4,7], f64[7]) {
  %0, %1 = fused %x {kind="reduction"} : f64[4,7], f64[7] {
  ^(%a: f64[4,7]):
    %2 = tanh %a : f64[4,7]
    %3 = var %2 {dims=[0], correction=1} : f64[7]
    return %2, %3
  }
  return %0, %1
}""",
    "int_sum_and_compare": """
func @f(%x: i32[4,4], %y: i32[4,4]) -> (i64[4], bool[4,4]) {
  %0, %1 = fused %x, %y {kind="reduction"} : i64[4], bool[4,4] {
  ^(%a: i32[4,4], %b: i32[4,4]):
    %2 = sum %a {dims=[0]} : i64[4]
    %3 = lt %a, %b : bool[4,4]
    return %2, %3
  }
  return %0, %1
}""",
}


def _run_kernel_on(body, args):
    kernel = lower_region(body)
    buffers = {b.name: np.ascontiguousarray(a).reshape(-1)
               for b, a in zip(kernel.inputs, args)}
    for b, v in zip(kernel.outputs, body.outputs):
        buffers[b.name] = np.zeros(b.numel, dtype=b.dtype.np)
    run_kernel(kernel, buffers)
    return [buffers[b.name].reshape([int(d) for d in v.type.shape])
            for b, v in zip(kernel.outputs, body.outputs)]


def _args_for(graph, rng):
    out = []
    for v in graph.inputs:
        shape = [int(d) for d in v.type.shape]
        if v.type.dtype.is_float:
            out.append(rng.standard_normal(shape).astype(v.type.dtype.np))
        else:
            out.append(rng.integers(-5, 5, shape).astype(v.type.dtype.np))
    return out


@pytest.mark.parametrize("name", sorted(REGIONS))
def test_region_kernel_equals_interpreter(name):
    graph = ir.parse(REGIONS[name])
    body = graph.nodes[0].body
    args = _args_for(graph, np.random.default_rng(0))
    expected = ir.run(graph, args)
    for got, want in zip(_run_kernel_on(body, args), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_softmax_is_three_stages_over_rows():
    kernel = lower_region(ir.parse(REGIONS["softmax_rowwise"]).nodes[0].body)
    assert [len(s.ranges) for s in kernel.stages] == [1, 1, 1]
    assert kernel.outer == (("o0", 3),)
    assert [a.op for a in kernel.accs] == ["max", "sum"]


def test_an_output_the_reduction_also_reads_is_stored_by_the_reduction_stage():
    # Note [Stores in reduction stages]: the gradient and its column sum share one pass,
    # so erf is computed once per element; exp (sharing nothing reduced) stays behind.
    kernel = lower_region(ir.parse(REGIONS["grad_and_column_sum"]).nodes[0].body)
    first, *rest = kernel.stages
    ops = [s.op for s in first.body if hasattr(s, "op")]
    stored = [s.buf for st in kernel.stages for s in st.body if type(s).__name__ == "Store"]
    assert ops.count("erf") == 1 and "out0" in [s.buf for s in first.body
                                                 if type(s).__name__ == "Store"]
    assert sorted(stored) == ["out0", "out1", "out2"]
    assert all("erf" not in [getattr(s, "op", None) for s in st.body] for st in rest)
    # var's two passes: its input is stored by the first, read again by the second.
    kernel = lower_region(ir.parse(REGIONS["var_and_its_input"]).nodes[0].body)
    assert [len(st.ranges) for st in kernel.stages] == [1, 1, 0]
    assert "out0" in [s.buf for s in kernel.stages[0].body if type(s).__name__ == "Store"]


def test_contiguous_pointwise_collapses_to_one_loop():
    kernel = lower_region(ir.parse(REGIONS["pointwise_layout"]).nodes[0].body)
    # The permuted operand keeps two dims; the plain one alone would collapse.
    assert len(kernel.stages[0].ranges) == 2
    plain = ir.parse("""
func @g(%x: f32[4,6,5]) -> f32[4,6,5] {
  %0 = exp %x : f32[4,6,5]
  return %0
}""")
    collapsed = lower_region(single_node_body(plain.nodes[0]))
    assert collapsed.stages[0].ranges == (("i0", 120),)
    assert "load in0[i0]" in print_kernel(collapsed)


def test_reshape_index_simplifies_without_divmod():
    # Splitting a contiguous dim: (6*i0 + i1) // 3 % 2 ... becomes affine again.
    ranges = {"i0": 4, "i1": 6}
    flat = Index.var("i0").scale(6) + Index.var("i1")
    assert str(flat.floordiv(6, ranges).mod(4, ranges)) == "i0"
    assert str(flat.floordiv(1, ranges).mod(6, ranges)) == "i1"
    # A real wrap keeps its DivMod atom.
    assert "//" in str(Index.var("i1").floordiv(4, ranges))


def test_reduced_value_read_at_another_row_is_unsupported():
    text = """
func @f(%x: f32[3,4]) -> f32[4,3] {
  %0 = fused %x {kind="rowwise"} : f32[4,3] {
  ^(%a: f32[3,4]):
    %1 = sum %a {dims=[1], keepdim=true} : f32[3,1]
    %2 = expand %1 {shape=[3,4]} : f32[3,4]
    %3 = permute %2 {perm=[1,0]} : f32[4,3]
    return %3
  }
  return %0
}"""
    with pytest.raises(Unsupported):
        lower_region(ir.parse(text).nodes[0].body)


@settings(max_examples=25)
@given(graphs(max_nodes=6))
def test_fused_random_graphs_lower_and_match(case):
    graph, args = case
    fused = get_pass("fuse")(graph)
    env = dict(zip(graph.inputs, args))
    for node in fused.nodes:
        operands = [env[v] for v in node.inputs]
        want = ir.run(node.body if node.body is not None else single_node_body(node),
                      operands)
        if node.body is not None:
            got = _run_kernel_on(node.body, operands)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        env.update(zip(node.outputs, want))


# --- runtime sizes (Note [Runtime sizes]) ---------------------------------------------------

SYMBOLIC = """
func @f(%x: f32[s0,s1], %w: f32[s1], %b: f32[s1]) -> (f32[s0,s1], f32[s0,s1], f32[s0], f32[s1,s0], f32[s0,s1], f32[s0,s1]) {
  %0 = softmax %x {dim=1} : f32[s0,s1]
  %1 = layer_norm %x, %w, %b {normalized_ndim=1, eps=1e-05} : f32[s0,s1]
  %2 = var %x {dims=[1], correction=1, keepdim=false} : f32[s0]
  %3 = permute %x {perm=[1,0]} : f32[s1,s0]
  %4 = exp %3 : f32[s1,s0]
  %5 = sum %x {dims=[0], keepdim=true} : f32[1,s1]
  %6 = expand %5 {shape=[s0,s1]} : f32[s0,s1]
  %7 = add %6, %x : f32[s0,s1]
  %8 = reshape %x {shape=[s1,s0]} : f32[s1,s0]
  %9 = permute %8 {perm=[1,0]} : f32[s0,s1]
  %10 = neg %9 : f32[s0,s1]
  return %0, %1, %2, %4, %7, %10
}"""


def test_symbolic_kernels_are_lowered_once_and_run_at_any_size():
    import sympy

    from codegen.runtime import prepare

    graph = prepare(ir.parse(SYMBOLIC), {"plan": False})
    kernels = {n: lower_region(n.body) for n in graph.nodes if n.body is not None}
    for k in kernels.values():
        assert [str(p) for p in k.params] == ["s0", "s1"]
        assert "sizes(s0, s1)" in print_kernel(k)
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    for n0, n1 in [(3, 5), (7, 2), (4, 33), (2, 2), (5, 1)]:
        rng = np.random.default_rng(n0 * 100 + n1)
        args = [rng.standard_normal(shape).astype(np.float32)
                for shape in ((n0, n1), (n1,), (n1,))]
        env = dict(zip(graph.inputs, args))
        for node, k in kernels.items():
            bufs = {f"in{i}": env[v].reshape(-1) for i, v in enumerate(node.inputs)}
            for j, v in enumerate(node.outputs):
                shape = [int(sympy.sympify(d).subs({s0: n0, s1: n1})) for d in v.type.shape]
                bufs[f"out{j}"] = np.zeros(shape, np.float32).reshape(-1)
            run_kernel(k, bufs, {"s0": n0, "s1": n1})
            env.update((v, bufs[f"out{j}"].reshape(shape)) for j, v in enumerate(node.outputs)
                       for shape in [[int(sympy.sympify(d).subs({s0: n0, s1: n1}))
                                      for d in v.type.shape]])
        concrete = ir.parse(SYMBOLIC.replace("s0", str(n0)).replace("s1", str(n1)))
        for want, v in zip(ir.run(concrete, args), graph.outputs):
            np.testing.assert_allclose(env[v], want, rtol=1e-5, atol=1e-5)


def test_symbolic_index_folding_is_proved_for_every_size():
    from codegen.kernel import DivMod, Index
    from ir.types import size_symbol

    s = size_symbol("s0")
    ranges = {"i": s, "j": 4}
    flat = Index.var("i").scale(4) + Index.var("j")  # [s0, 4] row-major
    assert flat.floordiv(4, ranges) == Index.var("i")
    assert flat.mod(4, ranges) == Index.var("j")
    ranges = {"i": 3, "j": s}
    flat = Index.var("i").scale(s) + Index.var("j")  # [3, s0]
    assert flat.floordiv(s, ranges) == Index.var("i")
    assert flat.mod(s, ranges) == Index.var("j")
    # Not provable for every s0 (j < 8 but maybe not < s0): the general form stays.
    kept = (Index.var("j")).floordiv(s, {"j": 8})
    assert isinstance(kept.terms[0][0], DivMod)


def test_run_kernel_needs_every_size_symbol():
    graph = ir.parse(SYMBOLIC)
    k = lower_region(single_node_body(graph.nodes[3]))  # exp of the permuted x
    with pytest.raises(ValueError, match="s0"):
        run_kernel(k, {}, {"s1": 2})


@pytest.mark.parametrize("backend", ["llvm", "triton"])
@pytest.mark.parametrize("name", ["grad_and_column_sum", "var_and_its_input"])
def test_stores_in_reduction_stages_run_on_every_backend(backend, name):
    import torch

    from codegen.backends import get_backend

    graph = ir.parse(REGIONS[name])
    args = _args_for(graph, np.random.default_rng(3))
    got = get_backend(backend).compile_graph(graph, {})(*map(torch.from_numpy, args))
    for g, want in zip(got, ir.run(graph, args)):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-6)
