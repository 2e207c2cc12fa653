"""Torch table entries for layout, dtype conversion and indexing; Tensor attributes.

Owns: reshape/view/expand/permute/... builders, `.to()` and friends, `cat`/`stack`,
and the rules for `tensor.attr`, `tensor[idx]` and `tensor[idx] = v` (item
assignment is functionalized as where(mask, placed value, x)).  Spec:
spec/tracer.md, "Torch coverage" and "Outputs, mutation and autograd".
"""

from __future__ import annotations

import operator

import sympy
import torch

from ir.graph import Value
from refcomp.reasons import (
    DATA_DEPENDENT_SHAPE,
    INEXPRESSIBLE_OP,
    TENSOR_TO_PYTHON,
    TRACE_EXCEPTION,
    UNSUPPORTED_TENSOR_METHOD,
    Unsupported,
)
from refcomp.tracer import eager_layout, mutation
from refcomp.tracer.context import ir_device, ir_dtype
from refcomp.tracer.torch_table import (
    Cast,
    Copy,
    Shaped,
    T,
    apply_inplace,
    as_dims,
    call_torch,
    cast,
    check_inplace,
    check_type,
    entry,
    handles,
    ir_size,
    is_symbolic_shape,
    new_tensor,
    prod_of,
    result_dtype,
    sizes_of,
    to_meta,
    unwrap,
    view_root,
)
from refcomp.tracer.values import VIEW_BASE, VT, ConstVar, TensorVar, TupleVar


# --- layout ---------------------------------------------------------------------------------
@entry(T.reshape, torch.reshape, T.view, view=True, sizes=True)
@handles(varargs=True)
def _reshape(ctx, x, *args, shape=None):
    if args and isinstance(args[0], torch.dtype):
        raise Unsupported(INEXPRESSIBLE_OP, "view(dtype) reinterprets bits")
    target = sizes_of(args) if shape is None else list(shape)
    if -1 in target:
        known = prod_of([d for d in target if not (isinstance(d, int) and d == -1)])
        numel = sympy.sympify(prod_of(x.value.type.shape))
        rest = sympy.simplify(numel / known)
        if rest.free_symbols and not rest.is_integer:
            # `x.view(-1, n)` with n an int symbol equal to one of x's size symbols (the
            # usual `n == x.size(1)`): guard that equality and use x's symbol, so the -1
            # stays symbolic instead of specialising both.
            target, known = _equate_symbols(ctx, target, known, numel)
            rest = sympy.simplify(numel / known)
        if rest.free_symbols and not rest.is_integer:
            # `x.view(-1, n)` where n need not divide x's size for every value: the
            # sizes it divides are specialised (guarded), so the -1 is a number.
            fixed = rest.free_symbols
            for s in sorted(fixed, key=str):
                ctx.specialize(s)
            rest = sympy.sympify(ctx.concrete(rest))
            target = [ctx.concrete(d) if isinstance(d, sympy.Basic) and d.free_symbols & fixed
                      else d for d in target]
        target = [rest if isinstance(d, int) and d == -1 else d for d in target]
    return Shaped("reshape", target)


def _equate_symbols(ctx, target, known, numel):
    """(target, known) with each symbol of known that is not among numel's replaced by a
    symbol of numel with the same traced value, the equality guarded (ctx.decide)."""
    known = sympy.sympify(known)
    subs = {}
    for a in sorted(known.free_symbols - numel.free_symbols, key=str):
        for b in sorted(numel.free_symbols, key=str):
            if ctx.concrete(a) == ctx.concrete(b) and ctx.decide(sympy.Eq(a, b)):
                subs[a] = b
                break
    if not subs:
        return target, known
    target = [d.subs(subs) if isinstance(d, sympy.Basic) else d for d in target]
    return target, known.subs(subs)


@entry(T.flatten, torch.flatten, view=True)
def _flatten(ctx, x, start_dim=0, end_dim=-1):
    shape = list(x.value.type.shape)
    if not shape:
        return Shaped("reshape", [1])
    r = len(shape)
    a, b = start_dim % r, end_dim % r
    if a == b:
        return x  # torch returns the tensor itself (found by the fuzzer: aliasing)
    return Shaped("reshape", shape[:a] + [prod_of(shape[a:b + 1])] + shape[b + 1:])


