"""The "eager" backend: execute the IR op by op with torch, recording autograd.

Owns: `EAGER_OPS`, the table from every registered op name to a torch
implementation with the semantics of the op's numpy `ref` (ir/ops/), and the
plan that runs a graph through that table.  Must not know: the frontend.
Spec: spec/codegen.md, "Backends".

The plan, autograd and random draws: spec/codegen.md, "Backends".

Note [Operand casts]: IR pointwise ops promote all operands with
`promote_types`, rank-0 operands included, while torch lets a rank-0 tensor of a
higher dtype lose to a ranked one.  Each step therefore casts its operands to
the promoted dtype (the result dtype for ops that compute in floating point on
integers; `where`'s condition stays bool) where they differ, decided at compile
time, so torch never promotes on its own.  f16/bf16 are not lifted to f32 here
(unlike `ir.scalar.compute_dtypes` for kernels): torch's kernels do that inside.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import sympy
import torch
import torch.nn.functional as F

from codegen import gemm
from codegen.backends import Backend, register_backend
from codegen.torch_bridge import torch_dtype
from ir.graph import Graph, Node
from ir.ops import rules
from ir.ops.registry import CREATION, all_ops
from ir.types import bf16, f16, f32, is_symbolic, result_type, u8

# An entry makes the step function for one node: make(node, attrs) -> fn(*tensors).
# `attrs` are the node's attributes with symbolic dims already evaluated.
Maker = Callable[[Node, dict], Callable]
EAGER_OPS: dict[str, Maker] = {}


def _in_types(node):
    return [v.type for v in node.inputs]


# --- pointwise --------------------------------------------------------------------------
def _operand_dtypes(op_name, have, result):
    """The dtype each operand is cast to; see Note [Operand casts]."""
    if op_name == "where":
        value = result_type(*have[1:])
        return [have[0], value, value]
    common = result_type(*have)
    if result.is_float and not common.is_inexact:
        common = result  # torch.exp of ints computes in the default float
    return [common] * len(have)


def _pointwise(torch_fn):
    """A maker for a pointwise op: cast operands per Note [Operand casts], then call."""
    def make(node, attrs):
        fn = (lambda *xs: torch_fn(*xs, **attrs)) if attrs else torch_fn
        have = [t.dtype for t in _in_types(node)]
        want = _operand_dtypes(node.op.name, have, node.outputs[0].type.dtype)
        casts = [torch_dtype(w) if w != h else None for h, w in zip(have, want)]
        if not any(casts):
            return fn
        return lambda *xs: fn(*[x if c is None else x.to(c) for x, c in zip(xs, casts)])
    return make


def _floor_like(fn):
    # Rounding leaves ints unchanged (the ref's rule); torch.round rounds half to even
    # like np.round.
    return lambda x: fn(x) if x.is_floating_point() else x


_POINTWISE = {
    "neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "sign": torch.sign,
    "floor": _floor_like(torch.floor), "ceil": _floor_like(torch.ceil),
    "round": _floor_like(torch.round),
    "trunc": _floor_like(torch.trunc),
    "exp": torch.exp, "log": torch.log, "log1p": torch.log1p, "expm1": torch.expm1,
    "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf, "silu": F.silu,
    "reciprocal": torch.reciprocal, "gelu": F.gelu,
    "logical_not": torch.logical_not, "isnan": torch.isnan, "bitwise_not": torch.bitwise_not,
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.true_divide,
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "fmod": torch.fmod,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
    "atan2": torch.atan2,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
    "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "bitwise_left_shift": torch.bitwise_left_shift,
    "bitwise_right_shift": torch.bitwise_right_shift,
    "where": torch.where,
    "complex": torch.complex, "conj": torch.conj_physical, "angle": torch.angle,
}
for _name, _fn in _POINTWISE.items():
    EAGER_OPS[_name] = _pointwise(_fn)


def _as_dtype_scalar(value, dtype):
    """A Python scalar converted the way the ref's `np.asarray(v).astype(dtype)` does."""
    return np.asarray(value).astype(dtype.np).item()


