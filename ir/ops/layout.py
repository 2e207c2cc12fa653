"""Layout ops: reshape, permute, slice, squeeze/unsqueeze, expand, cat, pad, gathers, scatters.

Fusion turns reshape/permute/slice/expand into index maps of loads instead of
copies.  Spec: spec/ops.md, "Layout".
"""

from __future__ import annotations

import numpy as np

from ir.ops import rules
from ir.ops.registry import LAYOUT, defop
from ir.types import TensorType, simplify_dim

# The six views: each is an index map of its operand and a torch view of its storage
# (Note [Op facts], ir/ops/registry.py), for complex values too.
VIEW = {"index_map": True, "aliases": True, "saves": {}, "complex": True}


def _static(dims):
    return tuple(int(d) for d in dims)


# --- reshape ----------------------------------------------------------------------------
def _reshape_infer(types, shape):
    """x's dtype, the given shape; element counts must match."""
    (x,) = types
    out = x.with_shape(shape)
    if simplify_dim(out.numel() - x.numel()) != 0:
        raise TypeError(f"cannot reshape {x} to [{','.join(map(str, shape))}]:"
                        " element counts differ")
    return out


defop("reshape", LAYOUT, **VIEW, operands=("x",), attrs={"shape": "dims"},
      infer=_reshape_infer, ref=lambda x, shape: np.reshape(x, _static(shape)),
      vjp=lambda b, g, out, x, shape: (b.reshape(g, shape=list(x.type.shape)),),
      doc="same elements in row-major order, new shape")


# --- permute ----------------------------------------------------------------------------
def _permute_infer(types, perm):
    """x's dtype; dim k has x's size at dim perm[k]."""
    (x,) = types
    if sorted(perm) != list(range(x.rank)):
        raise TypeError(f"perm {list(perm)} is not a permutation of range({x.rank})")
    return x.with_shape([x.shape[p] for p in perm])


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


defop("permute", LAYOUT, **VIEW, operands=("x",), attrs={"perm": "ints"},
      infer=_permute_infer, ref=lambda x, perm: np.transpose(x, perm),
      vjp=lambda b, g, out, x, perm: (b.permute(g, perm=_inverse(perm)),),
      doc="out[i...] = x[i[perm]...]: dim k of the result is dim perm[k] of x")


# --- slice ------------------------------------------------------------------------------
def slice_bounds(size, start, stop, step):
    """Clamp start/stop like Python slicing on a non-negative step (torch forbids < 1).

    A symbolic bound (a size expression, Note [Symbolic slice bounds]) is taken as it is:
    the tracer guarded `0 <= start <= stop <= size` for it, so no clamping applies."""
    if step < 1:
        raise TypeError(f"slice step must be positive, got {step}")
    if isinstance(size, int) and isinstance(start, int) and isinstance(stop, int):
        start, stop, _ = slice(start, stop, step).indices(size)
        stop = max(stop, start)
    return start, stop


