"""The runtime keeps intermediates in one arena at the memory plan's offsets.

Note [Arena at run time] (codegen/runtime.py): kernel outputs and matmul results
live at their planned offsets, in-place pairs share one pointer, outputs are fresh.
"""

import hashlib

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ir
from codegen.backends import get_backend
from codegen.torch_bridge import from_numpy, to_numpy
from ir.plan import check_plan
from tests.strategies import graphs


def compile_llvm(graph, **options):
    return get_backend("llvm").compile_graph(graph, options)


@settings(max_examples=20, deadline=None)
@given(graphs(max_nodes=10), st.booleans())
def test_planned_graphs_equal_the_interpreter(case, fuse):
    graph, args = case
    fn = compile_llvm(graph, fuse=fuse)
    compiled = fn.compiled
    assert check_plan(compiled.graph) == []
    expected = ir.run(graph, args)
    tensors = [from_numpy(a, v.type.dtype) for a, v in zip(args, graph.inputs)]
    for _ in range(2):  # the second call reuses nothing from the first
        results = fn(*tensors)
        for got, want, v in zip(results, expected, graph.outputs):
            got = to_numpy(got)
            if v.type.dtype.is_float:
                np.testing.assert_allclose(got, want, rtol=3e-5, atol=3e-5, equal_nan=True)
            else:
                np.testing.assert_array_equal(got, want)


MLP = """
func @mlp(%x: f32[{n},64], %w1: f32[64,256], %w2: f32[256,64]) -> f32[{n},64] {{
  %0 = matmul %x, %w1 : f32[{n},256]
  %1 = gelu %0 : f32[{n},256]
  %2 = matmul %1, %w2 : f32[{n},64]
  %3 = add %2, %x : f32[{n},64]
  return %3
}}"""


def mlp_args(n):
    rng = np.random.default_rng(n)
    return [rng.standard_normal(s).astype(np.float32) / 8 for s in ((n, 64), (64, 256),
                                                                      (256, 64))]


def test_mlp_intermediates_share_the_arena_as_planned():
    graph = ir.parse(MLP.format(n=32))
    compiled = compile_llvm(graph).compiled
    plan, arena = compiled.graph.plan, compiled.arena
    mm1, gelu, mm2 = (s.value for s in plan.slots)
    # gelu's region writes over the first matmul's result (in place), the second matmul
    # gets its own bytes: the arena is smaller than the three buffers together.
    assert arena.offset == {s.value: s.offset for s in plan.slots}
    assert arena.offset[gelu] == arena.offset[mm1] != arena.offset[mm2]
    assert [k.inplace for k in compiled.kernels] == [(("out0", "in0"),), ()]
    assert arena.nbytes == plan.arena_bytes() < sum(s.size for s in plan.slots)
    # Per call, one allocation: the output.  The arena is the thread's, made once
    # (Note [Arena reuse], codegen/runtime.py).
    assert compiled.source.count("empty_like(") == 1 and "_arena.get()" in compiled.source
    args = mlp_args(32)
    (got,) = compiled(*map(torch.from_numpy, args))
    np.testing.assert_allclose(got.numpy(), ir.run(graph, args)[0], rtol=1e-5, atol=1e-5)


def test_the_arena_is_reused_per_thread_and_outputs_stay_fresh():
    import threading

    graph = ir.parse(MLP.format(n=32))
    compiled = compile_llvm(graph).compiled
    thread_arena = compiled.fn.__globals__["_arena"]  # the call function's ThreadArena
    base, _ = thread_arena.get()
    first_args, second_args = mlp_args(32), [a * 2 for a in mlp_args(32)]
    (first,) = compiled(*map(torch.from_numpy, first_args))
    kept = first.clone()
    (second,) = compiled(*map(torch.from_numpy, second_args))
    assert thread_arena.get()[0] == base  # same bytes on this thread
    torch.testing.assert_close(first, kept)  # a later call never writes a returned tensor
    np.testing.assert_allclose(second.numpy(), ir.run(graph, second_args)[0],
                               rtol=1e-5, atol=1e-5)
    seen = []
    worker = threading.Thread(target=lambda: seen.append(thread_arena.get()[0]))
    worker.start()
    worker.join()
    assert seen and seen[0] != base  # another thread has its own arena


def test_without_plan_every_intermediate_is_fresh():
    graph = ir.parse(MLP.format(n=32))
    compiled = compile_llvm(graph, plan=False).compiled
    assert compiled.arena.nbytes == 0 and "arena" not in compiled.source
    args = mlp_args(32)
    (got,) = compiled(*map(torch.from_numpy, args))
    np.testing.assert_allclose(got.numpy(), ir.run(graph, args)[0], rtol=1e-5, atol=1e-5)


def test_symbolic_graph_arena_follows_the_plan_formula():
    graph = ir.parse(MLP.format(n="s0"))
    fn = compile_llvm(graph)
    compiled = fn.compiled
    (s0,) = compiled.graph.inputs[0].type.shape[0].free_symbols
    assert compiled.arena.nbytes.free_symbols == {s0}  # a formula, evaluated per call
    arena = compiled.fn.__globals__["_arena"]
    for n in (3, 40, 3):
        args = mlp_args(n)
        (got,) = fn(*map(torch.from_numpy, args))
        np.testing.assert_allclose(got.numpy(), ir.run(graph, args)[0], rtol=1e-5, atol=1e-5)
        nbytes = int(compiled.arena.nbytes.subs({s0: n}))
        assert nbytes == compiled.graph.plan.evaluate({s0: n})[0] > 0
        assert arena.local.arena.numel() >= nbytes  # grown to the largest call's need