def _make_clamp(node, attrs):
    # Bound in the result dtype (the type rule applies torch's weak scalar promotion).
    dtype = node.outputs[0].type.dtype
    lo, hi = attrs["min"], attrs["max"]
    lo = None if lo is None else _as_dtype_scalar(lo, dtype)
    hi = None if hi is None else _as_dtype_scalar(hi, dtype)
    if lo is None and hi is None:
        return lambda x: x
    if dtype != node.inputs[0].type.dtype:
        target = torch_dtype(dtype)
        return lambda x: torch.clamp(x.to(target), lo, hi)
    return lambda x: torch.clamp(x, lo, hi)


def _make_cast(node, attrs):
    target = torch_dtype(attrs["dtype"])
    # Tensor.to truncates float -> int toward zero and maps nonzero -> True, as the ref.
    return lambda x: x.to(target)


EAGER_OPS["clamp"] = _make_clamp
EAGER_OPS["cast"] = _make_cast
EAGER_OPS["copy"] = lambda node, attrs: (
    lambda x: x.clone(memory_format=torch.contiguous_format))
EAGER_OPS["stop_gradient"] = lambda node, attrs: (lambda x: x.detach())


# --- reductions -------------------------------------------------------------------------
def _axes(node, dims):
    """Reduction axes; None when they are all the axes of a rank-0 tensor."""
    axes = rules.normalize_dims(dims, node.inputs[0].type.rank)
    return axes if axes else None


def _accumulate_dtype(node):
    # Sums and products of ints and bools accumulate in i64 (the type rule says so).
    return torch_dtype(node.outputs[0].type.dtype)


def _make_sum(node, attrs):
    axes, keep, acc = _axes(node, attrs["dims"]), attrs["keepdim"], _accumulate_dtype(node)
    return lambda x: torch.sum(x, dim=axes, keepdim=keep, dtype=acc)


def _make_prod(node, attrs):
    # torch.prod reduces one dim at a time: reduce each axis with keepdim, then squeeze.
    axes, keep, acc = _axes(node, attrs["dims"]), attrs["keepdim"], _accumulate_dtype(node)
    rank = node.inputs[0].type.rank
    if axes is None or len(axes) == rank:
        out_shape = (1,) * rank if keep else ()
        return lambda x: torch.prod(x, dtype=acc).reshape(out_shape)

    def prod(x):
        for axis in reversed(axes):
            x = torch.prod(x, axis, keepdim=True, dtype=acc)
        return x if keep else x.squeeze(axes)
    return prod


def _reduction(torch_fn):
    def make(node, attrs):
        axes, keep = _axes(node, attrs["dims"]), attrs["keepdim"]
        return lambda x: torch_fn(x, dim=axes, keepdim=keep)
    return make


def _extremum(torch_fn, whole_fn):
    """amax/amin.  Without dims or keepdim (`x.max()`, `x.min()`; the tracer records
    `torch.amax(x)` over every dim, named) as torch.max/min(x), whose backward gives the
    elements that are not the extremum exactly 0 (masked_fill), where amax's multiplies
    its share by the mask, NaN * 0 = NaN for a NaN gradient (`x.min().std()` of one
    element); refcomp's VJP (where(hit, share, 0)) is torch.max/min's too (corpus
    grad_full_min_nan_gradient_eager)."""
    def make(node, attrs):
        axes, keep = _axes(node, attrs["dims"]), attrs["keepdim"]
        x = node.inputs[0].type
        if x.rank > 0 and not keep and not attrs["dims"] and \
                all(isinstance(d, int) and d > 0 for d in x.shape):
            return whole_fn
        return lambda t: torch_fn(t, dim=axes, keepdim=keep)
    return make


def _make_truth(torch_fn):
    # torch.any/all return u8 for a u8 input and bool otherwise; cast if the IR says else.
    def make(node, attrs):
        axes, keep = _axes(node, attrs["dims"]), attrs["keepdim"]
        have, out = node.inputs[0].type.dtype, node.outputs[0].type.dtype
        if out == have or (out.is_bool and have != u8):
            return lambda x: torch_fn(x, dim=axes, keepdim=keep)
        target = torch_dtype(out)
        return lambda x: torch_fn(x, dim=axes, keepdim=keep).to(target)
    return make