def _slice_infer(types, dim, start, stop, step=1):
    """x's type with dim's size len(range(start, stop, step)) after Python clamping."""
    (x,) = types
    d = rules.normalize_dim(dim, x.rank)
    start, stop = slice_bounds(x.shape[d], start, stop, step)
    length = simplify_dim((stop - start + step - 1) // step) if isinstance(stop, int) else \
        (stop - start + step - 1) // step
    shape = list(x.shape)
    shape[d] = length
    return x.with_shape(shape)


def _slice_ref(x, dim, start, stop, step=1):
    index = [slice(None)] * x.ndim
    index[rules.normalize_dim(dim, x.ndim)] = slice(start, stop, step)
    return x[tuple(index)]


def _slice_vjp(b, g, out, x, dim, start, stop, step=1):
    # Scatter g back: interleave step-1 zeros after each element, then pad to x's size.
    d = rules.normalize_dim(dim, x.type.rank)
    size, n = x.type.shape[d], g.type.shape[d]
    if not (isinstance(size, int) and isinstance(n, int)):
        raise NotImplementedError("the VJP of slice needs static sizes along the sliced dim")
    start, _ = slice_bounds(size, start, stop, step)
    if step > 1 and n > 0:
        shape = list(g.type.shape)
        g = b.unsqueeze(g, dim=d + 1)
        g = b.pad(g, pads=[0, 0] * (x.type.rank - d - 1) + [0, step - 1])
        g = b.reshape(g, shape=shape[:d] + [n * step] + shape[d + 1:])
        g = b.slice(g, dim=d, start=0, stop=min(n * step, size - start))
    after = size - start - g.type.shape[d]
    pads = [0, 0] * (x.type.rank - d - 1) + [start, after]
    return (b.pad(g, pads=pads) if x.type.dtype.is_float else None,)


defop("slice", LAYOUT, **VIEW, operands=("x",),
      attrs={"dim": "int", "start": "dim", "stop": "dim", "step": ("int", 1)},
      infer=_slice_infer, ref=_slice_ref, vjp=_slice_vjp,
      doc="x[..., start:stop:step, ...] along dim (Python clamping, step >= 1)")


def _slice_scatter_infer(types, dim, start, stop, step=1):
    """x's type; src must be x's dtype with the shape of slice(x, dim, start, stop, step)"""
    x, src = types
    want = _slice_infer([x], dim, start, stop, step)
    if src.dtype != x.dtype or len(src.shape) != len(want.shape) or any(
            simplify_dim(a - b) != 0 for a, b in zip(src.shape, want.shape)):
        raise TypeError(f"slice_scatter's src must be {want}, got {src}")
    return TensorType(x.dtype, x.shape, rules.same_device(types))


def _slice_scatter_ref(x, src, dim, start, stop, step=1):
    out = np.array(x, copy=True)
    index = [slice(None)] * x.ndim
    index[rules.normalize_dim(dim, x.ndim)] = slice(start, stop, step)
    out[tuple(index)] = src
    return out


def _slice_scatter_vjp(b, g, out, x, src, dim, start, stop, step=1):
    t = src.type
    zeros = b.full(value=0, shape=list(t.shape), dtype=t.dtype, device=t.device)
    window = dict(dim=dim, start=start, stop=stop, step=step)
    return (b.slice_scatter(g, zeros, **window) if x.type.dtype.is_float else None,
            b.slice(g, **window) if t.dtype.is_float else None)


# Note [Writes as slice_scatter]: a write into a slice of a base (`h[:, 1::2] *= 3`, a
# narrow, a diagonal) is functionalized as the base's new value; the `scatters` pass
# (ir/passes/scatters.py) names it `slice_scatter`, which the kernel backends run as a
# store of src's elements only, over the base's bytes when the base dies there
# (spec/memory.md, "Writes in place").
defop("slice_scatter", LAYOUT, saves={}, complex=True, operands=("x", "src"),
      attrs={"dim": "int", "start": "dim", "stop": "dim", "step": ("int", 1)},
      infer=_slice_scatter_infer, ref=_slice_scatter_ref, vjp=_slice_scatter_vjp,
      doc="x with x[..., start:stop:step, ...] along dim replaced by src"
          " (torch.slice_scatter)")


# --- squeeze / unsqueeze / expand ---------------------------------------------------------
def _squeeze_infer(types, dims):
    """x's type without the listed dims that have size 1."""
    (x,) = types
    axes = rules.normalize_dims(dims, x.rank) if dims else \
        tuple(i for i, d in enumerate(x.shape) if d == 1)
    return x.with_shape([d for i, d in enumerate(x.shape) if not (i in axes and d == 1)])


def _squeeze_ref(x, dims):
    if x.ndim == 0:  # squeeze(0) / squeeze(-1) of a 0-d tensor: itself, as in torch
        return x
    axes = rules.normalize_dims(dims, x.ndim) if dims else None
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(a for a in axes if x.shape[a] == 1))


def _reshape_back(b, g, out, x, **attrs):
    return (b.reshape(g, shape=list(x.type.shape)),)


defop("squeeze", LAYOUT, **VIEW, operands=("x",), attrs={"dims": ("ints", ())},
      infer=_squeeze_infer, ref=_squeeze_ref, vjp=_reshape_back,
      doc="drop the listed size-1 dims (others are kept, as in torch); [] = every size-1 dim")


