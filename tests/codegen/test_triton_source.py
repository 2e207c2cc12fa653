"""The generated Triton source, checked FileCheck-style: pointwise chain, softmax, sum.

Emission needs no triton package (emit.py writes text); these tests check what
spec/codegen.md "Triton" promises about the text, and the run tests
(test_triton_backend.py) check what it computes.
"""

import ir
from codegen.lower import lower_region
from codegen.triton.emit import emit_kernel
from ir.passes.registry import get_pass
from tests.filecheck import check


def source_of(text: str, max_rblock: int = 1024):
    """The Triton module of the one fused region of `text` (decomposed and fused)."""
    graph = get_pass("fuse")(get_pass("decompose")(ir.parse(text)))
    (region,) = [n for n in graph.nodes if n.body is not None]
    return emit_kernel(lower_region(region.body), "k", max_rblock)


def test_pointwise_chain_is_one_masked_block_tiled_kernel():
    emitted = source_of("""
func @f(%x: f32[6,5], %y: f32[5,6]) -> f32[6,5] {
  %0 = permute %y {perm=[1,0]} : f32[6,5]
  %1 = mul %x, %0 : f32[6,5]
  %2 = tanh %1 : f32[6,5]
  %3 = relu %2 : f32[6,5]
  return %3
}""")
    check(emitted.source, """
# The tanh helper is emitted (tl.math has no tanh the interpreter runs), then the kernel.
# CHECK:      def _expm1(x):
# CHECK:      def _tanh(x):
# CHECK:      @triton.jit
# CHECK-NEXT: def k(in0, in1, out0, xnumel, XBLOCK: tl.constexpr):
# CHECK-NEXT:   xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
# CHECK:        xmask = xindex < xnumel
# Two loop variables decoded from the flat index (the permuted read keeps them apart).
# CHECK-NEXT:   [[I:i[0-9]]] = (xindex // 5)
# CHECK-NEXT:   [[J:i[0-9]]] = xindex % 5
# CHECK-NEXT:   [[X:t[0-9]+]] = tl.load(in0 + (5 * [[I]] + [[J]]), xmask, other=0)
# CHECK-NEXT:   [[Y:t[0-9]+]] = tl.load(in1 + ([[I]] + 6 * [[J]]), xmask, other=0)
# CHECK-NEXT:   [[M:t[0-9]+]] = ([[X]] * [[Y]])
# CHECK-NEXT:   [[T:t[0-9]+]] = _tanh([[M]])
# CHECK-NEXT:   [[Z:t[0-9]+]] = tl.full([1], 0.0, tl.float32)
# CHECK-NEXT:   [[C:t[0-9]+]] = ([[T]] < [[Z]])
# CHECK-NEXT:   [[R:t[0-9]+]] = tl.where([[C]], [[Z]], [[T]])
# CHECK-NEXT:   tl.store(out0 + (5 * [[I]] + [[J]]), [[R]], xmask)
# CHECK-NOT:  tl.reduce
""")
    assert emitted.sizes == (("xnumel", 30),)
    assert emitted.blocks == (("XBLOCK", 32),) and emitted.grid == 1