@entry(T.unflatten, torch.unflatten, view=True)
@handles(from_meta=("dim", "sizes"))
def _unflatten(ctx, x, dim, sizes):
    return Shaped("reshape", None)  # static shapes only: the meta result's


@entry(T.view_as, T.reshape_as, view=True)
def _view_as(ctx, x, other):
    return Shaped("reshape", list(other.value.type.shape))


@entry(T.expand, torch.broadcast_to, T.broadcast_to, view=True, sizes=True)
@handles(varargs=True)
def _expand(ctx, x, *args):
    target = sizes_of(args)
    lead = len(target) - x.value.type.rank
    return Shaped("expand", [x.value.type.shape[i - lead] if isinstance(d, int) and d == -1
                              else d for i, d in enumerate(target)])


@entry(T.expand_as, view=True)
def _expand_as(ctx, x, other):
    return Shaped("expand", list(other.value.type.shape))


@entry(T.permute, torch.permute, view=True)
@handles(varargs=True)
def _permute(ctx, x, *dims):
    perm = list(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else list(dims)
    return ctx.builder.permute(x.value, perm=[d % max(x.value.type.rank, 1) for d in perm])


@entry(T.transpose, torch.transpose, T.swapaxes, torch.swapaxes, view=True)
def _transpose(ctx, x, d0, d1):
    r = max(x.value.type.rank, 1)
    if x.value.type.rank == 0:
        return x.value  # transpose(0, 0) / (-1, 0) of a 0-d tensor: itself (a view)
    return ctx.builder.transpose(x.value, d0 % r, d1 % r)


@entry(T.t, torch.t, view=True)
def _t(ctx, x):
    return x.value if x.value.type.rank < 2 else ctx.builder.transpose(x.value, 0, 1)


@entry(T.unsqueeze, torch.unsqueeze, view=True)
def _unsqueeze(ctx, x, dim):
    return ctx.builder.unsqueeze(x.value, dim=dim)


@entry(T.squeeze, torch.squeeze, view=True)
def _squeeze(ctx, x, dim=None):
    if x.meta.dim() == 0:  # torch takes dim 0 / -1 of a 0-d tensor: a view of it as it is
        return Copy()
    return ctx.builder.squeeze(x.value, dims=as_dims(dim))


@entry(T.contiguous, view=True)
def _contiguous(ctx, x, memory_format=torch.contiguous_format):
    # torch returns the tensor itself when it is already contiguous *in the memory format
    # asked for*, else a copy in that format (its meta's strides: Note [Output layout]);
    # a row-major x.contiguous(memory_format=torch.channels_last) is a new tensor.
    if not isinstance(memory_format, torch.memory_format):
        raise Unsupported(INEXPRESSIBLE_OP, f"contiguous(memory_format={memory_format!r})")
    try:
        already = x.meta.is_contiguous(memory_format=memory_format)
    except RuntimeError as err:  # preserve_format: eager raises the same
        raise Unsupported(INEXPRESSIBLE_OP, f"contiguous(memory_format={memory_format}): {err}")\
            from None
    return x if already else Copy()


@entry(T.clone, torch.clone)
def _clone(ctx, x, memory_format=None):
    return Copy()


@entry(T.detach, torch.detach, view=True)
def _detach(ctx, x):
    return Copy()


def _cast_builder(dtype):
    def build(ctx, x, memory_format=None):
        return Cast(dtype)
    return build


for _name, _dt in {"float": torch.float32, "double": torch.float64, "half": torch.float16,
                   "bfloat16": torch.bfloat16, "int": torch.int32, "long": torch.int64,
                   "short": torch.int16, "char": torch.int8, "byte": torch.uint8,
                   "bool": torch.bool}.items():
    entry(getattr(T, _name), view=True)(_cast_builder(_dt))


@entry(T.to, T.type, T.type_as, view=True)
@handles(varargs=True, from_meta=("device", "dtype", "copy", "other", "non_blocking",
                                  "memory_format"))


def _to(ctx, x, *args, **kwargs):
    # copy= and memory_format= decide whether torch returns `x` itself or a new tensor
    # (the meta call answers; see _pair); the IR has no layouts, so a memory format
    # changes no value.  non_blocking changes nothing on one device.
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, (str, torch.device)) and ir_device(torch.device(a)) != \
                x.value.type.device:
            raise Unsupported(INEXPRESSIBLE_OP, f"moving a tensor to {a} inside the graph")
        if isinstance(a, TensorVar) and a.value.type.device != x.value.type.device:
            raise Unsupported(INEXPRESSIBLE_OP,
                              "moving a tensor to another device inside the graph")
    return Cast(None)  # the target dtype is read off the meta result


