"""Eager's result strides where torch's meta kernels differ from its CPU kernels.

Note [Eager's layout, not the meta kernel's]: refcomp types a call by running torch on
meta tensors, and Note [Output layout] (refcomp/runtime.py) lays each output out as its
meta says.  Where the meta kernel's strides are not the CPU kernel's (pointwise kernels,
advanced indexing, batch norm, 1-d and 2-d convolutions, replication and reflection
pads: the families and their rules are spec/correctness.md, "Output layout"), this
module computes what the CPU kernel does.  `iterator_strides` is a port of
TensorIterator's layout rule (`compute_fast_setup_type`, `reorder_dimensions`,
`allocate_or_resize_outputs` in ATen's TensorIterator.cpp), not torch's Python
`compute_elementwise_output_strides`, whose tie-breaking differs on size-1 dims.
tests/frontend/test_eager_layout.py checks each rule against the CPU kernels.
"""

from __future__ import annotations

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false


def iterator_strides(shape, operands, common=None) -> tuple[int, ...]:
    """The strides of the output TensorIterator allocates for `shape` (the broadcast shape
    of `operands`, torch tensors of any device, inputs only: the output is undefined).

    `common`: the dtype the op computes in, where it promotes its inputs (compute_types
    runs before the layout is chosen: a CPU input of another dtype is replaced by its
    `.to(common)`, which keeps a dense input's strides and makes a non-dense one, an
    expanded input, row-major; `torch.hypot` of an expanded float32 and a permuted float64
    operand: corpus grad_hypot_broadcast_expanded_permuted_strides)."""
    if common is not None:
        operands = [t if t.dtype == common or t.dim() == 0 else
                    torch.empty_like(t, dtype=common, device="meta") for t in operands]
    shape = tuple(int(s) for s in shape)
    ndim = len(shape)
    sizes = [tuple(t.shape) for t in operands]
    if sizes and all(s == sizes[0] for s in sizes) and sizes[0] == shape:
        # compute_fast_setup_type: every operand of the result's shape
        if all(t.is_contiguous() for t in operands):
            return row_major(shape)
        if all(t.is_contiguous(memory_format=torch.channels_last) for t in operands) \
                and ndim == 4:
            return tuple(torch.empty(shape, device="meta",
                                     memory_format=torch.channels_last).stride())
        if all(is_non_overlapping_and_dense_or_false(t) for t in operands) and \
                all(t.stride() == operands[-1].stride() for t in operands):
            return tuple(operands[-1].stride())
    if ndim <= 1:
        return row_major(shape)
    strides = [_broadcast_strides(t, shape) for t in operands]

    def should_swap(d0, d1) -> int:
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    # perm[0] is the innermost dim; start from row-major and insertion-sort, moving a dim
    # only past the dims it must follow (ambiguous comparisons keep scanning).
    perm = list(range(ndim - 1, -1, -1))
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    if perm == list(range(ndim - 1, -1, -1)):
        return row_major(shape)
    out = [0] * ndim
    step = 1
    for d in perm:
        out[d] = step
        step *= shape[d]
    return tuple(out)


def common_dtype(operands, result) -> torch.dtype | None:
    """The dtype a pointwise ATen op with `operands` (no bool among them: `where`'s
    condition and masks are not promoted) and a `result` dtype computes in: the result's,
    or for a bool result (comparisons, logical ops) the operands' promoted type; None
    where a bool operand makes it unclear (`iterator_strides` then casts nothing)."""
    if not operands or any(t.dtype == torch.bool for t in operands):
        return None
    if result != torch.bool:
        return result
    common = operands[0].dtype
    for t in operands[1:]:
        common = torch.promote_types(common, t.dtype)
    return common


def row_major(shape) -> tuple[int, ...]:
    out, step = [], 1
    for n in reversed(tuple(int(n) for n in shape)):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def _broadcast_strides(t, shape) -> list[int]:
    """TensorIterator's operand strides: 0 where the operand is broadcast."""
    lead = len(shape) - t.dim()
    out = [0] * len(shape)
    for d in range(t.dim()):
        if t.shape[d] == shape[lead + d]:
            out[lead + d] = t.stride()[d]
    return out