def _unsqueeze_infer(types, dim):
    """x's type with a size-1 dim inserted at dim (in [-rank-1, rank])."""
    (x,) = types
    d = rules.normalize_dim(dim, x.rank + 1)
    shape = list(x.shape)
    shape.insert(d, 1)
    return x.with_shape(shape)


defop("unsqueeze", LAYOUT, **VIEW, operands=("x",), attrs={"dim": "int"},
      infer=_unsqueeze_infer, vjp=_reshape_back,
      ref=lambda x, dim: np.expand_dims(x, rules.normalize_dim(dim, x.ndim + 1)),
      doc="insert a size-1 dim at position dim")


def _expand_infer(types, shape):
    """x's dtype, the given shape: same rank, only size-1 dims change."""
    (x,) = types
    if len(shape) != x.rank:
        raise TypeError(f"expand keeps the rank: {x} to rank {len(shape)}; reshape first")
    for old, new in zip(x.shape, shape):
        if old != 1 and simplify_dim(old - new) != 0:
            raise TypeError(f"cannot expand {x} to [{','.join(map(str, shape))}]:"
                            " only size-1 dims grow")
    return x.with_shape(shape)


def _expand_vjp(b, g, out, x, shape):
    # Sum over the dims that grew; keepdim leaves x's shape.
    grown = [i for i, (old, new) in enumerate(zip(x.type.shape, shape)) if old == 1 and new != 1]
    return (b.sum(g, dims=grown, keepdim=True) if grown else g,)


defop("expand", LAYOUT, **VIEW, operands=("x",), attrs={"shape": "dims"},
      infer=_expand_infer, vjp=_expand_vjp,
      ref=lambda x, shape: np.broadcast_to(x, _static(shape)),  # a read-only view
      doc="broadcast size-1 dims to shape (same rank; the element is repeated, not copied)")


# --- cat / pad --------------------------------------------------------------------------
def _cat_infer(types, dim):
    """the shared dtype; sizes along dim add up, other dims must match."""
    if not types:
        raise TypeError("cat needs at least one tensor")
    first = types[0]
    d = rules.normalize_dim(dim, first.rank)
    total = 0
    for t in types:
        if t.rank != first.rank or any(
                simplify_dim(a - b) != 0 for i, (a, b) in enumerate(zip(t.shape, first.shape))
                if i != d):
            raise TypeError(f"cat operands differ outside dim {d}: {first} vs {t}")
        total = total + t.shape[d]
    if len({t.dtype for t in types}) != 1:
        raise TypeError("cat operands must share a dtype; cast first")
    shape = list(first.shape)
    shape[d] = total
    return TensorType(first.dtype, tuple(shape), rules.same_device(types))


def _cat_vjp(b, g, out, *xs, dim):
    d = rules.normalize_dim(dim, g.type.rank)
    grads, offset = [], 0
    for x in xs:
        end = offset + x.type.shape[d]
        grads.append(b.slice(g, dim=d, start=offset, stop=end))
        offset = end
    return tuple(grads)


defop("cat", LAYOUT, saves={}, complex=True, operands=("xs",), attrs={"dim": "int"}, variadic=True,
      infer=_cat_infer, vjp=_cat_vjp,
      ref=lambda *xs, dim: np.concatenate(xs, axis=rules.normalize_dim(dim, xs[0].ndim)),
      doc="concatenate along dim")