@entry(torch.cat, torch.concat, torch.concatenate, ir_meta=True, memory_format=True)
def _cat(ctx, tensors, dim=0):
    dt = result_dtype(*tensors) if len(tensors) > 1 else tensors[0].meta.dtype
    return ctx.builder.cat([cast(ctx, t, dt) for t in tensors], dim=dim)


@entry(torch.stack, ir_meta=True, memory_format=True)
def _stack(ctx, tensors, dim=0):
    dt = result_dtype(*tensors) if len(tensors) > 1 else tensors[0].meta.dtype
    r = tensors[0].value.type.rank + 1
    d = dim % r
    parts = [ctx.builder.unsqueeze(cast(ctx, t, dt), dim=d) for t in tensors]
    return ctx.builder.cat(parts, dim=d)


def _static_size(x, dim, name):
    r = max(x.value.type.rank, 1)
    d = dim % r
    size = x.value.type.shape[d]
    if not isinstance(size, int):
        raise Unsupported(INEXPRESSIBLE_OP, f"{name} along a dynamic size")
    return d, size


def _pieces(ctx, x, d, sizes):
    B = ctx.builder
    out, start = [], 0
    for n in sizes:
        out.append(B.slice(x.value, dim=d, start=start, stop=start + n))
        start += n
    return tuple(out)


@entry(T.split, torch.split, view=True, sizes=True)
def _split(ctx, x, split_size_or_sections, dim=0):
    """An int splits into pieces of that size (the last may be shorter).  A dynamic dim or
    a size expression: the piece count is specialised with a guard, the bounds stay
    symbolic (Note [Symbolic slice bounds])."""
    sections = split_size_or_sections
    r = max(x.value.type.rank, 1)
    d = dim % r
    size = x.value.type.shape[d]
    symbolic = not isinstance(size, int) or any(
        isinstance(s, sympy.Basic) for s in (sections if isinstance(sections, (list, tuple))
                                             else [sections]))
    if not symbolic:
        if isinstance(sections, int):
            step = max(sections, 1)
            sections = [min(step, size - i) for i in range(0, size, step)] or [0]
        return _pieces(ctx, x, d, list(sections))
    if isinstance(sections, (list, tuple)):
        if not ctx.decide(sympy.Eq(sum(sections), size)):
            raise Unsupported(INEXPRESSIBLE_OP, "split sections that do not sum to the size")
        return _pieces(ctx, x, d, list(sections))
    if not ctx.decide(sympy.Ge(sections, 1)):
        raise Unsupported(INEXPRESSIBLE_OP, f"split size {sections} < 1")
    count = ctx.specialize(sympy.floor((size + sections - 1) / sections))  # the piece count
    bounds = [i * sections for i in range(count)] + [size]
    out = []
    for i in range(count):
        stop = bounds[i + 1] if i + 1 == count or ctx.decide(sympy.Le(bounds[i + 1], size)) \
            else size
        out.append(ctx.builder.slice(x.value, dim=d, start=ir_size(bounds[i]), stop=ir_size(stop)))
    return tuple(out)