def index_strides(src, indices) -> tuple[int, ...] | None:
    """Strides of ATen's `index(src, indices)` on the CPU: `indices` has one entry per
    leading dim of `src`, None or an integer index tensor (bool masks were refused
    before: data-dependent shapes).  None when the form is not one this port follows."""
    if any(i is not None and (i.dtype == torch.bool or i.dtype == torch.uint8)
           for i in indices):
        return None
    tensors = [i for i in indices if i is not None]
    if not tensors or len(indices) > src.dim():
        return None
    try:  # expand_outplace: to one shape when they differ
        common = torch.broadcast_shapes(*(t.shape for t in tensors))
    except RuntimeError:
        return None
    if any(tuple(t.shape) != tuple(common) for t in tensors):
        tensors = [t.expand(common) for t in tensors]
    it = iter(tensors)
    indices = [next(it) if i is not None else None for i in indices]
    indices += [None] * (src.dim() - len(indices))
    if not _contiguous_subspace(indices):  # transposeToFront
        order = [d for d, i in enumerate(indices) if i is not None] + \
                [d for d, i in enumerate(indices) if i is None]
        src = src.permute(order)
        indices = [indices[d] for d in order]
    # int indices become long (`.to`, preserving a dense layout)
    indices = [i.to(torch.long) if i is not None and i.dtype != torch.long else i
               for i in indices]
    before = 0
    while indices[before] is None:
        before += 1
    indexed = sum(i is not None for i in indices)
    after = src.dim() - before - indexed
    replacement = tuple(common)
    shape = tuple(src.shape[:before]) + replacement + tuple(src.shape[before + indexed:])
    # restride_src: the indexed dims become the index's dims with stride 0
    src_strides = tuple(src.stride()[:before]) + (0,) * len(replacement) + \
        tuple(src.stride()[before + indexed:])
    restrided = src.as_strided(shape, src_strides)
    reshaped = [i.reshape((1,) * before + tuple(i.shape) + (1,) * after)
                for i in indices if i is not None]
    return iterator_strides(shape, [restrided] + reshaped)


def _contiguous_subspace(indices) -> bool:
    """hasContiguousSubspace: the index tensors are adjacent."""
    state = 0
    for i in indices:
        if state == 0 and i is not None:
            state = 1
        elif state == 1 and i is None:
            state = 2
        elif state == 2 and i is not None:
            return False
    return True


def getitem_strides(x, index) -> tuple[int, ...] | None:
    """Strides of eager's `x[index]` (x a meta tensor; index as Python passes it, with
    meta tensors for tensor items) when it takes the advanced-indexing path; None when
    it does not or the form is not one this port follows.  Python indexing applies the
    basic items first (a view), then `aten.index` with the tensor items at their dims."""
    items = list(index) if isinstance(index, tuple) else [index]
    if not any(isinstance(it, (torch.Tensor, list)) for it in items):
        return None
    if sum(it is Ellipsis for it in items) > 1:
        return None
    rank_used = sum(1 for it in items if it is not None and it is not Ellipsis)
    basic, positions, dim = [], [], 0
    for it in items:
        if it is Ellipsis:
            skip = x.dim() - rank_used
            basic.append(Ellipsis)
            dim += skip
        elif it is None:
            basic.append(None)
            dim += 1
        elif isinstance(it, (torch.Tensor, list)):
            t = it if isinstance(it, torch.Tensor) else _list_index(it)
            if t is None or t.dtype == torch.bool or t.dtype == torch.uint8:
                return None
            basic.append(slice(None))
            positions.append((dim, t))
            dim += 1
        elif isinstance(it, slice):
            basic.append(it)
            dim += 1
        elif isinstance(it, int) and not isinstance(it, bool):
            basic.append(it)
        else:
            return None
    try:
        view = x[tuple(basic)]
    except Exception:
        return None
    indices: list = [None] * view.dim()
    for d, t in positions:
        if d >= view.dim():
            return None
        indices[d] = t
    while indices and indices[-1] is None:
        indices.pop()
    return index_strides(view, indices)