def _pad_infer(types, pads, value=0.0):
    """x's type with each padded dim grown by before + after."""
    (x,) = types
    if len(pads) % 2 or len(pads) // 2 > x.rank:
        raise TypeError(f"pads {list(pads)} must be pairs for at most {x.rank} dims")
    shape = list(x.shape)
    # torch.nn.functional.pad order: last dim first, (before, after) per dim.
    for k in range(len(pads) // 2):
        d = x.rank - 1 - k
        shape[d] = shape[d] + pads[2 * k] + pads[2 * k + 1]
    return x.with_shape(shape)


def _pad_ref(x, pads, value=0.0):
    if not pads:
        return x.copy()
    widths = [(0, 0)] * x.ndim
    for k in range(len(pads) // 2):
        widths[x.ndim - 1 - k] = (pads[2 * k], pads[2 * k + 1])
    if any(a < 0 or b < 0 for a, b in widths):
        raise ValueError("negative padding is a slice; use slice")
    return np.pad(x, widths, constant_values=np.asarray(value).astype(x.dtype))


def _pad_vjp(b, g, out, x, pads, value=0.0):
    for k in range(len(pads) // 2):
        d = x.type.rank - 1 - k
        g = b.slice(g, dim=d, start=pads[2 * k], stop=pads[2 * k] + x.type.shape[d])
    return (g,)


defop("pad", LAYOUT, saves={}, operands=("x",), attrs={"pads": "ints", "value": ("scalar", 0.0)},
      infer=_pad_infer, ref=_pad_ref, vjp=_pad_vjp,
      doc="constant padding, pads = (last_before, last_after, prev_before, ...) like F.pad")


# --- gathers ----------------------------------------------------------------------------
def _index_select_vjp(b, g, out, x, index, dim):
    # The gradient of a row pick is a row scatter: repeated indices accumulate.
    if not x.type.dtype.is_float:
        return (None, None)
    return (b.index_add(_zeros(b, x), index, g, dim=dim), None)


def _gather_vjp(b, g, out, x, index, dim):
    if not x.type.dtype.is_float:
        return (None, None)
    d = rules.normalize_dim(dim, x.type.rank)
    if _picks_one(x.type, index.type, d):
        return (_one_hot_scatter(b, x, index, g, d), None)
    return (b.scatter_add(_zeros(b, x), index, g, dim=dim), None)


def _picks_one(x, index, d) -> bool:
    """Whether a gather picks one element along d of every line of x (index: size 1
    along d and x's size elsewhere): its gradient then never accumulates."""
    return x.rank > 0 and index.shape[d] == 1 and isinstance(x.shape[d], int) and all(
        simplify_dim(a - b) == 0 for i, (a, b) in enumerate(zip(index.shape, x.shape)) if i != d)


def _one_hot_scatter(b, x, index, g, d):
    """scatter_add(zeros, index, g) for a gather that picks one element per line: a
    pointwise select against an iota, which fuses into its readers (log_softmax's
    gradient reads cross_entropy's this way) where a scatter is a kernel of its own.
    Each element is 0 + g or 0, as the scatter's (adding 0.0 keeps its signed zero)."""
    shape = list(x.type.shape)
    iota = b.arange(end=shape[d], dtype=index.type.dtype, device=x.type.device)
    iota = b.broadcast_to(b.reshape(iota, shape=[shape[d]] + [1] * (len(shape) - d - 1)), shape)
    hit = b.eq(iota, b.broadcast_to(index, shape))
    zero = b.zeros_like(g)
    return b.where(hit, b.add(zero, b.broadcast_to(g, shape)), zero)


def _zeros(b, x):
    return b.full(value=0.0, shape=list(x.type.shape), dtype=x.type.dtype,
                  device=x.type.device)


def _index_select_infer(types, dim):
    """x's type with dim's size replaced by len(index) (index: rank-1 i64/i32)."""
    x, index = types
    rules.index_dtype_check(index, "index_select's index")
    if index.rank != 1:
        raise TypeError(f"index_select's index must be rank 1, got {index}")
    d = rules.normalize_dim(dim, x.rank)
    shape = list(x.shape)
    shape[d] = index.shape[0]
    return x.with_shape(shape)


defop("index_select", LAYOUT, operands=("x", "index"), attrs={"dim": "int"},
      saves={"x": ("index",)},
      infer=_index_select_infer, vjp=_index_select_vjp,
      ref=lambda x, index, dim: np.take(x, index, axis=rules.normalize_dim(dim, x.ndim)),
      doc="out = x.index_select(dim, index)")


def _gather_infer(types, dim):
    """x's dtype, index's shape (index: i64/i32 of x's rank, not larger outside dim)."""
    x, index = types
    rules.index_dtype_check(index, "gather's index")
    if index.rank != x.rank:
        raise TypeError(f"gather's index must have the rank of x: {x} vs {index}")
    d = rules.normalize_dim(dim, x.rank)
    for i, (n, m) in enumerate(zip(index.shape, x.shape)):
        if i != d and isinstance(n, int) and isinstance(m, int) and n > m:
            raise TypeError(f"gather's index {index} is larger than x {x} in dim {i}")
    return x.with_shape(index.shape)


def _gather_ref(x, index, dim):
    # out[i...] = x[i... with dim d replaced by index[i...]]; index may be smaller than x
    # outside dim d (torch allows it, np.take_along_axis does not).
    grid = list(np.indices(index.shape, sparse=True)) if index.ndim else []
    d = rules.normalize_dim(dim, x.ndim)
    if x.ndim == 0:
        return x.copy()
    grid[d] = index.astype(np.int64)
    return x[tuple(grid)]


defop("gather", LAYOUT, saves={"x": ("x", "index")}, operands=("x", "index"), attrs={"dim": "int"},
      infer=_gather_infer, ref=_gather_ref, vjp=_gather_vjp,
      doc="out[i][j] = x[index[i][j]][j] for dim=0 (torch.gather)")


# --- scatters (the VJPs of the gathers) -----------------------------------------------------
def _index_add_infer(types, dim):
    """x's type (index: rank-1 i64/i32; src: x's dtype and shape, dim's size len(index))."""
    x, index, src = types
    rules.index_dtype_check(index, "index_add's index")
    if index.rank != 1:
        raise TypeError(f"index_add's index must be rank 1, got {index}")
    d = rules.normalize_dim(dim, x.rank)
    want = list(x.shape)
    if x.rank:
        want[d] = index.shape[0]
    if src.dtype != x.dtype or src.rank != x.rank or any(
            simplify_dim(a - b) != 0 for a, b in zip(src.shape, want)):
        raise TypeError(f"index_add's src must be {x.with_shape(want)}, got {src}")
    return x


def _index_add_ref(x, index, src, dim):
    out = x.copy()
    if x.ndim == 0:
        return out + src if index.size else out
    d = rules.normalize_dim(dim, x.ndim)
    moved = np.moveaxis(out, d, 0)  # a view: np.add.at writes through it
    np.add.at(moved, index.astype(np.int64), np.moveaxis(src, d, 0))
    return out


def _index_add_vjp(b, g, out, x, index, src, dim):
    gsrc = b.index_select(g, index, dim=dim) if src.type.dtype.is_float else None
    return (g if x.type.dtype.is_float else None, None, gsrc)


defop("index_add", LAYOUT, operands=("x", "index", "src"), attrs={"dim": "int"},
      saves={"src": ("index", "src")},
      infer=_index_add_infer, ref=_index_add_ref, vjp=_index_add_vjp,
      doc="x with src's slices added at the indices along dim (repeats accumulate;"
          " torch.index_add); the VJP of index_select and embedding")


def _scatter_add_infer(types, dim):
    """x's type (index: i64/i32 of x's rank, no larger than x outside dim; src: x's dtype,
    index's shape)."""
    x, index, src = types
    _gather_infer([x, index], dim)
    if src.dtype != x.dtype or src.shape != index.shape:
        raise TypeError(f"scatter_add's src must be {x.dtype} of index's shape, got {src}")
    return x


def _scatter_add_ref(x, index, src, dim):
    out = x.copy()
    if x.ndim == 0:
        return out + src if index.size else out
    grid = list(np.indices(index.shape, sparse=True))
    grid[rules.normalize_dim(dim, x.ndim)] = index.astype(np.int64)
    np.add.at(out, tuple(grid), src)
    return out


def _scatter_add_vjp(b, g, out, x, index, src, dim):
    gsrc = b.gather(g, index, dim=dim) if src.type.dtype.is_float else None
    return (g if x.type.dtype.is_float else None, None, gsrc)


defop("scatter_add", LAYOUT, operands=("x", "index", "src"), attrs={"dim": "int"},
      saves={"src": ("index",)},
      infer=_scatter_add_infer, ref=_scatter_add_ref, vjp=_scatter_add_vjp,
      doc="x with src[i][j] added at [index[i][j]][j] for dim=0 (repeats accumulate;"
          " torch.scatter_add); the VJP of gather")