def _make_var(node, attrs):
    axes, keep, corr = _axes(node, attrs["dims"]), attrs["keepdim"], attrs["correction"]
    # dims=() is var without `dim`, whose ATen backward has its own rule where N -
    # correction <= 0 (corpus grad_var_full_reduction_dof_nonpositive)
    axes = axes if attrs["dims"] else None
    return lambda x: torch.var(x, dim=axes, keepdim=keep, correction=corr)


def _make_arg(torch_arg):
    # torch's argmax/argmin already return the first NaN's index, like the ref.
    def make(node, attrs):
        dim, keep = attrs["dim"], attrs["keepdim"]
        fn = torch_arg
        if node.inputs[0].type.dtype.is_bool:  # torch rejects bool; u8 orders the same
            fn = lambda x, **kw: torch_arg(x.to(torch.uint8), **kw)  # noqa: E731
        if dim is None:
            shape = (1,) * node.inputs[0].type.rank if keep else ()
            return lambda x: fn(x).reshape(shape)
        return lambda x: fn(x, dim=dim, keepdim=keep)
    return make


EAGER_OPS.update({
    "sum": _make_sum, "prod": _make_prod,
    "amax": _extremum(torch.amax, torch.max), "amin": _extremum(torch.amin, torch.min),
    "mean": _reduction(torch.mean),
    "any": _make_truth(torch.any), "all": _make_truth(torch.all),
    "var": _make_var, "argmax": _make_arg(torch.argmax), "argmin": _make_arg(torch.argmin),
})


# --- layout -----------------------------------------------------------------------------
def _view_as_complex(x):
    # torch needs a last stride 1 and even other strides: a pair an op left otherwise
    # (a transposed kernel output, an expand of one pair) is copied first
    try:
        return torch.view_as_complex(x)
    except RuntimeError:
        return torch.view_as_complex(x.contiguous())


def _make_slice(node, attrs):
    d = rules.normalize_dim(attrs["dim"], node.inputs[0].type.rank)
    index = (slice(None),) * d + (slice(attrs["start"], attrs["stop"], attrs["step"]),)
    # Tensor indexing clamps start/stop exactly as Python slicing does.
    return lambda x: x[index]


def _make_squeeze(node, attrs):
    rank = node.inputs[0].type.rank
    axes = rules.normalize_dims(attrs["dims"], rank) if attrs["dims"] else None
    if axes is None:
        return torch.squeeze
    return lambda x: torch.squeeze(x, axes)  # torch keeps listed dims that are not size 1


def _make_pad(node, attrs):
    pads, value = tuple(attrs["pads"]), _as_dtype_scalar(attrs["value"],
                                                         node.inputs[0].type.dtype)
    if any(p < 0 for p in pads):
        raise ValueError(f"pad {list(pads)}: negative padding is a slice; use slice")
    return lambda x: F.pad(x, pads, value=value)


def _wrap_index(index, size):
    # numpy's take wraps negative indices once; torch's index_select and gather reject them.
    return torch.where(index < 0, index + size, index).to(torch.int64)


def _make_index_select(node, attrs):
    d = rules.normalize_dim(attrs["dim"], node.inputs[0].type.rank)

    def index_select(x, index):
        if x.numel() == 0 and x.shape[d] > 0:
            # Nothing to gather, so no index to check, as in ATen's getitem (index_select
            # itself checks them all): an out-of-range index into an empty result is no
            # error (corpus index_out_of_bounds_into_empty_result).  Index 0 is in range
            # and reads nothing; gathering with it records autograd as eager's getitem
            # does (a fresh empty tensor would not require grad: corpus
            # grad_index_of_empty_input_eager).  Where dim d itself is empty the graph's
            # bounds check raises IndexError (Note [Runtime checks]).
            index = torch.zeros(index.shape, dtype=torch.int64, device=x.device)
        elif x.shape[d] == 0 and index.numel():
            return x.new_empty(x.shape[:d] + (index.numel(),) + x.shape[d + 1:])
        return torch.index_select(x, d, _wrap_index(index, x.shape[d]))
    return index_select