def test_softmax_is_one_persistent_kernel_with_three_stages():
    emitted = source_of("""
func @f(%x: f32[4,10]) -> f32[4,10] {
  %0 = softmax %x {dim=1} : f32[4,10]
  return %0
}""")
    check(emitted.source, """
# CHECK:      def k(in0, out0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
# CHECK-NEXT:   xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
# CHECK-NEXT:   xmask = xindex < xnumel
# CHECK-NEXT:   o0 = xindex
# CHECK-NEXT:   [[MAX:a[0-9]]] = tl.full([XBLOCK, 1], float("-inf"), tl.float32)  # max
# CHECK-NEXT:   [[SUM:a[0-9]]] = tl.full([XBLOCK, 1], 0.0, tl.float32)  # sum
# Stage 0: the row maximum, one tile, NaN-propagating.
# CHECK-NEXT:   # stage 0: [r0 < 10] persistent
# CHECK-NEXT:   rindex = tl.arange(0, RBLOCK)[None, :]
# CHECK-NEXT:   mask = xmask & (rindex < rnumel)
# CHECK-NEXT:   r0 = rindex
# CHECK-NEXT:   [[X:t[0-9]+]] = tl.load(in0 + (10 * o0 + r0), mask, other=0)
# CHECK-NEXT:   [[MAX]] = _max_nan([[MAX]], tl.reduce(tl.where(mask, [[X]], float("-inf")), 1, _max_nan, keep_dims=True))
# Stage 1: the sum of exp(x - max).
# CHECK-NEXT:   # stage 1: [r0 < 10] persistent
# CHECK-NOT:    for roffset
# CHECK:        [[E:t[0-9]+]] = tl.math.exp
# CHECK:        [[SUM]] = _sum([[SUM]], tl.reduce(
# Stage 2: normalize and store the row, reusing the tile of x and exp(x - max) of
# stage 1 (same tile: nothing is loaded or recomputed).
# CHECK-NEXT:   # stage 2: [r0 < 10] persistent
# CHECK-NEXT:   rindex = tl.arange(0, RBLOCK)[None, :]
# CHECK-NEXT:   mask = xmask & (rindex < rnumel)
# CHECK-NEXT:   r0 = rindex
# CHECK-NEXT:   [[S:t[0-9]+]] = [[SUM]]
# CHECK-NEXT:   [[Q:t[0-9]+]] = ([[E]] / [[S]])
# CHECK-NEXT:   tl.store(out0 + (10 * o0 + r0), [[Q]], mask)
""")
    assert dict(emitted.blocks) == {"XBLOCK": 4, "RBLOCK": 16}  # 4 rows, 10 per row
    assert emitted.grid == 1


def test_sum_reduction_loops_when_the_row_exceeds_max_rblock():
    text = """
func @f(%x: f32[3,40]) -> f32[3] {
  %0 = sum %x {dims=[1]} : f32[3]
  return %0
}"""
    looped = source_of(text, max_rblock=16)
    check(looped.source, """
# CHECK:      [[A:a[0-9]]] = tl.full([XBLOCK, 1], 0.0, tl.float32)  # sum
# CHECK-NEXT: # stage 0: [r0 < 40] looped
# A [XBLOCK, RBLOCK] partial sum, folded lane by lane, reduced once after the loop.
# CHECK-NEXT: _[[A]] = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
# CHECK-NEXT: for roffset in range(0, rnumel, RBLOCK):
# CHECK-NEXT:     rindex = roffset + tl.arange(0, RBLOCK)[None, :]
# CHECK-NEXT:     mask = xmask & (rindex < rnumel)
# CHECK-NEXT:     r0 = rindex
# CHECK-NEXT:     [[X:t[0-9]+]] = tl.load(in0 + (40 * o0 + r0), mask, other=0)
# CHECK-NEXT:     _[[A]] = tl.where(mask, _sum(_[[A]], [[X]]), _[[A]])
# CHECK-NEXT: [[A]] = _sum([[A]], tl.reduce(_[[A]], 1, _sum_tree, keep_dims=True))
# The row result is stored once per row, by a stage with no ranges.
# CHECK-NEXT: # stage 1: []
# CHECK-NEXT: [[R:t[0-9]+]] = [[A]]
# CHECK-NEXT: tl.store(out0 + (o0), [[R]], xmask)
""")
    assert dict(looped.blocks) == {"XBLOCK": 4, "RBLOCK": 16}
    assert looped.sizes == (("xnumel", 3), ("rnumel", 40))
    persistent = source_of(text)
    assert "for roffset" not in persistent.source
    assert dict(persistent.blocks) == {"XBLOCK": 4, "RBLOCK": 64}


def test_full_reduction_broadcasts_row_invariant_pointers():
    emitted = source_of("""
func @f(%x: f32[7]) -> f32[] {
  %0 = sum %x {dims=[0]} : f32[]
  return %0
}""")
    check(emitted.source, """
# No outer space: one row; the load does not depend on the row, so its pointer is
# broadcast to the tile (tl.load needs a pointer of the mask's shape).
# CHECK: tl.load(tl.broadcast_to(in0 + (r0), [XBLOCK, RBLOCK]), mask, other=0)
# CHECK: tl.store(tl.broadcast_to(out0 + (0), [XBLOCK, 1]), {{t[0-9]+}}, xmask)
""")
    assert emitted.grid == 1
