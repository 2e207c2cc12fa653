"""Decomposition: composite ops into primitives, each rule written as the math it computes.

Owns: the `decompose` pass and `RULES`, its rule table on the rewrite engine
(ir/rewrite.py), one rule per composite op, named after it.  A rule gets a
GraphBuilder positioned where the composite was, the node's operands and attributes,
and returns the value that replaces the node's result (or None to keep the node).
Spec: spec/passes.md, "decompose".

Not decomposed, on purpose: `gelu` and `silu` are pointwise ops with a scalar form
that every backend lowers inside a fused kernel, so splitting them buys nothing;
`linear` is not an op (the frontend records matmul + permute + add).
"""

from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Graph, Value
from ir.ops.opaque import format_results
from ir.ops.rules import normalize_dim, normalize_dims
from ir.passes.registry import register_pass
from ir.rewrite import RuleTable, rewrite
from ir.types import bf16, f16, f32, f64, i64, is_symbolic

RULES = RuleTable("decompose")


def decomposes(op_name: str):
    """Decorator: `fn(b, *operands, **attrs)` is the rule for `op_name`."""
    return RULES.rule(op_name, name=op_name, unpack=True)


def _dim_size_is_zero(x: Value, dims) -> bool:
    return any(not is_symbolic(x.type.shape[d]) and x.type.shape[d] == 0 for d in dims)


# Note [Half-precision decompositions]
# ATen computes softmax, log_softmax, layer_norm, rms_norm and batch_norm of f16/bf16
# tensors in float32 ("opmath"; var in f64: Note [How ATen computes var]) and rounds the
# result once.  Their decompositions into
# f16/bf16 primitives rounded every step instead (a kernel rounds each half-typed value:
# Note [Half casts], codegen/lower.py), and a rounded mean loses what layer_norm needs:
# the mean of bf16 (100 + 2 * randn) is off by up to 0.25, so layer_norm was off by 0.14
# on every backend.  So a rule computes a half-precision input in f32 (`_opmath`) and
# casts the result back to the input's dtype (`_like`), as ATen does.


def _opmath(b: GraphBuilder, x: Value) -> Value:
    """x in the dtype ATen computes it in: f16/bf16 in f32 (Note [Half-precision
    decompositions]), every other dtype as it is."""
    return b.cast(x, dtype=f32) if x.type.dtype in (f16, bf16) else x


@decomposes("softmax")
def softmax(b: GraphBuilder, x: Value, dim: int) -> Value:
    """softmax(x) = exp(x - max(x)) / sum(exp(x - max(x)))   along dim"""
    dims = _softmax_dims(x, dim)
    if _dim_size_is_zero(x, dims):
        return x  # nothing to normalize: the result is empty, like x
    y = _opmath(b, x)
    e = b.exp(b.sub(y, b.amax(y, dims=dims, keepdim=True)))
    return _like(b, b.div(e, b.sum(e, dims=dims, keepdim=True)), x)


def _softmax_dims(x: Value, dim: int) -> list:
    """The reduced dims: [dim], or for a rank-0 x (torch accepts dim 0 and -1) every dim,
    which is none: the element alone (softmax 1, log_softmax 0, NaN for inf and NaN)."""
    return [normalize_dim(dim, x.type.rank)] if x.type.rank else []


@decomposes("log_softmax")
def log_softmax(b: GraphBuilder, x: Value, dim: int) -> Value:
    """log_softmax(x) = (x - max(x)) - log(sum(exp(x - max(x))))   along dim"""
    dims = _softmax_dims(x, dim)
    if _dim_size_is_zero(x, dims):
        return x
    y = _opmath(b, x)
    shifted = b.sub(y, b.amax(y, dims=dims, keepdim=True))
    return _like(b, b.sub(shifted, b.log(b.sum(b.exp(shifted), dims=dims, keepdim=True))),
                 x)


@decomposes("layer_norm")
def layer_norm(b: GraphBuilder, x: Value, weight: Value, bias: Value,
               normalized_ndim: int, eps: float) -> Value:
    """layer_norm(x) = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * weight + bias"""
    dims = list(range(x.type.rank - normalized_ndim, x.type.rank))
    y = _opmath(b, x)
    centered = b.sub(y, b.mean(y, dims=dims, keepdim=True))
    var = b.mean(b.mul(centered, centered), dims=dims, keepdim=True)
    return _like(b, b.add(b.mul(b.div(centered, b.sqrt(b.add(var, eps))), weight), bias), x)


@decomposes("rms_norm")
def rms_norm(b: GraphBuilder, x: Value, weight: Value, normalized_ndim: int,
             eps: float) -> Value:
    """rms_norm(x) = x / sqrt(mean(x^2) + eps) * weight"""
    dims = list(range(x.type.rank - normalized_ndim, x.type.rank))
    y = _opmath(b, x)
    ms = b.mean(b.mul(y, y), dims=dims, keepdim=True)
    return _like(b, b.mul(b.div(y, b.sqrt(b.add(ms, eps))), weight), x)