@entry(T.chunk, torch.chunk, view=True)
def _chunk(ctx, x, chunks, dim=0):
    """Pieces of ceil(size / chunks), as torch.chunk (possibly fewer than chunks)."""
    r = max(x.value.type.rank, 1)
    size = x.value.type.shape[dim % r]
    step = -(-size // chunks) if isinstance(size, int) else \
        ir_size(sympy.floor((size + chunks - 1) / chunks))
    return _split(ctx, x, step, dim % r)


@entry(T.narrow, torch.narrow, view=True, sizes=True)
def _narrow(ctx, x, dim, start, length):
    """x[..., start:start + length] along dim; start may be negative (from the end).  The
    bounds may be size expressions (Note [Symbolic slice bounds]); out of range, eager
    raises, so the frame falls back and does."""
    r = max(x.value.type.rank, 1)
    d = dim % r
    size = x.value.type.shape[d]
    if isinstance(start, TensorVar) or isinstance(length, TensorVar):
        raise Unsupported(INEXPRESSIBLE_OP, "narrow with a tensor start")
    if not ctx.decide(sympy.Ge(start, 0)):
        start = start + size
    if not (ctx.decide(sympy.Ge(start, 0)) and ctx.decide(sympy.Ge(length, 0))
            and ctx.decide(sympy.Le(start + length, size))):
        raise Unsupported(INEXPRESSIBLE_OP, "narrow out of range (eager raises)")
    return ctx.builder.slice(x.value, dim=d, start=ir_size(start), stop=ir_size(start + length))


@entry(T.diagonal, torch.diagonal, view=True)
def _diagonal(ctx, x, offset=0, dim1=0, dim2=1):
    """The diagonal as index maps: its two dims moved last and flattened, every (m + 1)-th
    element from the first (mutation.diagonal_primitives), so a write through it is
    functionalized as any strided slice's (Note [Writes through views]).  Dynamic sizes:
    RB013, and the call is one opaque node."""
    if is_symbolic_shape(x.value.type.shape):
        raise Unsupported(INEXPRESSIBLE_OP, "diagonal of a tensor with a dynamic size")
    steps = mutation.diagonal_primitives(list(x.value.type.shape), (offset, dim1, dim2), {})
    if steps is None:
        raise Unsupported(INEXPRESSIBLE_OP, "diagonal with these arguments")
    return mutation.replay(ctx.builder, x.value, steps)[-1]


# --- attributes, indexing, item assignment --------------------------------------------------
# Layout predicates: refcomp traces strided, unquantized tensors only (others are refused
# when read), so the meta tensor's answer is the real one.
_PLAIN_ATTRS = {"dtype", "shape", "device", "ndim", "requires_grad", "layout",
                "is_nested", "is_sparse", "is_quantized", "is_mkldnn"}
# Device predicates come from the IR type's device: the meta tensor says "meta" for all.
_DEVICE_ATTRS = {"is_cpu": "cpu", "is_cuda": "cuda", "is_meta": "meta", "is_mps": "mps",
                 "is_xpu": "xpu"}


def tensor_attr(ctx, tv: TensorVar, name: str) -> VT:
    from refcomp.tracer.values import MethodVar

    if name == "shape":
        return TupleVar([ConstVar(d) for d in tv.value.type.shape], cls=torch.Size)
    if name in ("real", "imag") and tv.meta.is_complex():  # views: torch.real/imag
        return call_torch(ctx, getattr(torch, name), [tv], {})
    if name in _DEVICE_ATTRS:
        return ConstVar(_real_device(tv).type == _DEVICE_ATTRS[name])
    if name in _PLAIN_ATTRS:
        return ConstVar(getattr(tv.meta, name) if name != "device" else _real_device(tv))
    if name == "is_leaf":
        # Eager's is_leaf is `grad_fn is None`; the meta tensor of a traced result is built
        # as a leaf, so it cannot say.  Answered where the trace knows: no grad -> a leaf;
        # a non-view result that requires grad was computed with grad on -> not a leaf; a
        # Parameter input -> a leaf (TENSOR_MATCH pins the exact type).  Views (a view
        # made under no_grad of a tensor that requires grad is a leaf) and other inputs
        # that require grad break, and eager answers.
        if not tv.requires_grad:
            return ConstVar(True)
        if tv.source is None and not tv.is_view:
            return ConstVar(False)
        if tv.source is not None and \
                isinstance(ctx.examples.get(tv.source.name()), torch.nn.Parameter):
            return ConstVar(True)
        raise Unsupported(UNSUPPORTED_TENSOR_METHOD,
                          "Tensor.is_leaf of a view or an input that requires grad")
    if name in ("H", "mH") and not tv.meta.is_complex():  # conj() of a real tensor: itself
        if name == "H" and tv.meta.dim() not in (0, 2) or name == "mH" and tv.meta.dim() < 2:
            raise Unsupported(TRACE_EXCEPTION, f"Tensor.{name} of a {tv.meta.dim()}-d tensor")
        name = "T" if name == "H" else "mT"
    if name == "T" or name == "mT":
        return call_torch(ctx, T.permute if name == "T" else T.transpose,
                          [tv] + ([ConstVar(list(range(tv.meta.dim()))[::-1])] if name == "T"
                                  else [ConstVar(-2), ConstVar(-1)]), {})
    if name == "grad":
        return _input_grad(ctx, tv)
    if name in ("data", "grad_fn", "_version"):
        raise Unsupported(UNSUPPORTED_TENSOR_METHOD, f"Tensor.{name}")
    method = getattr(T, name, None)
    if method is not None and callable(method):
        return MethodVar(name, tv, name)
    raise Unsupported(UNSUPPORTED_TENSOR_METHOD, f"Tensor.{name}")


def _input_grad(ctx, tv: TensorVar) -> VT:
    """Note [Gradients as inputs] (spec/tracer.md): `p.grad` of a graph input is read as
    an input of its own, at source `<p>.grad`, guarded as any tensor input (or `is None`).
    Nothing the graph runs sets `.grad` (backward is a break), so the value read at the
    start of the graph is the one eager reads here; in-place ops on it are writes to an
    input (written back, as for any input)."""
    from refcomp.sources import AttrSource

    src = tv.source
    if src is None or ctx.input_vars.get(src.name()) is not tv:
        raise Unsupported(UNSUPPORTED_TENSOR_METHOD, "Tensor.grad of a tensor the graph made")
    real = ctx.examples[src.name()]
    return ctx.wrap(real.grad, AttrSource(src, "grad"))


def _real_device(tv):
    dev = tv.value.type.device
    return torch.device(dev if dev != "cpu" else "cpu")


def tensor_getitem(ctx, tv: TensorVar, index: VT) -> VT:
    idx = unwrap(index)
    items = list(idx) if isinstance(idx, tuple) else [idx]
    if any(_symbolic_item(it) for it in items):
        # A dynamic size used as an index needs its number: specialised to the traced
        # value with a guard; a slice bound stays symbolic (Note [Symbolic slice bounds]).
        items = [it if _symbolic_slice_ok(it) else _specialised(ctx, it) for it in items]
        idx = tuple(items) if isinstance(idx, tuple) else items[0]
    for it in items:
        if isinstance(it, TensorVar) and it.meta.dtype == torch.bool:
            raise Unsupported(DATA_DEPENDENT_SHAPE,
                              "boolean-mask indexing has a data-dependent shape")
    if any(isinstance(it, list) or (isinstance(it, TensorVar) and it.meta.dim() != 1)
           for it in items) or sum(isinstance(it, TensorVar) for it in items) > 1:
        # Advanced indexing the IR has no rule for (several or n-d index tensors, lists):
        # one opaque call of Tensor.__getitem__, typed by its meta kernel (a copy, as eager).
        from refcomp.tracer import opaque

        return opaque.call_opaque(ctx, torch.Tensor.__getitem__, [tv, index], {},
                                  name="torch.Tensor.__getitem__")
    try:
        meta_idx = to_meta(idx, ctx)
        meta = tv.meta[meta_idx]
    except Exception as err:
        raise Unsupported(TRACE_EXCEPTION, f"indexing: {type(err).__name__}: {err}") from None
    if any(isinstance(it, TensorVar) for it in items) and meta.numel():
        # Note [Eager's layout, not the meta kernel's] (refcomp/tracer/eager_layout.py)
        meta = eager_layout.restrided(meta, eager_layout.getitem_strides(tv.meta, meta_idx))
    value = _basic_index(ctx, tv.value, items)
    check_type(value, meta, "getitem", ctx)
    operands = [tv] + [it for it in items if isinstance(it, TensorVar)]
    view = not any(isinstance(it, TensorVar) for it in items)
    out = new_tensor(ctx, value, meta, operands, view=view)
    if view:
        out.view_root = view_root(ctx, tv, out, (operator.getitem, (VIEW_BASE, idx), {}, None))
    return out


def _bounded_slice(ctx, it: slice, size) -> bool:
    """Whether `it` is `[a:b]` / `[a:b:c]` with ints 0 <= a <= b and b <= the dynamic
    `size` at the traced size (guarded), so that its length b - a is static."""
    start, stop, step = it.start or 0, it.stop, it.step or 1
    if isinstance(size, int) or not all(isinstance(x, int) and not isinstance(x, bool)
                                        for x in (start, stop, step)):
        return False
    return 0 <= start <= stop and step >= 1 and ctx.decide(sympy.Le(stop, size))


def _symbolic_slice_ok(it) -> bool:
    """A slice whose bounds may stay size expressions: a static step of at least 1."""
    return isinstance(it, slice) and (it.step is None or type(it.step) is int and it.step >= 1)


def _symbolic_slice(ctx, v: Value, dim: int, it: slice) -> Value:
    """Note [Symbolic slice bounds]: `x[:, : x.shape[1] // 2]`, `x[n:]` inside a dynamic
    dim: the bounds stay size expressions.  Python clamps a bound b of a dim of size n to
    [0, n] after adding n to a negative one; each branch of that clamping that depends on
    a symbol is decided at the traced sizes and guarded (`ctx.decide`), so the IR slice
    gets bounds with 0 <= start <= stop <= n for every call the entry serves."""
    size = v.type.shape[dim]
    step = it.step or 1
    start = _clamped_bound(ctx, it.start, size, 0)
    stop = _clamped_bound(ctx, it.stop, size, size)
    if not ctx.decide(sympy.Le(start, stop)):
        stop = start  # an empty slice
    start, stop = ir_size(start), ir_size(stop)
    if start == 0 and step == 1 and ir_size(stop - size) == 0:
        return v
    return ctx.builder.slice(v, dim=dim, start=start, stop=stop, step=step)


def _clamped_bound(ctx, b, size, default):
    if b is None:
        return default
    if not ctx.decide(sympy.Ge(b, 0)):
        b = b + size
        return b if ctx.decide(sympy.Ge(b, 0)) else 0
    return b if ctx.decide(sympy.Le(b, size)) else size


def _symbolic_item(it) -> bool:
    if isinstance(it, slice):
        return any(isinstance(x, sympy.Basic) for x in (it.start, it.stop, it.step))
    return isinstance(it, sympy.Basic)


def _specialised(ctx, it):
    def number(x):
        return ctx.specialize(x) if isinstance(x, sympy.Basic) else x
    if isinstance(it, slice):
        return slice(number(it.start), number(it.stop), number(it.step))
    return number(it)


def _expand_ellipsis(items, rank):
    consuming = sum(1 for it in items if it is not None and it is not Ellipsis)
    out = []
    for it in items:
        if it is Ellipsis:
            out.extend([slice(None)] * (rank - consuming))
        else:
            out.append(it)
    return out


def _check_index_bounds(ctx, idx: Value, x: Value, dim: int) -> None:
    """Eager raises IndexError for an index tensor out of bounds, even when the result is
    unused: a runtime check (`TraceContext.add_check`) keeps that."""
    size = x.type.shape[dim]
    if not isinstance(size, int):
        return
    B = ctx.builder
    bad = B.logical_or(B.ge(idx, B.scalar(size, like=idx.type)),
                       B.lt(idx, B.scalar(-size, like=idx.type)))
    if size == 0 and not any(d == 0 for d in idx.type.shape if isinstance(d, int)):
        # ATen's AdvancedIndex checks this before computing anything: no number indexes
        # an empty dim, so a non-empty index raises even into a result with no element.
        ctx.add_check(bad, "IndexError: index is out of bounds for dimension with size 0", ())
        return
    result = x.type.shape[:dim] + idx.type.shape + x.type.shape[dim + 1:]
    ctx.add_check(bad, f"IndexError: index out of bounds for dimension {dim} with size {size}",
                  result)


def _basic_index(ctx, v: Value, items) -> Value:
    B = ctx.builder
    dim = 0
    for it in _expand_ellipsis(items, v.type.rank):
        if it is None:
            v = B.unsqueeze(v, dim=dim)
            dim += 1
        elif isinstance(it, bool):
            raise Unsupported(INEXPRESSIBLE_OP, "indexing with a Python bool")
        elif it == slice(None):
            dim += 1
        elif isinstance(it, slice) and _bounded_slice(ctx, it, v.type.shape[dim]):
            # A slice with int bounds inside a dynamic dim: its size is static; the
            # guard `stop <= s0` says the bounds stay inside (spec/guards.md).
            v = B.slice(v, dim=dim, start=it.start or 0, stop=it.stop, step=it.step or 1)
            dim += 1
        elif isinstance(it, slice) and _symbolic_slice_ok(it) and (
                _symbolic_item(it) or not isinstance(v.type.shape[dim], int)):
            v = _symbolic_slice(ctx, v, dim, it)  # Note [Symbolic slice bounds]
            dim += 1
        elif not isinstance(v.type.shape[dim], int) and not (isinstance(it, int) and it >= 0):
            raise Unsupported(INEXPRESSIBLE_OP, f"index {it!r} into a dynamic size"
                                       f" {v.type.shape[dim]}")
        elif isinstance(it, int):
            size = v.type.shape[dim]
            i = it + size if it < 0 else it
            v = B.squeeze(B.slice(v, dim=dim, start=i, stop=i + 1), dims=[dim])
        elif isinstance(it, slice):
            start, stop, step = it.indices(v.type.shape[dim])
            if step < 1:
                raise Unsupported(INEXPRESSIBLE_OP, "negative slice step")
            if (start, stop, step) != (0, v.type.shape[dim], 1):
                v = B.slice(v, dim=dim, start=start, stop=max(stop, start), step=step)
            dim += 1
        elif isinstance(it, TensorVar):
            _check_index_bounds(ctx, it.value, v, dim)
            v = B.index_select(v, it.value, dim=dim)
            dim += 1
        else:
            raise Unsupported(INEXPRESSIBLE_OP, f"index {it!r}")
    return v


def _setitem_by_tensor(ctx, tv: TensorVar, index: TensorVar, value: VT, val) -> None:
    """`x[mask] = v` with a boolean mask of x's leading dims and one value (a number or a
    0-d tensor) is `x.masked_fill_(mask, v)`; `x[i] = v` with a 1-d int64 index is
    `x.index_put_((i,), v)`, the call eager makes (the table entries say what they
    capture and break on the rest).  Any other tensor index breaks."""
    m = index.meta
    if m.dtype == torch.bool and m.dim() <= tv.meta.dim() and \
            tuple(m.shape) == tuple(tv.meta.shape[:m.dim()]) and \
            (not isinstance(val, TensorVar) or val.meta.dim() == 0):
        if m.dim() < tv.meta.dim():
            index = call_torch(ctx, torch.Tensor.reshape, [index, ConstVar(
                tuple(m.shape) + (1,) * (tv.meta.dim() - m.dim()))], {})
        call_torch(ctx, torch.Tensor.masked_fill_, [tv, index, value], {})
        return
    if m.dtype == torch.int64 and m.dim() == 1:
        if not isinstance(val, TensorVar):
            value = call_torch(ctx, torch.tensor, [value], {"dtype": ConstVar(tv.meta.dtype)})
        call_torch(ctx, torch.Tensor.index_put_, [tv, TupleVar([index]), value], {})
        return
    raise Unsupported(INEXPRESSIBLE_OP, "item assignment with tensor or list indices")


def tensor_setitem(ctx, tv: TensorVar, index: VT, value: VT) -> None:
    """`x[idx] = v` as x' = where(mask, v placed in x's shape, x); x takes x's place."""
    idx = unwrap(index)
    val = unwrap(value)
    items = list(idx) if isinstance(idx, tuple) else [idx]
    if len(items) == 1 and isinstance(items[0], TensorVar):
        return _setitem_by_tensor(ctx, tv, items[0], value, val)
    if any(isinstance(it, (TensorVar, list, bool)) for it in items):
        raise Unsupported(INEXPRESSIBLE_OP, "item assignment with tensor or list indices")
    propagate = check_inplace(ctx, tv, "item assignment", under_grad=True)
    if is_symbolic_shape(tv.value.type.shape):
        raise Unsupported(INEXPRESSIBLE_OP, "item assignment into a tensor with a dynamic size")
    meta = tv.meta.detach().clone()
    try:
        meta[idx] = to_meta(val)
    except Exception as err:
        raise Unsupported(TRACE_EXCEPTION,
                          f"item assignment: {type(err).__name__}: {err}") from None
    mutation.refuse_overlapping_operands(tv, [val], "item assignment", tv.meta[idx])
    B = ctx.builder
    x = tv.value
    shape = list(x.type.shape)
    blocks = []  # (start, count, step) of each dim
    dim = 0
    for it in _expand_ellipsis(items, x.type.rank):
        if it is None:
            continue
        size = shape[dim]
        if isinstance(it, int):
            blocks.append((it + size if it < 0 else it, 1, 1))
        else:  # a negative step raised in the meta assignment above, as in eager
            start, stop, step = it.indices(size)
            blocks.append((start, len(range(start, stop, step)), step))
        dim += 1
    blocks += [(0, d, 1) for d in shape[dim:]]
    block_sizes = [n for _, n, _ in blocks]
    sub_shape = list(tv.meta[idx].shape)
    if isinstance(val, TensorVar):
        v = cast(ctx, val, tv.meta.dtype)
        v = B.broadcast_to(v, sub_shape)
    else:
        v = B.op("full", value=val, shape=sub_shape, dtype=x.type.dtype, device=x.type.device)
    placed = B.reshape(v, shape=block_sizes)
    mask = B.op("full", value=True, shape=block_sizes, dtype=ir_dtype(torch.bool),
                device=x.type.device)
    for d, (start, _, step) in enumerate(blocks):  # Note [Writes through views]
        placed = mutation.spread(B, placed, d, start, step, shape[d], 0)
        mask = mutation.spread(B, mask, d, start, step, shape[d], False)
    operands = [tv] + ([val] if isinstance(val, TensorVar) else [])
    # Note [In-place under grad]: eager's setitem is copy_ into a view (CopySlices); the
    # `where` reads the old value unless the index covers every element
    # or the value is those very elements (`x[idx] = x[idx]`, the store Python makes
    # after `x[idx] += v`, whose add_ already wrote x through the view: eager copies the
    # elements onto themselves; corpus grad_empty_view_of_output_written_at_break_llvm)
    covers_all = all(n == size for n, size in zip(block_sizes, shape))
    same = isinstance(val, TensorVar) and mutation.same_elements(tv.meta[idx], val)
    grad = mutation.autograd_of_write(
        ctx, tv, operands, ctx.grad_enabled and any(t.requires_grad for t in operands),
        propagate, "item assignment", reads_old=same or not covers_all)
    if same:
        return
    apply_inplace(ctx, tv, B.where(mask, placed, x), meta, grad)
    if propagate is not None:
        propagate()


def unbind(ctx, tv: TensorVar) -> list:
    if tv.meta.dim() == 0:
        raise Unsupported(TRACE_EXCEPTION, "iteration over a 0-d tensor")
    n = ctx.specialize(tv.value.type.shape[0])  # unrolling fixes the count (guarded)
    return [tensor_getitem(ctx, tv, ConstVar(i)) for i in range(n)]


# --- Python-valued queries (answered from guarded facts) -----------------------------------
for _fn in (T.size, T.dim, T.ndimension, T.numel, T.nelement, torch.numel, T.is_contiguous,
            T.is_floating_point, torch.is_floating_point, T.element_size, T.stride,
            torch.is_tensor, T.is_complex, torch.is_complex, T.get_device):
    entry(_fn, python=True)(None)


def _needs_value(name):
    def build(ctx, *args, **kwargs):
        raise Unsupported(TENSOR_TO_PYTHON, f"Tensor.{name}()")
    return build


def _data_dependent_shape(name):
    def build(ctx, *args, **kwargs):
        raise Unsupported(DATA_DEPENDENT_SHAPE, f"{name}()")
    return build


for _name in ("item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__"):
    if hasattr(T, _name):
        entry(getattr(T, _name), host=True)(_needs_value(_name))
for _name in ("nonzero", "unique", "masked_select"):
    entry(getattr(T, _name), host=True)(_data_dependent_shape(f"Tensor.{_name}"))
    entry(getattr(torch, _name), host=True)(_data_dependent_shape(f"torch.{_name}"))
