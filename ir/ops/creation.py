"""Creation ops (full, arange, constant), externs (matmul, conv2d, embedding, pooling, and the
convolution and pooling gradients), random.

Externs are boundaries for fusion: backends call a library (BLAS, PyTorch) for them.
Random ops have effects: they are never removed, merged or folded.  Spec:
spec/ops.md, "Creation", "Extern", "Random".
"""

from __future__ import annotations

import numpy as np

from ir.ops import rules
from ir.ops.registry import CREATION, EXTERN, RANDOM, defop, saves_all
from ir.types import TensorType, bool_, f32, i64, is_symbolic, result_type


def _dtype(d):
    from ir.types import dtype_from_short

    return dtype_from_short(d) if isinstance(d, str) else d


def _static(dims):
    return tuple(int(d) for d in dims)


# --- creation ---------------------------------------------------------------------------
def _full_infer(types, value, shape, dtype, device):
    """dtype and shape as given."""
    return TensorType(_dtype(dtype), shape, device)


defop("full", CREATION, operands=(),
      attrs={"value": "scalar", "shape": ("dims", ()), "dtype": ("dtype", f32),
             "device": ("str", "cpu")},
      infer=_full_infer,
      ref=lambda value, shape, dtype, device: np.full(_static(shape), value, _dtype(dtype).np),
      doc="a tensor of shape filled with value (a rank-0 full is a scalar constant)")


def _size_value_infer(types, value, dtype, device):
    """rank 0, dtype as given."""
    return TensorType(_dtype(dtype), (), device)


# Note [Sizes as tensors]: a size used as a tensor operand (`x / x.shape[0]`, `x * n` with
# an int argument that automatic dynamic made a symbol) is a rank-0 `size_value` whose
# `value` may be a size expression; kernels compute it from their size arguments (the
# kernel scalar `size`), so one kernel serves every value.  Not a `full`: passes that
# fold constants must not see it as one.
defop("size_value", CREATION, operands=(),
      attrs={"value": "dim", "dtype": ("dtype", i64), "device": ("str", "cpu")},
      infer=_size_value_infer,
      ref=lambda value, dtype, device: np.asarray(value).astype(_dtype(dtype).np),
      doc="a rank-0 tensor holding a size: an int or a size expression over the graph's"
          " symbols, converted to dtype")