# Note [Gather under autograd]: ATen's GatherBackward saves its input, so modifying the
# input in place after the graph makes the backward raise.  The tracer builds max(dim) and
# min(dim) under grad as a gather at argmax's indices, and eager's MaxBackward saves only
# the indices (corpus grad_max_dim_input_modified_false_raise).  So an input that requires
# grad is gathered by advanced indexing, whose IndexBackward saves the indices and the
# input's sizes; the same values and gradient (index_put with accumulate, as gather's
# scatter_add).  Where eager's node saves the input (torch.gather itself), refcomp's
# version checks at graph boundaries raise eager's error (Note [Saved by eager]).
def _make_gather(node, attrs):
    rank = node.inputs[0].type.rank
    d = rules.normalize_dim(attrs["dim"], rank)

    def gather(x, index):
        index = _wrap_index(index, x.shape[d])
        if not (x.requires_grad and rank):
            return torch.gather(x, d, index)
        where = [index if k == d else
                 torch.arange(n, device=index.device).view([-1 if j == k else 1
                                                             for j in range(rank)])
                 for k, n in enumerate(index.shape)]
        return x[tuple(where)]
    return gather


def _scatter(torch_fn, node, attrs):
    x = node.inputs[0].type
    if x.rank == 0:  # torch's index_add/scatter_add take no rank-0 self: add directly
        return lambda x, index, src: x + src.sum() if index.numel() else x.clone()
    d = rules.normalize_dim(attrs["dim"], x.rank)
    return lambda x, index, src: torch_fn(x, d, _wrap_index(index, x.shape[d]), src)


def _with_attr(call, name):
    """A maker calling `call(*tensors, value)` with attribute `name` bound at plan time."""
    def make(node, attrs):
        value = attrs[name]
        value = tuple(value) if isinstance(value, (list, tuple)) else value
        return lambda *xs: call(*xs, value)
    return make


EAGER_OPS.update({
    "reshape": _with_attr(torch.reshape, "shape"),
    "permute": _with_attr(torch.permute, "perm"),
    "slice": _make_slice,
    "squeeze": _make_squeeze,
    "unsqueeze": _with_attr(torch.unsqueeze, "dim"),
    "expand": _with_attr(torch.Tensor.expand, "shape"),
    "cat": lambda node, attrs: (lambda *xs, dim=attrs["dim"]: torch.cat(xs, dim)),
    # a lazily conjugated input's values are its conjugates (torch refuses the view)
    "view_as_real": lambda node, attrs: (lambda x: torch.view_as_real(x.resolve_conj())),
    "view_as_complex": lambda node, attrs: _view_as_complex,
    "pad": _make_pad,
    "slice_scatter": lambda node, attrs: (
        lambda x, src, a=attrs: torch.slice_scatter(x, src, a["dim"], a["start"], a["stop"],
                                                    a["step"])),
    "index_select": _make_index_select,
    "gather": _make_gather,
    "index_add": lambda node, attrs: _scatter(torch.index_add, node, attrs),
    "scatter_add": lambda node, attrs: _scatter(torch.scatter_add, node, attrs),
})


# --- creation, extern, random -----------------------------------------------------------
def _make_size_value(node, attrs):
    value, dtype, device = attrs["value"], torch_dtype(attrs["dtype"]), attrs["device"]
    return lambda: torch.tensor(value, dtype=dtype, device=device)


def _make_full(node, attrs):
    shape, value = tuple(attrs["shape"]), attrs["value"]
    dtype, device = torch_dtype(attrs["dtype"]), attrs["device"]
    return lambda: torch.full(shape, value, dtype=dtype, device=device)


def _make_arange(node, attrs):
    start, end, step = attrs["start"], attrs["end"], attrs["step"]
    dtype, device = torch_dtype(attrs["dtype"]), attrs["device"]
    # The ref counts in integers and then casts, so arange in i64 and cast.
    return lambda: torch.arange(start, end, step, dtype=torch.int64, device=device).to(dtype)


def _make_constant(node, attrs):
    data, dtype, device = attrs["data"], attrs["dtype"], attrs["device"]
    # Through the ref's numpy array, so bf16 data rounds as the reference rounds it.
    array = np.array(data, dtype=dtype.np)
    return lambda: torch.from_numpy(array.copy()).to(device=device, dtype=torch_dtype(dtype))


