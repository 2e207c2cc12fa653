"""Writes in place (spec/memory.md): the plan's rule for `slice_scatter`, the checker's
refusal of an unsafe reuse, and the scatter kernel run by the numpy executor, copying and
in place.  No torch."""

import dataclasses

import numpy as np
import pytest

from codegen.kernel_numpy import run_kernel
from codegen.lower import drop_inplace_copies, lower_node
from ir import parse, print_graph
from ir.interpreter import run
from ir.passes.manager import run_pipeline
from ir.passes.plan_memory import plan_memory
from ir.plan import check_plan

WINDOW_IS_A_VIEW = """func @f(%x: f32[4,4]) -> f32[4,4] {
  %0 = exp %x : f32[4,4]
  %1 = slice %0 {dim=1, start=0, stop=4, step=2} : f32[4,2]
  %2 = slice_scatter %0, %1 {dim=1, start=1, stop=4, step=2} : f32[4,4]
  %3 = matmul %2, %x : f32[4,4]
  return %3
}
plan {
  %0: offset=0, size=64, live=[0,1]
  %2: offset=0, size=64, live=[1,2], reuses=%0
  # arena=64 bytes, buffers=128 bytes
}
"""


def test_unsafe_scatter_reuse_is_rejected():
    # %1 reads %0's even columns while the kernel stores %0's odd ones: disjoint here, but
    # the rule does not look at windows, only at bytes shared.
    p = parse(WINDOW_IS_A_VIEW)
    assert print_graph(p) == WINDOW_IS_A_VIEW
    assert any("cannot reuse %0 in place: the window's new value is a view of the base" in m
               for m in check_plan(p))
    fresh = plan_memory(p.with_nodes(p.nodes))
    assert check_plan(fresh) == [] and all(s.reuses is None for s in fresh.plan.slots)


def test_scatter_reuse_when_the_base_dies():
    g = run_pipeline(parse("""func @f(%x: f32[4,4], %v: f32[4,2]) -> f32[4,4] {
  %0 = exp %x : f32[4,4]
  %1 = slice_scatter %0, %v {dim=1, start=0, stop=4, step=2} : f32[4,4]
  %2 = matmul %1, %x : f32[4,4]
  return %2
}"""), ["fuse", "plan_memory"])
    assert check_plan(g) == []
    scatter = next(n for n in g.nodes if n.op.name == "slice_scatter")
    slot = g.plan.entry(scatter.outputs[0])
    assert slot.reuses is scatter.inputs[0]


@pytest.mark.parametrize("shape,attrs,window", [
    ((6, 7), {"dim": 1, "start": 1, "stop": 7, "step": 2}, (6, 3)),
    ((6, 7), {"dim": 0, "start": 2, "stop": 5}, (3, 7)),
    ((49,), {"dim": 0, "start": 0, "stop": 49, "step": 8}, (7,)),
    ((3, 4, 5), {"dim": 2, "start": -3, "stop": 99, "step": 1}, (3, 4, 3)),
    ((3, 4), {"dim": 0, "start": 5, "stop": 9}, (0, 4)),
])
def test_scatter_kernel_copying_and_in_place(shape, attrs, window):
    a = {**{"step": 1}, **attrs}
    dims = lambda s: ",".join(map(str, s))  # noqa: E731
    g = parse(f"""func @f(%x: f32[{dims(shape)}], %v: f32[{dims(window)}]) -> f32[{dims(shape)}] {{
  %0 = slice_scatter %x, %v {{dim={a['dim']}, start={a['start']}, stop={a['stop']}, step={a['step']}}} : f32[{dims(shape)}]
  return %0
}}""")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    v = rng.standard_normal(window).astype(np.float32)
    want = run(g, [x, v])[0]
    kernel = lower_node(g.nodes[0])
    out = np.full(x.size, np.nan, np.float32)
    run_kernel(kernel, {"in0": x.reshape(-1), "in1": v.reshape(-1), "out0": out})
    assert np.array_equal(out.reshape(shape), want)
    # In place: the copy stage is dropped; the window alone is stored over the base.
    inplace = drop_inplace_copies(dataclasses.replace(kernel, inplace=(("out0", "in0"),)))
    assert len(inplace.stages) == len(kernel.stages) - 1
    base = x.reshape(-1).copy()
    run_kernel(dataclasses.replace(inplace, inplace=()),
               {"in0": x.reshape(-1), "in1": v.reshape(-1), "out0": base})
    assert np.array_equal(base.reshape(shape), want)