@decomposes("batch_norm")
def batch_norm(b: GraphBuilder, x: Value, mean: Value, var: Value, weight: Value,
               bias: Value, eps: float) -> Value:
    """batch_norm(x) = (x - mean) * (weight / sqrt(var + eps)) + bias   per channel (dim 1)"""
    def per_channel(v: Value) -> Value:  # [C] -> [1, C, 1, ...] so it broadcasts on dim 1
        return b.reshape(v, shape=[1, v.type.shape[0]] + [1] * (x.type.rank - 2))

    scale = b.div(_opmath(b, weight), b.sqrt(b.add(_opmath(b, var), eps)))
    out = b.add(b.mul(b.sub(_opmath(b, x), per_channel(mean)), per_channel(scale)),
                per_channel(bias))
    return _like(b, out, x)


# Note [Max pooling in kernels]: ATen's max_pool2d of an NCHW float tensor takes ~6 ms for
# [32, 32, 32, 32] -> 16x16 on one thread (its channels-last kernel: 0.6 ms).  Where the
# windows tile the input (kernel == stride, no padding or dilation, the sizes multiples of
# the kernel) the pool is pointwise over k*k strided views of x: ATen's scan,
# `m = where(t > m or isnan(t), t, m)` over the window's taps in row-major order (the
# first maximum wins, a NaN wins and the last NaN is kept: the same values and signed
# zeros), which fuses with its readers.  Its gradient is ATen's backward at the indices
# that scan picks (flat h * W + w per window, computed as a kernel over the pooled
# shape): ATen's backward needs the indices, and finding them again through its NCHW
# pool took longer than the pool.  (A select per element of x, reading its window
# through div/mod index maps, took 13 ms for that shape as a kernel.)
def _pool_tiles(x: Value, kernel_size, stride, padding, dilation) -> bool:
    shape = x.type.shape
    return (x.type.rank == 4 and x.type.dtype.is_float and tuple(kernel_size) == tuple(stride)
            and not any(padding) and tuple(dilation) == (1, 1)
            and all(isinstance(d, int) for d in shape)
            and all(shape[2 + i] % kernel_size[i] == 0 and shape[2 + i] > 0 for i in range(2)))


def _pool_taps(b: GraphBuilder, x: Value, k) -> list:
    """The window's elements in scan order, each [N, C, OH, OW] (a strided view of x)."""
    n, c, h, w = x.type.shape
    return [b.slice(b.slice(x, dim=2, start=i, stop=h, step=k[0]), dim=3, start=j, stop=w,
                    step=k[1]) for i in range(k[0]) for j in range(k[1])]


def _picks(b: GraphBuilder, t: Value, m: Value) -> Value:
    return b.logical_or(b.gt(t, m), b.isnan(t))


@decomposes("max_pool2d")
def max_pool2d(b: GraphBuilder, x: Value, kernel_size, stride, padding=(0, 0),
               dilation=(1, 1), ceil_mode=False) -> Value:
    """max_pool2d(x) = the scan m = where(t > m or isnan(t), t, m) over each window's taps,
    when the windows tile x (Note [Max pooling in kernels])"""
    if not _pool_tiles(x, kernel_size, stride, padding, dilation):
        return None
    taps = _pool_taps(b, x, kernel_size)
    m = taps[0]
    for t in taps[1:]:
        m = b.where(_picks(b, t, m), t, m)
    return m