def _make_embedding(node, attrs):
    # Advanced indexing wraps negative indices like the ref's weight[indices]; with a
    # padding row, F.embedding, whose backward gives that row no gradient (the tracer
    # checks the indices' range).
    pad = attrs.get("padding_idx")
    if pad is not None:
        return lambda weight, indices: F.embedding(indices.to(torch.int64), weight, pad)
    return lambda weight, indices: weight[indices.to(torch.int64)]


def _make_conv2d(node, attrs):
    stride, padding = tuple(attrs["stride"]), tuple(attrs["padding"])
    dilation, groups = tuple(attrs["dilation"]), attrs["groups"]
    return lambda x, w: F.conv2d(x, w, None, stride, padding, dilation, groups)


def _make_max_pool2d(node, attrs):
    k, s, p = tuple(attrs["kernel_size"]), tuple(attrs["stride"]), tuple(attrs["padding"])
    d, ceil_mode = tuple(attrs["dilation"]), attrs["ceil_mode"]
    return lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode)


def _make_avg_pool2d(node, attrs):
    k, s, p = tuple(attrs["kernel_size"]), tuple(attrs["stride"]), tuple(attrs["padding"])
    ceil_mode, include = attrs["ceil_mode"], attrs["count_include_pad"]
    return lambda x: F.avg_pool2d(x, k, s, p, ceil_mode, include)


def _conv_args(attrs):
    return (tuple(attrs["stride"]), tuple(attrs["padding"]), tuple(attrs["dilation"]),
            attrs["groups"])


def _make_conv2d_grad_input(node, attrs):
    shape, conv = tuple(int(d) for d in attrs["input_shape"]), _conv_args(attrs)
    return lambda g, w: torch.nn.grad.conv2d_input(shape, w, g, *conv)


def _make_conv2d_grad_weight(node, attrs):
    shape, conv = tuple(int(d) for d in attrs["weight_shape"]), _conv_args(attrs)
    return lambda x, g: torch.nn.grad.conv2d_weight(x, shape, g, *conv)


def _make_max_pool2d_grad(node, attrs):
    k, s, p = tuple(attrs["kernel_size"]), tuple(attrs["stride"]), tuple(attrs["padding"])
    d, ceil_mode = tuple(attrs["dilation"]), attrs["ceil_mode"]
    aten = torch.ops.aten

    def grad(g, x):
        # ATen's own backward needs the argmax indices: recompute them from x, through
        # ATen's channels-last kernel for a 4-d NCHW x (the same scan and indices, ~5x
        # faster than its NCHW kernel, the copy included).
        xs = x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x
        _, idx = aten.max_pool2d_with_indices(xs, k, s, p, d, ceil_mode)
        return aten.max_pool2d_with_indices_backward(g, x, k, s, p, d, ceil_mode,
                                                     idx.contiguous())
    return grad


def _make_avg_pool2d_grad(node, attrs):
    k, s, p = tuple(attrs["kernel_size"]), tuple(attrs["stride"]), tuple(attrs["padding"])
    ceil_mode, include = attrs["ceil_mode"], attrs["count_include_pad"]
    shape = tuple(int(d) for d in attrs["input_shape"])
    aten = torch.ops.aten

    def grad(g):
        like = g.new_empty(shape)  # only its shape is read
        return aten.avg_pool2d_backward(g, like, k, s, p, ceil_mode, include, None)
    return grad


def _laid_out(attrs):
    """A new tensor of the node's shape laid out in its memory `order` (outermost dim
    first; None: row-major), as the tensor eager fills with its draws is (Note [Random
    draws in eager's layout], refcomp/tracer/eager_layout.py)."""
    shape, order = tuple(attrs["shape"]), attrs.get("order")
    dtype, device = torch_dtype(attrs["dtype"]), attrs["device"]
    if order is None:
        return torch.empty(shape, dtype=dtype, device=device)
    inverse = [list(order).index(d) for d in range(len(shape))]
    return torch.empty([shape[d] for d in order], dtype=dtype, device=device).permute(inverse)