def _list_index(items):
    """A Python list index as torch makes it a tensor (ints only: nested or bool lists are
    left to the meta kernel)."""
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        return None
    return torch.empty((len(items),), dtype=torch.long, device="meta")


def pointwise_kernel(short: str) -> bool:
    """Does ATen compute `short` (a name in torch.ops.aten) with a pointwise CPU kernel of
    its own, i.e. through TensorIterator: its functional overloads (none written: not
    `out=`, not in-place) that have a CPU kernel are all tagged pointwise, and one has.
    Composite ops keep the meta kernel's strides: their layout is that of the ops they
    are made of (masked_fill: a Contiguous clone, then masked_fill_; ldexp:
    `x * 2 ** other`; mvlgamma: a sum; only their `out=` overloads have CPU kernels)."""
    packet = getattr(torch.ops.aten, short, None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return False
    with_kernel = []
    for name in packet.overloads():
        op = getattr(packet, name)
        if any(a.alias_info is not None and a.alias_info.is_write
               for a in op._schema.arguments):
            continue
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CPU"):
                with_kernel.append(op)
        except RuntimeError:  # an overload only TorchScript knows (copysign.int)
            continue
    return bool(with_kernel) and all(torch.Tag.pointwise in o.tags for o in with_kernel)


# ATen CPU kernels that allocate their result row-major whatever their operands' layout,
# where torch's meta kernel keeps the operand's layout (`normal` with a tensor `std`;
# measured on torch 2.13; tests/frontend/test_eager_layout.py checks each against the CPU
# kernel).
ROW_MAJOR_RESULTS = frozenset({"poisson", "rrelu", "rrelu_with_noise", "_standard_gamma",
                               "normal"})


def row_major_result(short: str) -> bool:
    return short in ROW_MAJOR_RESULTS


# ATen CPU kernels that allocate their result row-major unless autograd records the call
# (the result requires grad): `max_pool1d` runs its own kernel then, and otherwise
# `max_pool1d_with_indices` (a 2-d pooling of the unsqueezed input, which keeps a
# channels-last input's layout, as torch's meta kernel always does; corpus
# max_pool1d_output_strides).
ROW_MAJOR_WITHOUT_GRAD = frozenset({"max_pool1d"})


def row_major_without_grad(short: str, result) -> bool:
    return short in ROW_MAJOR_WITHOUT_GRAD and not result.requires_grad


# aten ops whose CPU kernel allocates its result in the input's suggested memory format
PADS = frozenset({f"{kind}_pad{n}d" for kind in ("replication", "reflection")
                  for n in (1, 2, 3)})


def suggested_format_strides(x, shape) -> tuple[int, ...]:
    """Strides of a result of `shape` allocated in `x`'s suggested memory format (c10's
    test; a result of another rank than `x`'s is row-major)."""
    fmt = suggest_memory_format(x) if x.dim() == len(shape) else torch.contiguous_format
    return tuple(torch.empty(tuple(int(n) for n in shape), device="meta",
                             memory_format=fmt).stride())


def pads_in_suggested_format(short, args, kwargs) -> bool:
    """Is the call `short(*args, **kwargs)` (an opaque call's aten name and arguments) a
    replication or reflection pad, whose CPU kernel lays its result out in its input's
    suggested memory format (`F.pad` is `pad(input, pad, mode, value)`)?"""
    if short in PADS:
        return True
    if short != "pad":
        return False
    mode = args[2] if len(args) > 2 else kwargs.get("mode", "constant")
    return mode in ("replicate", "reflect")


def suggest_memory_format(t) -> torch.memory_format:
    """ATen's `Tensor::suggest_memory_format()`: channels_last (channels_last_3d) when a 4-d
    (5-d) tensor's strides are like that format's (c10's `is_channels_last_strides_2d_s4`,
    `_3d_s5`).  Not torch._prims_common's port, which differs on size-1 dims (it scales
    by a stride > 1 where c10 scales by a size > 1)."""
    order = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}.get(t.dim())
    if order is None or t.layout != torch.strided:
        return torch.contiguous_format
    sizes, strides = tuple(t.shape), t.stride()
    if strides[1] == 0:
        return torch.contiguous_format
    low = 0
    for d in order:
        if sizes[d] == 0 or strides[d] < low or d == 0 and low == strides[1]:
            return torch.contiguous_format
        low = strides[d] * sizes[d] if sizes[d] > 1 else strides[d]
    return torch.channels_last if t.dim() == 4 else torch.channels_last_3d