@decomposes("max_pool2d_grad")
def max_pool2d_grad(b: GraphBuilder, g: Value, x: Value, kernel_size, stride,
                    padding=(0, 0), dilation=(1, 1), ceil_mode=False) -> Value:
    """max_pool2d_grad(g, x) = ATen's max_pool2d_with_indices_backward(g, x, indices), the
    indices of the elements the scan picks, when the windows tile x (Note [Max pooling in
    kernels])"""
    if not _pool_tiles(x, kernel_size, stride, padding, dilation):
        return None
    k = list(kernel_size)
    n, c, h, w = x.type.shape
    rows = b.mul(b.reshape(b.arange(end=h // k[0]), shape=[h // k[0], 1]), k[0] * w)
    cols = b.mul(b.arange(end=w // k[1]), k[1])
    taps = _pool_taps(b, x, k)
    m, at = taps[0], b.full(value=0, shape=(), dtype=i64)
    for p, t in enumerate(taps[1:], 1):
        hit = _picks(b, t, m)
        m = b.where(hit, t, m)
        at = b.where(hit, b.full(value=(p // k[1]) * w + p % k[1], shape=(), dtype=i64), at)
    index = b.add(b.add(rows, cols), at)  # flat h * W + w of the pick, as ATen's indices
    return b.aten(g, x, index, fn="torch.ops.aten.max_pool2d_with_indices_backward.default",
                  args=f"T[0], T[1], {k}, {k}, [0, 0], [1, 1], False, T[2]",
                  results=format_results([x.type]))


def _like(b: GraphBuilder, out: Value, x: Value) -> Value:
    """The normalizations return x's dtype, as torch's do, even when weight or bias (or
    the statistics) are wider: bf16 activations with float32 parameters under autocast."""
    if out.type.dtype == x.type.dtype:
        return out
    return b.cast(out, dtype=x.type.dtype)


@decomposes("var")
def var(b: GraphBuilder, x: Value, dims, keepdim: bool, correction: int) -> Value:
    """var(x) = sum((s - mean(s))^2) / max(N - correction, 0)   over dims (N static),
    s = f64(x) - f64(x)[first of its row]: Welford's answer, exact for equal elements
    (Note [How ATen computes var])."""
    axes = list(normalize_dims(dims, x.type.rank)) if dims else list(range(x.type.rank))
    n = 1
    for d in axes:
        n = n * x.type.shape[d]
    if is_symbolic(n):
        return None  # the count is not a number: keep `var` (see the pass's contract)
    if n <= correction:
        # ATen's forward divides by max(N - correction, 0), its backward by N - correction
        # (-0, not NaN, for one element and correction 2) or, without `dim`, gives
        # where(x == mean, NaN, inf): keep `var`, whose VJP does both (corpus
        # grad_var_correction_above_count, grad_var_full_reduction_dof_nonpositive).
        return None
    first = x  # sliced before the cast: a view of x, which a fused kernel reads in place
    for d in axes:
        first = b.slice(first, dim=d, start=0, stop=1)
    shifted = b.sub(_to(b, x, f64), _to(b, first, f64))
    centered = b.sub(shifted, b.mean(shifted, dims=axes, keepdim=True))
    total = b.sum(b.mul(centered, centered), dims=axes, keepdim=keepdim)
    return _like(b, b.div(total, float(max(n - correction, 0))), x)


def _to(b: GraphBuilder, v: Value, dtype) -> Value:
    return v if v.type.dtype == dtype else b.cast(v, dtype=dtype)


# Note [How ATen computes var]
# ATen's CPU var (and std) of several results, or of f16/bf16, is Welford's algorithm in
# f64: exactly 0 where every element of a row is equal (once mean == x every update adds
# 0), and std's backward is masked to 0 only where the variance is exactly 0.  The
# decomposition computes that answer as a two-pass in f64 on the values shifted by their
# row's first element: equal elements shift to exactly 0, and the variance is
# shift-invariant.  It used to be a two-pass in x's dtype, whose mean of three equal
# float32 values a, fl(fl(3a) / 3), can be an ulp from a: a variance of a few ulps and
# an O(1) std gradient where the exact one is 0 (-0.41 for three elements: corpus
# grad_std_of_expanded_input_rounding).
# One result of a float32/float64 tensor is the exception: ATen's std_var_all_cpu takes
# the mean in the tensor's dtype (rounded, by the order of its vectorized sum) and sums
# the squared deviations from it in f64, so eager's `x.std()` of equal elements is a few
# ulps about half the time.  That order cannot be reproduced, so refcomp gives the exact
# answer there too (spec/testing.md, "Ties": the exact answer decides; the fuzzer does not
# draw var or std over a constant group, whose downstream ops would compare eager's
# rounding).


@register_pass("decompose")
def decompose(g: Graph) -> Graph:
    """Rewrite every op in DECOMPOSITIONS into primitives, in place of the node.

    Rewrites: softmax, log_softmax, layer_norm, rms_norm, batch_norm (inference form,
    running statistics), var (when the reduced element count is static; with
    symbolic sizes var stays) and max_pool2d / max_pool2d_grad whose windows tile
    their input (Note [Max pooling in kernels]).  Softmax over an empty dim is its (empty) input.
    f16/bf16 inputs are computed in f32 (var: every dtype in f64) and the result cast
    back, as ATen computes them (Note [Half-precision decompositions]).
    Requires: a verified graph.  Preserves: every value's type; results up to
    rounding (the primitives round after each op, as eager PyTorch's decompositions
    do); inputs, outputs and the order of other nodes.  Leaves fused bodies alone.
    Idempotent (no decomposition produces a composite op).  The rule table runs on
    the rewrite engine (ir/rewrite.py).
    """
    return rewrite(g, RULES)


# op name -> its decomposition, as written above
DECOMPOSITIONS = {rule.name: rule.fn for rule in RULES}