def _random(fill):
    # torch.rand / torch.randn are empty(...).uniform_() / .normal_(): the same draws,
    # made on a tensor of eager's layout (ATen's normal_ draws differently on a
    # non-contiguous tensor, so the draw must happen on that very layout).
    def make(node, attrs):
        return lambda: fill(_laid_out(attrs))
    return make


def _make_dropout_mask(node, attrs):
    keep = 1.0 - attrs["p"]
    # ATen's CPU dropout (at::native::_dropout): empty_like(x).bernoulli_(1 - p), then
    # div_(1 - p): the same draws from the same generator as eager's F.dropout.
    return lambda: _laid_out(attrs).bernoulli_(keep).div_(keep)


EAGER_OPS.update({
    "dropout_mask": _make_dropout_mask,
    "full": _make_full, "size_value": _make_size_value, "arange": _make_arange,
    "constant": _make_constant,
    "matmul": lambda node, attrs: gemm.matmul,  # Note [Strided batched matmul]
    "conv2d": _make_conv2d,
    "embedding": _make_embedding,
    "max_pool2d": _make_max_pool2d, "avg_pool2d": _make_avg_pool2d,
    "conv2d_grad_input": _make_conv2d_grad_input,
    "conv2d_grad_weight": _make_conv2d_grad_weight,
    "max_pool2d_grad": _make_max_pool2d_grad, "avg_pool2d_grad": _make_avg_pool2d_grad,
    "rand": _random(torch.Tensor.uniform_), "randn": _random(torch.Tensor.normal_),
})


# --- composite --------------------------------------------------------------------------
def _make_layer_norm(node, attrs):
    first, eps = node.inputs[0].type.rank - attrs["normalized_ndim"], attrs["eps"]
    return lambda x, w, b: F.layer_norm(x, x.shape[first:], w, b, eps)


def _make_rms_norm(node, attrs):
    first, eps = node.inputs[0].type.rank - attrs["normalized_ndim"], attrs["eps"]
    return lambda x, w: F.rms_norm(x, x.shape[first:], w, eps)


def _make_batch_norm(node, attrs):
    eps = attrs["eps"]
    shape = (1, -1) + (1,) * (node.inputs[0].type.rank - 2)

    dtypes = {v.type.dtype for v in node.inputs}
    mixed = len(dtypes) > 1
    half_with_float = node.inputs[0].type.dtype in (f16, bf16) and \
        dtypes <= {node.inputs[0].type.dtype, f32}

    def batch_norm(x, mean, var, w, b):
        if mean.requires_grad or var.requires_grad or (mixed and not half_with_float):
            # F.batch_norm does not differentiate running statistics, nor take float
            # statistics of another float dtype than the input's; the ref's formula does.
            scale = w / torch.sqrt(var + eps)
            out = (x - mean.reshape(shape)) * scale.reshape(shape) + b.reshape(shape)
            return out.to(x.dtype)
        if mixed:
            # A half input with float32 statistics and the tracer's half weight and bias:
            # ATen's mixed-type path computes in float32 and takes float32 parameters
            # only (corpus grad_batch_norm_half_input_float_stats_eager).
            mean, var, w, b = (t.float() for t in (mean, var, w, b))
        return F.batch_norm(x, mean, var, w, b, False, 0.0, eps)
    return batch_norm


EAGER_OPS.update({
    "softmax": _with_attr(torch.softmax, "dim"),
    "log_softmax": _with_attr(torch.log_softmax, "dim"),
    "layer_norm": _make_layer_norm,
    "rms_norm": _make_rms_norm,
    "batch_norm": _make_batch_norm,
})


# --- the plan ---------------------------------------------------------------------------
class EagerError(RuntimeError):
    """A graph the eager backend cannot plan (an op without an entry, an unbound size)."""


def missing_ops() -> list[str]:
    """Registered ops with no eager implementation (a test keeps this empty)."""
    return sorted(op.name for op in all_ops() if op.name not in EAGER_OPS and op.name != "fused")