def _contiguous_format(t):
    """The memory format `t` is contiguous in (ATen's checks, size-1 dims ignored), or
    None."""
    if t.is_contiguous():
        return torch.contiguous_format
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return torch.channels_last
    if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d):
        return torch.channels_last_3d
    return None


def batch_norm_strides(x, weight=None, bias=None) -> tuple[int, ...]:
    """Strides of ATen's CPU batch norm result for input `x` (`native_batch_norm` and the
    ops that run it: `F.batch_norm`, `_native_batch_norm_legit*`, `_batch_norm_with_update`,
    `_batch_norm_no_update`).  `batch_norm_cpu` allocates `empty_like(x, format)`: the
    memory format `x` is contiguous in where there is one and the given weight and bias
    are contiguous (its fast path; the running statistics play no part), else
    `x.suggest_memory_format()`.  Never `x`'s own order otherwise: a transposed 3-d input
    gives a row-major result, where torch's meta kernel keeps the input's strides."""
    fmt = _contiguous_format(x)
    if fmt is None or not all(p is None or p.is_contiguous() for p in (weight, bias)):
        fmt = suggest_memory_format(x)
    return tuple(torch.empty(tuple(x.shape), device="meta", memory_format=fmt).stride())


def conv_strides(x, weight, shape) -> tuple[int, ...]:
    """Strides of ATen's CPU 1-d or 2-d convolution result of `shape` (`conv1d`,
    `conv2d`, `conv_transpose1d`, `conv_transpose2d`) for input `x` (with a batch dim or
    without) and `weight` (3-d or 4-d).  An input without a batch dim is unsqueezed at dim
    0.  `_convolution` runs a 1-d convolution as a 2-d one: the input made contiguous
    (kept as it is when it already is, size-1 dims ignored), input and weight unsqueezed
    at dim 2.  The 2-d kernels (mkldnn, slow2d) write channels_last when the input or the
    weight suggests that format (c10's test), and the result is squeezed back.  So a
    transposed 1-d input alone gives a row-major result, a transposed 1-d weight a
    "channels-last 1-d" one ((O * L, 1, O)), where torch's meta kernel says row-major;
    a 2-d convolution without a batch dim is channels_last as with one."""
    spatial = weight.dim() - 2
    batched = x.dim() == weight.dim()
    full = tuple(int(n) for n in shape) if batched else (1,) + tuple(int(n) for n in shape)
    if not batched:
        x = x.unsqueeze(0)
    if spatial == 1:
        if not x.is_contiguous():
            x = x.contiguous()
        x, weight = x.unsqueeze(2), weight.unsqueeze(2)
        full = full[:2] + (1,) + full[2:]
    if all(suggest_memory_format(t) != torch.channels_last for t in (x, weight)):
        return row_major(shape)
    out = torch.empty(full, device="meta", memory_format=torch.channels_last).stride()
    if spatial == 1:
        out = out[:2] + out[3:]
    return tuple(out if batched else out[1:])


# aten ops whose CPU kernel is batch_norm_cpu's: (input, weight, bias, ...) first
BATCH_NORM_OPS = frozenset({
    "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "_batch_norm_with_update",
    "_batch_norm_no_update"})