def _arange_len(start, end, step):
    if step == 0:
        raise TypeError("arange step must be nonzero")
    return max(0, -(-(end - start) // step)) if step > 0 else max(0, -(-(start - end) // -step))


def _arange_infer(types, start, end, step, dtype, device):
    """dtype as given; shape [ceil((end - start) / step)] (at least 0); step != 0.  A
    size-expression `end` (a dynamic length) needs step 1 and end >= start, which the
    tracer guards: the shape is then [end - start]."""
    if is_symbolic(end):
        if step != 1:
            raise TypeError(f"arange to a size expression {end} needs step 1, got {step}")
        return TensorType(_dtype(dtype), (end - start,), device)
    return TensorType(_dtype(dtype), (_arange_len(start, end, step),), device)


defop("arange", CREATION, operands=(),
      attrs={"start": ("int", 0), "end": "dim", "step": ("int", 1), "dtype": ("dtype", i64),
             "device": ("str", "cpu")},
      infer=_arange_infer,
      ref=lambda start, end, step, dtype, device: np.arange(start, end, step).astype(
          _dtype(dtype).np),
      doc="start, start+step, ... < end (integer bounds: the iota of codegen)")


def _constant_infer(types, data, dtype, device="cpu"):
    """dtype as given; the nested lists' shape."""
    return TensorType(_dtype(dtype), np.shape(data), device)


defop("constant", CREATION, operands=(),
      attrs={"data": "tensor", "dtype": "dtype", "device": ("str", "cpu")},
      infer=_constant_infer,
      ref=lambda data, dtype, device="cpu": np.array(data, dtype=_dtype(dtype).np),
      doc="a literal tensor (printed as nested lists)")


# --- extern -----------------------------------------------------------------------------
def _matmul_infer(types):
    """shared dtype (not bool); [..., m, k] @ [..., k, n] -> [..., m, n]; rank-1 sides drop."""
    a, b = types
    if a.dtype == bool_ or b.dtype == bool_:
        raise TypeError("matmul is not defined for bool tensors")
    if a.rank < 1 or b.rank < 1:
        raise TypeError("matmul operands must have rank >= 1")
    if a.rank != b.rank or a.rank == 1:
        if not (a.rank in (1, 2) and b.rank in (1, 2)):
            raise TypeError(f"batched matmul needs equal ranks (expand first): {a}, {b}")
    k_a = a.shape[-1]
    k_b = b.shape[-2] if b.rank > 1 else b.shape[0]
    if k_a != k_b:
        raise TypeError(f"matmul contraction sizes differ: {a} @ {b}")
    if a.rank > 2 and a.shape[:-2] != b.shape[:-2]:
        raise TypeError(f"matmul batch dims differ: {a} @ {b}")
    dtype = result_type(a.dtype, b.dtype)
    if a.dtype != b.dtype:
        raise TypeError(f"matmul operands must share a dtype: {a} @ {b}")
    shape = list(a.shape[:-1]) + (list(b.shape[-1:]) if b.rank > 1 else [])
    if a.rank == 1:
        shape = list(b.shape[:-2]) + list(b.shape[-1:]) if b.rank > 1 else []
    return TensorType(dtype, tuple(shape), rules.same_device(types))


def _matmul_ref(a, b):
    if a.dtype == np.float16:  # accumulate in f32, as torch's CPU kernels do
        return np.matmul(a.astype(np.float32), b.astype(np.float32))
    return np.matmul(a, b)


def _matmul_vjp(b, g, out, x, y):
    # Lift rank-1 operands to matrices ([k] -> [1, k] on the left, [k, 1] on the right),
    # apply dx = g @ y^T, dy = x^T @ g, and reshape each gradient back.  A column-major
    # matrix operand (a transposed weight: F.linear's w.t()) gets its gradient as the
    # transpose of the product of transposes, as ATen's mm_mat1/mat2_backward do, so the
    # weight's own gradient comes out row-major: its layout, which AccumulateGrad keeps
    # without a copy (Note [Gradients in the leaf's layout], ir/autodiff.py).
    x2 = _reshaped(b, x, [1, x.type.shape[0]]) if x.type.rank == 1 else x
    y2 = _reshaped(b, y, [y.type.shape[0], 1]) if y.type.rank == 1 else y
    g2 = _reshaped(b, g, list(x2.type.shape[:-1]) + [y2.type.shape[-1]])
    if _column_major(b, x):
        gx = b.transpose(b.matmul(y2, b.transpose(g2, -1, -2)), -1, -2)
    else:
        gx = b.matmul(g2, b.transpose(y2, -1, -2))
    if _column_major(b, y):
        gy = b.transpose(b.matmul(b.transpose(g2, -1, -2), x2), -1, -2)
    else:
        gy = b.matmul(b.transpose(x2, -1, -2), g2)
    return (_reshaped(b, gx, list(x.type.shape)), _reshaped(b, gy, list(y.type.shape)))


def _column_major(b, v) -> bool:
    """A rank-2 forward value laid out column-major (ATen's test in mm_mat2_backward)."""
    strides = b.forward_strides(v) if b.forward_strides is not None and v.type.rank == 2 \
        else None
    return strides is not None and strides[0] == 1 and strides[1] == v.type.shape[0]


def _reshaped(b, v, shape):
    return v if list(v.type.shape) == list(shape) else b.reshape(v, shape=shape)


defop("matmul", EXTERN, operands=("a", "b"), infer=_matmul_infer, ref=_matmul_ref,
      saves={"a": ("b",), "b": ("a",)},
      vjp=_matmul_vjp,
      doc="a @ b; rank 2 or batched with equal batch dims (the builder broadcasts)")


def _conv_out(size, k, stride, pad, dil):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def _conv2d_infer(types, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """x's dtype; [N, O, (H + 2p - d(kh - 1) - 1) // s + 1, same for W]."""
    x, w = types
    if x.rank != 4 or w.rank != 4:
        raise TypeError(f"conv2d takes NCHW input and OIHW weight, got {x}, {w}")
    if x.shape[1] != w.shape[1] * groups:
        # names only the channel sizes: a dynamic-size retry pins just the symbol named
        # (Note [Specialised dims], refcomp/api.py), not the spatial sizes beside it
        raise TypeError(f"conv2d channels: input has {x.shape[1]}, weight {w.shape[1]} with"
                        f" groups={groups}")
    h = _conv_out(x.shape[2], w.shape[2], stride[0], padding[0], dilation[0])
    wd = _conv_out(x.shape[3], w.shape[3], stride[1], padding[1], dilation[1])
    return TensorType(x.dtype, (x.shape[0], w.shape[0], h, wd), rules.same_device(types))


def _conv2d_ref(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = _conv_out(x.shape[2], kh, stride[0], padding[0], dilation[0])
    ow = _conv_out(x.shape[3], kw, stride[1], padding[1], dilation[1])
    acc = np.float64 if x.dtype == np.float64 else np.float32
    out = np.zeros((n, o, oh, ow), acc)
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg].astype(acc)
        ws = w[g * og:(g + 1) * og].astype(acc)
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dilation[0], j * dilation[1]
                patch = xs[:, :, r0:r0 + stride[0] * oh:stride[0], c0:c0 + stride[1] * ow:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return out.astype(x.dtype)


def _conv2d_vjp(b, g, out, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    conv = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    return (b.conv2d_grad_input(g, w, input_shape=list(x.type.shape), **conv),
            b.conv2d_grad_weight(x, g, weight_shape=list(w.type.shape), **conv))


defop("conv2d", EXTERN, saves=saves_all(("x", "w"), ("x", "w")), operands=("x", "w"),
      attrs={"stride": ("ints", (1, 1)), "padding": ("ints", (0, 0)),
             "dilation": ("ints", (1, 1)), "groups": ("int", 1)},
      infer=_conv2d_infer, ref=_conv2d_ref, vjp=_conv2d_vjp,
      doc="2-D cross-correlation, NCHW x OIHW (bias is a separate add)")


def _conv_patches(n, c, h, w, kh, kw, stride, padding, dilation, oh, ow):
    """For each kernel offset (i, j): the slices of the padded input it reads."""
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dilation[0], j * dilation[1]
            yield i, j, (slice(None), slice(None), slice(r0, r0 + stride[0] * oh, stride[0]),
                         slice(c0, c0 + stride[1] * ow, stride[1]))


_CONV_ATTRS = {"stride": ("ints", (1, 1)), "padding": ("ints", (0, 0)),
               "dilation": ("ints", (1, 1)), "groups": ("int", 1)}


def _conv2d_grad_input_infer(types, input_shape, stride=(1, 1), padding=(0, 0),
                             dilation=(1, 1), groups=1):
    """g's dtype; input_shape (g must be conv2d's output shape for it)."""
    g, w = types
    x = TensorType(g.dtype, tuple(input_shape), g.device)
    if _conv2d_infer([x, w], stride, padding, dilation, groups).shape != g.shape:
        raise TypeError(f"conv2d_grad_input: {g} is not conv2d's output for {x} and {w}")
    return x


def _conv2d_grad_input_ref(g, w, input_shape, stride=(1, 1), padding=(0, 0),
                           dilation=(1, 1), groups=1):
    n, c, h, wd = _static(input_shape)
    o, cg, kh, kw = w.shape
    oh, ow = g.shape[2:]
    acc = np.float64 if g.dtype == np.float64 else np.float32
    # conv2d is linear in x: scatter every output gradient back through the taps it read.
    gx = np.zeros((n, c, h + 2 * padding[0] + stride[0] + dilation[0] * kh,
                   wd + 2 * padding[1] + stride[1] + dilation[1] * kw), acc)
    og = o // groups
    for grp in range(groups):
        gs = g[:, grp * og:(grp + 1) * og].astype(acc)
        ws = w[grp * og:(grp + 1) * og].astype(acc)
        for i, j, where in _conv_patches(n, c, h, wd, kh, kw, stride, padding, dilation, oh, ow):
            view = gx[:, grp * cg:(grp + 1) * cg][where]
            view += np.einsum("nohw,oc->nchw", gs, ws[:, :, i, j])
    return gx[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + wd].astype(g.dtype)


def _conv2d_grad_weight_infer(types, weight_shape, stride=(1, 1), padding=(0, 0),
                              dilation=(1, 1), groups=1):
    """x's dtype; weight_shape (g must be conv2d's output shape for x and it)."""
    x, g = types
    w = TensorType(x.dtype, tuple(weight_shape), x.device)
    if _conv2d_infer([x, w], stride, padding, dilation, groups).shape != g.shape:
        raise TypeError(f"conv2d_grad_weight: {g} is not conv2d's output for {x} and {w}")
    return w


def _conv2d_grad_weight_ref(x, g, weight_shape, stride=(1, 1), padding=(0, 0),
                            dilation=(1, 1), groups=1):
    o, cg, kh, kw = _static(weight_shape)
    n, c, h, wd = x.shape
    oh, ow = g.shape[2:]
    acc = np.float64 if x.dtype == np.float64 else np.float32
    xp = np.pad(x.astype(acc), ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    gw = np.zeros((o, cg, kh, kw), acc)
    og = o // groups
    for grp in range(groups):
        gs = g[:, grp * og:(grp + 1) * og].astype(acc)
        xs = xp[:, grp * cg:(grp + 1) * cg]
        for i, j, where in _conv_patches(n, c, h, wd, kh, kw, stride, padding, dilation, oh, ow):
            gw[grp * og:(grp + 1) * og, :, i, j] = np.einsum("nchw,nohw->oc", xs[where], gs)
    return gw.astype(x.dtype)


defop("conv2d_grad_input", EXTERN, operands=("g", "w"),
      attrs={"input_shape": "dims", **_CONV_ATTRS},
      infer=_conv2d_grad_input_infer, ref=_conv2d_grad_input_ref,
      doc="the gradient of conv2d's input for output gradient g (a transposed convolution;"
          " torch.nn.grad.conv2d_input); conv2d's VJP")
defop("conv2d_grad_weight", EXTERN, operands=("x", "g"),
      attrs={"weight_shape": "dims", **_CONV_ATTRS},
      infer=_conv2d_grad_weight_infer, ref=_conv2d_grad_weight_ref,
      doc="the gradient of conv2d's weight for input x and output gradient g"
          " (torch.nn.grad.conv2d_weight); conv2d's VJP")


def _embedding_infer(types, padding_idx=None):
    """weight's dtype; indices' shape + [weight's row length] (indices: i64/i32)."""
    weight, indices = types
    rules.index_dtype_check(indices, "embedding indices")
    if weight.rank != 2:
        raise TypeError(f"embedding weight must be rank 2, got {weight}")
    return weight.with_shape(tuple(indices.shape) + (weight.shape[1],))


def _embedding_vjp(b, g, out, weight, indices, padding_idx=None):
    # Rows picked by indices get their gradients added (repeats accumulate): index_add.
    # The row at padding_idx (non-negative) gets none, as ATen's embedding_backward.
    if padding_idx is not None:
        pad = b.unsqueeze(b.eq(indices, b.scalar(padding_idx, like=indices.type)),
                          dim=indices.type.rank)
        g = b.where(pad, b.scalar(0.0, like=g.type, dtype=g.type.dtype), g)
    rows = 1
    for d in indices.type.shape:
        rows = rows * d
    flat = b.reshape(indices, shape=[rows])
    zeros = b.full(value=0.0, shape=list(weight.type.shape), dtype=weight.type.dtype,
                   device=weight.type.device)
    return (b.index_add(zeros, flat, b.reshape(g, shape=[rows, weight.type.shape[1]]), dim=0),
            None)


defop("embedding", EXTERN, operands=("weight", "indices"), infer=_embedding_infer,
      attrs={"padding_idx": ("optint", None)}, saves={"weight": ("indices",)},
      ref=lambda weight, indices, padding_idx=None: weight[indices.astype(np.int64)],
      vjp=_embedding_vjp,
      doc="rows of weight selected by indices; the row at padding_idx (if given, >= 0)"
          " gets no gradient (F.embedding)")


def _pool_out(size, k, stride, pad, dil, ceil_mode):
    """torch's pooling_output_shape: a ceil-mode window must start inside the input or
    its left padding."""
    span = size + 2 * pad - dil * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool_infer(name, x, kernel_size, stride, padding, dilation, ceil_mode):
    if not x.dtype.is_float:
        raise TypeError(f"{name} takes a floating input, got {x}")
    if x.rank != 4:
        raise TypeError(f"{name} takes an NCHW input, got {x}")
    if len(kernel_size) != 2 or len(stride) != 2 or len(padding) != 2 or len(dilation) != 2:
        raise TypeError(f"{name}: kernel_size, stride, padding and dilation have 2 entries")
    if min(kernel_size) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise TypeError(f"{name}: kernel_size, stride, dilation >= 1 and padding >= 0")
    shape = list(x.shape[:2])
    for d in range(2):
        k, s, p, dil = kernel_size[d], stride[d], padding[d], dilation[d]
        if p > k // 2:  # torch's CPU check (its meta kernel allows half the dilated extent)
            raise TypeError(f"{name}: padding {p} is more than half the kernel size {k}")
        out = _pool_out(x.shape[2 + d], k, s, p, dil, ceil_mode)
        if out < 1:
            raise TypeError(f"{name}: output size {out} for input {x}")
        shape.append(out)
    return x.with_shape(tuple(shape))


def _max_pool2d_infer(types, kernel_size, stride, padding=(0, 0), dilation=(1, 1),
                      ceil_mode=False):
    """x's dtype (floating); [N, C, out(H), out(W)], out as torch's pooling_output_shape
    (floor or ceil of (H + 2p - d(k - 1) - 1) / s, plus 1); p <= k // 2."""
    return _pool_infer("max_pool2d", types[0], kernel_size, stride, padding, dilation,
                       ceil_mode)


def _pool_windows(x, kernel_size, stride, padding, dilation, out_hw, fill):
    """Each kernel offset's strided view of x padded with `fill`: a list of [N,C,OH,OW]."""
    oh, ow = out_hw
    extent = [(out_hw[d] - 1) * stride[d] + dilation[d] * (kernel_size[d] - 1) + 1
              for d in range(2)]
    pads = [(padding[d], max(0, extent[d] - x.shape[2 + d] - padding[d])) for d in range(2)]
    xp = np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]), constant_values=fill)
    views = []
    for i in range(kernel_size[0]):
        for j in range(kernel_size[1]):
            r0, c0 = i * dilation[0], j * dilation[1]
            views.append(xp[:, :, r0:r0 + stride[0] * oh:stride[0],
                            c0:c0 + stride[1] * ow:stride[1]])
    return views


def _max_pool2d_ref(x, kernel_size, stride, padding=(0, 0), dilation=(1, 1),
                    ceil_mode=False):
    out_hw = [_pool_out(x.shape[2 + d], kernel_size[d], stride[d], padding[d], dilation[d],
                        ceil_mode) for d in range(2)]
    views = _pool_windows(x, kernel_size, stride, padding, dilation, out_hw, -np.inf)
    # np.max propagates NaN, as torch's max_pool2d does.
    return np.max(np.stack(views), axis=0).astype(x.dtype)


_MAX_POOL_ATTRS = {"kernel_size": "ints", "stride": "ints", "padding": ("ints", (0, 0)),
                   "dilation": ("ints", (1, 1)), "ceil_mode": ("bool", False)}

defop("max_pool2d", EXTERN, saves={"x": ("x",)}, operands=("x",), attrs=_MAX_POOL_ATTRS,
      infer=_max_pool2d_infer, ref=_max_pool2d_ref,
      vjp=lambda b, g, out, x, **attrs: (b.max_pool2d_grad(g, x, **attrs),),
      doc="the max over each (dilated) window of an NCHW input; padding counts as -inf")


def _max_pool2d_grad_infer(types, kernel_size, stride, padding=(0, 0), dilation=(1, 1),
                           ceil_mode=False):
    """x's type (g must be max_pool2d's output type for x)."""
    g, x = types
    if _max_pool2d_infer([x], kernel_size, stride, padding, dilation, ceil_mode) != g:
        raise TypeError(f"max_pool2d_grad: {g} is not max_pool2d's output for {x}")
    return x


def _max_pool2d_grad_ref(g, x, kernel_size, stride, padding=(0, 0), dilation=(1, 1),
                         ceil_mode=False):
    # torch's CPU kernel: each window's gradient goes to its first maximum in scan order
    # (a NaN wins, the last one seen); a window of -inf only goes to its first element.
    n, c, h, w = x.shape
    oh, ow = g.shape[2:]
    acc = np.float64 if x.dtype == np.float64 else np.float32
    gx = np.zeros((n, c, h * w), acc)
    for r in range(oh):
        for q in range(ow):
            hs, ws = r * stride[0] - padding[0], q * stride[1] - padding[1]
            rows = [hs + i * dilation[0] for i in range(kernel_size[0])]
            cols = [ws + j * dilation[1] for j in range(kernel_size[1])]
            taps = [y * w + z for y in rows if 0 <= y < h for z in cols if 0 <= z < w]
            if not taps:  # a window wholly in the padding reads nothing
                continue
            vals = x.reshape(n, c, h * w)[:, :, taps].astype(acc)
            best = np.full((n, c), -np.inf, acc)
            arg = np.zeros((n, c), np.int64)
            for k in range(len(taps)):
                take = (vals[:, :, k] > best) | np.isnan(vals[:, :, k])
                best = np.where(take, vals[:, :, k], best)
                arg = np.where(take, k, arg)
            idx = np.asarray(taps)[arg]
            np.add.at(gx, (np.arange(n)[:, None], np.arange(c)[None, :], idx), g[:, :, r, q])
    return gx.reshape(x.shape).astype(x.dtype)


defop("max_pool2d_grad", EXTERN, operands=("g", "x"), attrs=_MAX_POOL_ATTRS,
      infer=_max_pool2d_grad_infer, ref=_max_pool2d_grad_ref,
      doc="max_pool2d's VJP: each window's gradient added at its (first) maximum of x")


def _avg_pool2d_infer(types, kernel_size, stride, padding=(0, 0), ceil_mode=False,
                      count_include_pad=True):
    """x's dtype (floating); [N, C, out(H), out(W)] as max_pool2d with dilation 1."""
    return _pool_infer("avg_pool2d", types[0], kernel_size, stride, padding, (1, 1),
                       ceil_mode)


def _avg_count(size, k, stride, pad, out, count_include_pad):
    """Per output index, the divisor along one dim (torch's avg_pool2d): the window clipped
    to the padded input, or to the input itself without count_include_pad."""
    counts = []
    for o in range(out):
        start = o * stride - pad
        end = min(start + k, size + pad)
        if not count_include_pad:
            start, end = max(start, 0), min(end, size)
        counts.append(end - start)
    return np.array(counts, np.float64)


def _avg_pool2d_ref(x, kernel_size, stride, padding=(0, 0), ceil_mode=False,
                    count_include_pad=True):
    out_hw = [_pool_out(x.shape[2 + d], kernel_size[d], stride[d], padding[d], 1, ceil_mode)
              for d in range(2)]
    acc = np.float64 if x.dtype == np.float64 else np.float32
    views = _pool_windows(x.astype(acc), kernel_size, stride, padding, (1, 1), out_hw, 0)
    rows, cols = (_avg_count(x.shape[2 + d], kernel_size[d], stride[d], padding[d],
                             out_hw[d], count_include_pad) for d in range(2))
    total = np.sum(np.stack(views), axis=0)
    return (total / np.outer(rows, cols)).astype(x.dtype)


_AVG_POOL_ATTRS = {"kernel_size": "ints", "stride": "ints", "padding": ("ints", (0, 0)),
                   "ceil_mode": ("bool", False), "count_include_pad": ("bool", True)}

defop("avg_pool2d", EXTERN, saves={"x": ("x",)}, operands=("x",), attrs=_AVG_POOL_ATTRS,
      infer=_avg_pool2d_infer, ref=_avg_pool2d_ref,
      vjp=lambda b, g, out, x, **attrs: (b.avg_pool2d_grad(
          g, input_shape=list(x.type.shape), **attrs),),
      doc="the mean over each window of an NCHW input (zero padding; the divisor counts"
          " padding unless count_include_pad is false)")


def _avg_pool2d_grad_infer(types, input_shape, kernel_size, stride, padding=(0, 0),
                           ceil_mode=False, count_include_pad=True):
    """g's dtype; input_shape (g must be avg_pool2d's output shape for it)."""
    (g,) = types
    x = TensorType(g.dtype, tuple(input_shape), g.device)
    if _avg_pool2d_infer([x], kernel_size, stride, padding, ceil_mode) != g:
        raise TypeError(f"avg_pool2d_grad: {g} is not avg_pool2d's output for {x}")
    return x


def _avg_pool2d_grad_ref(g, input_shape, kernel_size, stride, padding=(0, 0), ceil_mode=False,
                         count_include_pad=True):
    n, c, h, w = _static(input_shape)
    oh, ow = g.shape[2:]
    acc = np.float64 if g.dtype == np.float64 else np.float32
    rows, cols = (_avg_count(s, kernel_size[d], stride[d], padding[d], o, count_include_pad)
                  for d, (s, o) in enumerate(((h, oh), (w, ow))))
    share = g.astype(acc) / np.outer(rows, cols)
    gx = np.zeros((n, c, h, w), acc)
    for r in range(oh):
        for q in range(ow):
            hs, ws = r * stride[0] - padding[0], q * stride[1] - padding[1]
            h0, h1 = max(hs, 0), min(hs + kernel_size[0], h)
            w0, w1 = max(ws, 0), min(ws + kernel_size[1], w)
            gx[:, :, h0:h1, w0:w1] += share[:, :, r, q][:, :, None, None]
    return gx.astype(g.dtype)


defop("avg_pool2d_grad", EXTERN, operands=("g",),
      attrs={"input_shape": "dims", **_AVG_POOL_ATTRS},
      infer=_avg_pool2d_grad_infer, ref=_avg_pool2d_grad_ref,
      doc="avg_pool2d's VJP: each window's gradient shared over its inputs by the divisor")


# --- random -----------------------------------------------------------------------------
def _random_infer(types, shape, dtype=f32, device="cpu", order=None):
    """dtype (floating) and shape as given; `order` a permutation of the dims."""
    d = _dtype(dtype)
    if not d.is_float:
        raise TypeError(f"random ops produce floats, not {d}")
    if order is not None and sorted(order) != list(range(len(shape))):
        raise TypeError(f"random op order {list(order)} is not a permutation of the"
                        f" {len(shape)} dims")
    return TensorType(d, shape, device)


# `order`: the memory order in which the draws fill the result, dims from outermost to
# innermost (None: row-major).  Eager fills a tensor in its memory order, so a draw for
# `rand_like(x.t())` fills x.t()'s layout (Note [Random draws in eager's layout],
# refcomp/tracer/eager_layout.py); the value at each index is what eager puts there.
_RANDOM_ATTRS = {"shape": "dims", "dtype": ("dtype", f32), "device": ("str", "cpu"),
                 "order": ("ints", None)}


def _in_order(draw, shape, order):
    """`draw(physical_shape)` (an array filled row-major) read back in `order`."""
    shape = _static(shape)
    if order is None:
        return draw(shape)
    inverse = [list(order).index(d) for d in range(len(shape))]
    return np.ascontiguousarray(draw(tuple(shape[d] for d in order)).transpose(inverse))

# The largest value below 1 in each float dtype: a draw rounded to a narrow dtype could
# otherwise become 1.0 and leave [0, 1).
_BELOW_ONE = {"f16": 1 - 2**-11, "bf16": 1 - 2**-8, "f32": 1 - 2**-24, "f64": 1 - 2**-53}


def _rand_ref(shape, dtype=f32, device="cpu", order=None, rng=None):
    d = _dtype(dtype)
    draw = _in_order((rng or np.random.default_rng()).random, shape, order)
    return np.minimum(draw, _BELOW_ONE[d.short]).astype(d.np)


defop("rand", RANDOM, operands=(), attrs=_RANDOM_ATTRS, infer=_random_infer, effects=True,
      ref=_rand_ref, doc="uniform on [0, 1) (also after rounding to dtype); draws from the"
      " interpreter's generator")
defop("randn", RANDOM, operands=(), attrs=_RANDOM_ATTRS, infer=_random_infer, effects=True,
      ref=lambda shape, dtype=f32, device="cpu", order=None, rng=None: _in_order(
          (rng or np.random.default_rng()).standard_normal, shape, order).astype(
              _dtype(dtype).np),
      doc="standard normal; draws from the interpreter's generator")


def _dropout_mask_infer(types, shape, p, dtype=f32, device="cpu", order=None):
    """dtype (floating) and shape as given; 0 <= p < 1."""
    if not 0.0 <= p < 1.0:
        raise TypeError(f"dropout_mask needs 0 <= p < 1, got {p}")
    return _random_infer(types, shape, dtype, device, order)


def _dropout_mask_ref(shape, p, dtype=f32, device="cpu", order=None, rng=None):
    keep = _in_order((rng or np.random.default_rng()).random, shape, order) >= p
    return (keep / (1.0 - p)).astype(_dtype(dtype).np)


defop("dropout_mask", RANDOM, operands=(), attrs={**_RANDOM_ATTRS, "p": "float"},
      infer=_dropout_mask_infer, ref=_dropout_mask_ref, effects=True,
      doc="training dropout's scaled mask: 1 / (1 - p) with probability 1 - p, else 0;"
          " backends draw it as eager's CPU dropout does (bernoulli_(1 - p) then"
          " div_(1 - p)), so the stream equals eager's")