def _symbol_bindings(graph: Graph) -> list[tuple]:
    """(symbol, input index, dim index) for each size symbol an input binds."""
    seen, out = set(), []
    for i, value in enumerate(graph.inputs):
        for d, dim in enumerate(value.type.shape):
            if is_symbolic(dim) and dim.is_Symbol and dim not in seen:
                seen.add(dim)
                out.append((dim, i, d))
    return out


def _symbolic_attr_names(node: Node) -> list[str]:
    return [name for name, spec in node.op.attrs.items()
            if spec.kind == "dims" and any(is_symbolic(d) for d in node.attrs[name])
            or spec.kind == "dim" and is_symbolic(node.attrs[name])]


def _dims_resolver(node: Node, dims, symbols):
    """A function from the tuple of symbol values to the concrete dims (no sympy per call)."""
    free = set().union(*(d.free_symbols for d in dims if is_symbolic(d)))
    if not free <= set(symbols):
        unbound = ", ".join(sorted(map(str, free - set(symbols))))
        raise EagerError(f"{node.op.name}: size symbol(s) {unbound} are bound by no input"
                         " of the graph (or fused body) it is in")
    fns = [sympy.lambdify(symbols, d, modules=[{"floor": math.floor, "ceiling": math.ceil},
                                               "math"]) if is_symbolic(d) else d
           for d in dims]
    return lambda sizes: tuple(int(f(*sizes)) if callable(f) else f for f in fns)


def _make_step(node: Node, symbols, options) -> Callable:
    if node.body is not None:
        body = compile_graph(node.body, options)
        if len(node.outputs) == 1:
            return lambda *xs: body(*xs)[0]
        return body
    try:
        maker = EAGER_OPS[node.op.name]
    except KeyError:
        raise EagerError(f"the eager backend has no implementation of {node.op.name!r}")
    dynamic = _symbolic_attr_names(node)
    if not dynamic:
        return maker(node, node.attrs)
    resolvers = {name: _dims_resolver(node, node.attrs[name], symbols)
                 if node.op.attrs[name].kind == "dims" else
                 (lambda r: lambda sizes: r(sizes)[0])(
                     _dims_resolver(node, (node.attrs[name],), symbols))
                 for name in dynamic}

    # Attributes with symbolic sizes: evaluate them from this call's sizes (the last
    # operand, see `compile_graph`) and make the step then; a few microseconds.
    def dynamic_step(*operands):
        *xs, sizes = operands
        attrs = dict(node.attrs)
        for name, resolve in resolvers.items():
            attrs[name] = resolve(sizes)
        return maker(node, attrs)(*xs)
    return dynamic_step


def _checked(step, node: Node):
    """Wrap a step so that each result's dtype and rank are checked against its type."""
    expected = [(torch_dtype(v.type.dtype), v.type.shape) for v in node.outputs]

    def check(*xs):
        result = step(*xs)
        results = result if isinstance(result, (list, tuple)) else [result]
        for r, (dtype, shape) in zip(results, expected):
            static = all(not is_symbolic(d) for d in shape)
            if r.dtype != dtype or r.dim() != len(shape) or (static and
                                                            tuple(r.shape) != tuple(shape)):
                raise EagerError(f"{node.op.name} produced {r.dtype}{list(r.shape)}, its type"
                                 f" is {dtype}{list(shape)}")
        return result
    return check


def _constant_value(node: Node, fn: Callable):
    """The tensor a creation node always makes, made once now; None if it must run per call.

    Note [Cached constants]: `full`, `arange` and `constant` with static attributes
    make the same tensor on every call, so the plan makes it once.  Steps never write
    their operands, so sharing is safe; outputs that may alias a cached constant are
    cloned before they reach the caller (see `compile_graph`).  The tensor is made
    outside inference mode so that later calls that record autograd can save it.
    """
    if node.op.category != CREATION or node.body is not None or _symbolic_attr_names(node):
        return None
    with torch.inference_mode(False), torch.no_grad():
        return fn()


def _may_alias(node: Node, aliased: set) -> bool:
    """Whether a result of `node` may share memory with a value in `aliased`.

    Conservative: torch may return a view of the first operand (reshape, permute,
    slice, ...) or the operand itself (a cast to its own dtype, floor of an int, clamp
    without bounds), always in the operand's dtype; a fused body may return an input.
    """
    if node.body is not None:
        return any(v in aliased for v in node.inputs)
    return (bool(node.inputs) and node.inputs[0] in aliased
            and node.outputs[0].type.dtype == node.inputs[0].type.dtype)