def batch_norm_in_eval(short, args, kwargs) -> bool:
    """Does the batch norm op `short` (in BATCH_NORM_OPS; `args`, `kwargs` its call's)
    normalize by its running statistics?  Then ATen's CPU kernel saves no statistics: its
    saved mean and inverse std come back empty, shape (0,), where torch's meta kernels give
    them one value per channel (a graph typed by the meta read past a 0-element tensor:
    corpus batch_norm_eval_saved_stats)."""
    if short in ("_native_batch_norm_legit_no_training", "_batch_norm_no_update"):
        return True
    if short not in ("native_batch_norm", "_native_batch_norm_legit"):
        return False
    at = 3 if len(args) > 3 and isinstance(args[3], bool) else 5  # legit's no-stats form
    training = args[at] if len(args) > at else kwargs.get("training")
    return training is False


def restrided(meta: torch.Tensor, strides) -> torch.Tensor:
    """`meta` (a meta tensor) with `strides`, when they differ."""
    if strides is None or tuple(strides) == tuple(meta.stride()):
        return meta
    out = torch.empty_strided(tuple(meta.shape), tuple(strides), dtype=meta.dtype,
                              device="meta")
    return out.requires_grad_() if meta.requires_grad else out


# Note [Random draws in eager's layout]: ATen fills a tensor with random numbers in the
# order its kernel iterates, which is the tensor's memory order (TensorIterator sorts dims
# by stride), and some kernels change algorithm with the layout (`normal_` of a contiguous
# float tensor of 16 or more elements draws in blocks; of any other tensor, one number
# per element).  So `torch.rand_like(x.t())`, `F.dropout(x.t())` (its mask is
# `empty_like(x).bernoulli_()`) and `x.t().normal_()` draw the same numbers as on a
# row-major tensor but put them elsewhere.  A draw in the graph therefore fills a tensor
# laid out as eager's: the IR's random ops take the memory `order` of the tensor eager
# fills (ir/ops/creation.py), and an opaque call gets its operands in eager's strides
# (Note [Operands in eager's layout]; a call that draws gets the others row-major, not
# in whatever layout the backend holds them).  Spec: spec/tracer.md, "Random draws".
#
# Note [Operands in eager's layout]: an opaque `aten` node hands ATen each operand whose
# eager strides are not row-major in those strides (`layouts`, codegen/opaque.py), on
# every backend, and every other operand row-major unless eager's overlaps itself
# (`overlaps`: an expanded input, handed over as the backend holds it).  ATen's kernels
# pick paths by layout (embedding_bag's fast path, which changes an auxiliary result's
# shape, needs contiguous weight rows; normal_'s block fill; median along a stride-0 dim
# is wrong, so a folded clone of an expanded input must arrive row-major, corpus
# median_of_clone_of_expanded_input_eager), and the interp backend holds every value
# row-major (corpus embedding_bag_of_transposed_weight_interp).
def memory_order(meta: torch.Tensor) -> tuple[int, ...] | None:
    """The dims of `meta` (a dense tensor) from outermost to innermost in memory, or None
    when it is row-major (ties between size-1 dims do not change where values go)."""
    if meta.is_contiguous() or not is_non_overlapping_and_dense_or_false(meta):
        return None
    return tuple(sorted(range(meta.dim()), key=lambda d: (-meta.stride()[d], d)))


def overlaps(meta: torch.Tensor) -> bool:
    """Whether two elements of `meta` share memory (an expanded tensor): ATen gets such
    an operand as the backend holds it; every other operand reaches ATen in eager's
    strides or row-major (Note [Operands in eager's layout])."""
    return not meta.is_contiguous() and operand_strides(meta) is None


def operand_strides(meta: torch.Tensor) -> tuple[int, ...] | None:
    """Strides an opaque call's operand is handed to ATen in (Note [Operands in eager's
    layout]): its meta's when they are not row-major and no two elements share memory;
    else None (row-major, or overlapping: an expanded operand ATen only reads)."""
    if meta.is_contiguous():
        return None
    dims = sorted((d for d in range(meta.dim()) if meta.shape[d] > 1),
                  key=lambda d: meta.stride()[d])
    span = 1
    for d in dims:
        if meta.stride()[d] < span:
            return None
        span = meta.stride()[d] * meta.shape[d]
    return tuple(meta.stride())