def test_outputs_are_fresh_even_when_they_view_an_intermediate():
    # %5 is only returned through views: it must not sit in the arena, where %6's
    # kernel (planned over the same bytes) would overwrite it.
    graph = ir.parse("""
func @f(%x: f32[8,16], %w: f32[16,32]) -> (f32[16,8], f32[8,32]) {
  %5 = matmul %x, %w : f32[8,32]
  %6 = slice %5 {dim=1, start=0, stop=16, step=1} : f32[8,16]
  %7 = permute %6 {perm=[1,0]} : f32[16,8]
  %8 = matmul %x, %w : f32[8,32]
  %9 = exp %8 : f32[8,32]
  %10 = mul %9, %9 : f32[8,32]
  return %7, %10
}""")
    compiled = compile_llvm(graph).compiled
    slot_values = {s.value for s in compiled.graph.plan.slots}
    (viewed,) = [n.inputs[0] for n in compiled.graph.nodes if n.op.name == "slice"]
    assert viewed not in slot_values and viewed not in compiled.arena.offset
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((8, 16)).astype(np.float32),
            rng.standard_normal((16, 32)).astype(np.float32) / 4]
    results = compiled(*map(torch.from_numpy, args))
    for got, want in zip(results, ir.run(graph, args)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_in_place_kernel_vectorizes_and_splits_across_threads():
    # Note [In-place kernels]: the output is stored through the input's argument, so the
    # loop still vectorizes; rows split over threads each read before they write.
    from codegen.llvm import jit

    graph = ir.parse(MLP.format(n=520))
    compiled = compile_llvm(graph).compiled
    (inplace,) = [k for k in compiled.kernels if k.inplace]
    assert "inplace [out0=in0]" in str(inplace)
    symbol = "k_" + hashlib.sha1(str(inplace).encode()).hexdigest()[:16]
    body = jit.optimized_ir().split(f"@{symbol}(", 1)[1].split("\n}\n", 1)[0]
    assert "x float>" in body  # vector loads and stores in the in-place kernel
    args = mlp_args(520)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        (got,) = compiled(*map(torch.from_numpy, args))
    finally:
        torch.set_num_threads(threads)
    np.testing.assert_allclose(got.numpy(), ir.run(graph, args)[0], rtol=1e-5, atol=1e-5)


def test_separate_reuses_gives_in_place_results_bytes_of_their_own():
    # For backends that do not write in place (Triton): the result moves past the plan.
    from codegen.runtime import Arena, plan_graph

    compiled = compile_llvm(ir.parse(MLP.format(n=32))).compiled
    graph, plan = compiled.graph, compiled.graph.plan
    arena = Arena(graph, plan_graph(graph))
    mm1, gelu, mm2 = (s.value for s in plan.slots)
    assert arena.reuses == {gelu: mm1}
    arena.separate_reuses()
    assert arena.reuses == {}
    assert arena.offset[mm1] == 0 and arena.offset[mm2] == plan.slots[2].offset
    assert arena.offset[gelu] == plan.arena_bytes()  # already a multiple of ALIGN
    assert arena.nbytes == plan.arena_bytes() + gelu.type.nbytes()
    spans = sorted((off, off + s.size) for s in plan.slots for off in [arena.offset[s.value]])
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # nothing overlaps


def test_a_value_an_eager_fallback_reads_through_a_view_stays_fresh():
    # cat has no kernel form: it runs as a torch fallback, whose result could be a view
    # of what it reads; so neither the view nor the buffer under it may be in the arena.
    graph = ir.parse("""
func @f(%x: f32[4,8]) -> f32[64] {
  %0 = exp %x : f32[4,8]
  %1 = reshape %0 {shape=[32]} : f32[32]
  %2 = cat %1, %1 {dim=0} : f32[64]
  %3 = neg %2 : f32[64]
  return %3
}""")
    compiled = compile_llvm(graph).compiled
    (base,) = [n.inputs[0] for n in compiled.graph.nodes if n.op.name == "reshape"]
    assert base in {s.value for s in compiled.graph.plan.slots}  # the plan offers bytes...
    assert base not in compiled.arena.offset  # ...the runtime keeps it fresh
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    (got,) = compiled(torch.from_numpy(x))
    np.testing.assert_allclose(got.numpy(), ir.run(graph, [x])[0], rtol=1e-6)


def test_no_result_takes_the_bytes_of_an_operand_another_result_reads():
    # Regression (found while splitting fused outer reductions, issue 15): a region with
    # two results, exp(t) and a * t, had exp(t) written over the dying matmul result `a`
    # (a pair inplace_safe allowed), and the kernel stored exp(t)[i] before it loaded
    # a[i] for a * t: d @ w2 was off by ~1e3.  Then only a region that computed no other
    # result from the operand took its bytes; now results of the operand's shape may,
    # as the kernel stores after its loads (codegen/lower.py `stores_last`).
    import refcomp

    def f(x, w, z, w2):
        a = x @ w
        t = z * 2.0
        h = torch.exp(t)
        d = a * t
        return h @ w2, d @ w2

    g = torch.Generator().manual_seed(0)
    args = [torch.randn(s, generator=g, dtype=torch.float64)
            for s in ((8, 5), (5, 7), (8, 7), (7, 3))]
    for got, want in zip(refcomp.compile(f)(*args), f(*args)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