# Note [Eager's autograd formula]: the eager backend records autograd, and what a backward
# node saves decides when eager's backward raises "modified by an inplace operation".
# `x ** 2` is pow.Tensor_Scalar in eager, whose backward saves x; the IR's pow with a
# constant 0-d exponent run as pow.Tensor_Tensor saves its result as well, so an in-place
# op on the result made the backward raise where eager's does not.  A pow by a cached
# 0-d constant therefore runs with the exponent as a Python number (where that keeps the
# result dtype: a number does not promote the base).
def _is_pow_of_a_number(node: Node, constants: dict) -> bool:
    if node.body is not None or node.op.name != "pow" or node.inputs[1] not in constants:
        return False
    base, out = node.inputs[0].type.dtype, node.outputs[0].type.dtype
    return constants[node.inputs[1]].dim() == 0 and base == out


def _pow_by_a_number(exponent) -> Callable:
    return lambda base, _: torch.pow(base, exponent)


def compile_graph(graph: Graph, options: dict) -> Callable:
    """Plan `graph` and return `fn(*tensors) -> list[Tensor]`.

    The plan is one step per node: (torch function, operand values, result values).
    It is emitted as a straight-line Python function, one line per step, so a call
    costs the torch calls and little else; `fn.plan_source` holds that code.

    Options: `check` (bool, default False) checks every step's result dtype and
    shape against the IR type, for tests.
    """
    unknown = set(options) - {"check"}
    if unknown:
        raise ValueError(f"the eager backend has no option(s) {sorted(unknown)}; valid: check")
    check = bool(options.get("check", False))
    bindings = _symbol_bindings(graph)
    symbols = [s for s, _, _ in bindings]
    names = {v: f"x{i}" for i, v in enumerate(graph.inputs)}
    namespace: dict = {}  # step functions and cached constants, by generated name
    lines = [f"def eager_fn({', '.join(names[v] for v in graph.inputs)}):"]
    if any(_symbolic_attr_names(node) for node in graph.nodes):
        sizes = "".join(f"{names[graph.inputs[i]]}.shape[{d}], " for _, i, d in bindings)
        lines.append(f"    sizes = ({sizes})")
    may_alias_constant = set()
    constants: dict = {}  # value -> its cached tensor
    for k, node in enumerate(graph.nodes):
        fn = _make_step(node, symbols, options)
        results = []
        for value in node.outputs:
            names[value] = f"v{len(names)}"
            results.append(names[value])
        constant = None if check else _constant_value(node, fn)
        if constant is not None:
            namespace[results[0]] = constant
            constants[node.outputs[0]] = constant
            may_alias_constant.add(node.outputs[0])
            continue
        if _is_pow_of_a_number(node, constants):
            fn = _pow_by_a_number(constants[node.inputs[1]].item())
        if _may_alias(node, may_alias_constant):
            may_alias_constant.update(node.outputs)
        namespace[f"f{k}"] = _checked(fn, node) if check else fn
        operands = [names[v] for v in node.inputs]
        if _symbolic_attr_names(node) and node.body is None:
            operands.append("sizes")
        lines.append(f"    {', '.join(results)} = f{k}({', '.join(operands)})")
    outputs = [f"{names[v]}.clone()" if v in may_alias_constant else names[v]
               for v in graph.outputs]
    lines.append(f"    return [{', '.join(outputs)}]")
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<eager plan for @{graph.name}>", "exec"), namespace)
    eager_fn = namespace["eager_fn"]
    eager_fn.plan_source = source
    return eager_fn


EAGER = register_backend(Backend(
    "eager", compile_graph, differentiable=True,
    doc="each op executed with torch on the tensors' device; records autograd",
    options=("check",),
))

# The opaque `aten` op's runner joins EAGER_OPS (and so every runtime that runs extern
# nodes through this table); see codegen/opaque.py.
from codegen import opaque as _opaque  # noqa: E402

_opaque.register()
