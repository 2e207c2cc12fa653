"""In-place writes, functionalized: through views of an intermediate, and under grad
(issue 33).

Owns: `through_views(ctx, tv, name)`: for an in-place op on `tv` whose storage other live
tensors share, the function that, once the op's new value is `tv.value`, gives the base
its new value and re-derives every live alias from it -- or None where this cannot be
expressed (then the op breaks with RB010, as before).  `autograd_of_write(...)`: what
`tv.requires_grad` and `tv.grad_cut` become after an in-place op, or the refusal where
eager's autograd of the write cannot be expressed (Note [In-place under grad]).
`spread(...)`: a value's elements placed `step` apart along a dim (item assignment into a
slice with a step places its value with it).  `refuse_overlapping_operands(...)`: the
break before a write whose operand partially overlaps it (Note [Overlapping writes]).
Must not know the torch table.  Spec: spec/correctness.md, "Mutation and write-back".

Note [Writes through views]: the IR has no storage, only values.  A view op is an index
map of its operand (OpDef.index_map), so a write into a view is a new value of the view
*and* of its base, each view step inverted, and every other live view of that base is
its view steps replayed on the new base (the steps handled: spec/correctness.md,
"Mutation and write-back"; under grad too: Note [Writes through views under grad]).
"""

from __future__ import annotations

import operator
from typing import Callable, Optional

import torch

from ir.types import bool_, is_symbolic
from refcomp.reasons import GRADIENT_CUT, INPLACE_ON_ALIAS, Unsupported
from refcomp.tracer.values import VIEW_BASE, TensorVar

T = torch.Tensor
_RESHAPES = {T.reshape, T.view, T.flatten, T.unflatten, T.view_as, T.reshape_as,
             T.squeeze, T.unsqueeze, torch.reshape, torch.flatten, torch.squeeze,
             torch.unsqueeze, torch.unflatten}
_PERMUTES = {T.permute, T.transpose, T.swapaxes, T.t, torch.permute, torch.transpose,
             torch.swapaxes, torch.t}
_NARROWS = {T.narrow, torch.narrow}
_SELECTS = {T.select, torch.select}
_MOVEDIMS = {T.movedim, T.moveaxis, torch.movedim, torch.moveaxis}
_IDENTITIES = {T.detach, torch.detach}
_DIAGONALS = {T.diagonal, torch.diagonal}


def through_views(ctx, tv: TensorVar, live: list) -> Optional[Callable[[], None]]:
    """The propagation for an in-place op on `tv` (see the module docstring), or None.
    `live`: every live TensorVar (the frames' values)."""
    chain = _chain(tv)
    if chain is not None:
        base, base_value, steps = chain
    elif tv.view_base is None:  # the base itself is written: its views follow
        base, base_value, steps = tv, tv.value, []
    else:
        return None
    if any(is_symbolic(d) for d in base_value.type.shape):
        return None
    if tv.alias in ctx.input_aliases and (not input_base(ctx, base) or any(
            v is not base and v.alias is base.alias and input_base(ctx, v) for v in live)):
        return None
    others = []
    for v in live:
        if v.alias is not tv.alias or v is tv:
            continue
        if v is base:
            if base.value is not base_value:
                return None  # the base changed since the view was taken
            continue
        other = _chain(v)
        if other is None or other[0] is not base or other[1] is not base_value:
            return None
        others.append((v, other[2]))
    group = [tv, base, *(v for v, _ in others)]
    # Note [Writes through views under grad]
    differentiable = ctx.grad_enabled and len({v.requires_grad for v in group}) == 1 and \
        all(_made_under_grad(v) for v in group if v is not base)
    if any(v.requires_grad for v in group) and not differentiable:
        return None  # eager's write is silent to autograd, or raises; the graph's is neither
    if base.alias in ctx.input_aliases and any(v.requires_grad for v in group):
        return None  # Note [Writes through views of a graph input]: without grad only

    def propagate() -> None:
        b = ctx.builder
        new_base = _write_back(b, base_value, steps, tv.value) if steps else tv.value
        base.value = new_base
        if base.alias in ctx.input_aliases:  # Note [Writes through views of a graph input]
            ctx.record_mutation(base, base)
        for v, v_steps in others:
            v.value = replay(b, new_base, v_steps)[-1]
            v.view_base, v.view_made = (base, new_base), v.value
        if steps:
            tv.view_base, tv.view_made = (base, new_base), tv.value
        if tv.requires_grad:  # Note [Writes through views under grad]
            for v in (base, *(v for v, _ in others)):
                v.requires_grad = True
                v.meta = v.meta.detach().requires_grad_(True)
    propagate.differentiable = differentiable
    propagate.reads_base = any(st[0] == "slice" and (st[2], st[3], st[4]) != (0, size, 1)
                               for st, size in zip(steps, _slice_sizes(base_value, steps)))
    return propagate


# Note [Writes through views of a graph input]
# A write through a view the frame took of a graph input (`a[:, 1::2].mul_(3)`, `a.
# diagonal().fill_(7)`) gives the input its new value as for an intermediate's view; the
# input is then written back whole once after the graph (`OutputFix.writes_back`), so the
# caller's tensor, and every view of it the caller holds, sees eager's elements.  Only the
# input itself is a base here (a view of the caller's storage that is not the input
# argument, or two arguments sharing storage, keeps the break), and only where nothing
# in the group requires grad: an input's history under grad is Note [In-place on a graph
# input under grad]'s, which writes the whole input and no view of it.
def input_base(ctx, base: TensorVar) -> bool:
    """Is `base` a graph input argument itself (not a view the caller passed alongside),
    each of whose elements has its own memory?  (The write-back `copy_` into an expanded
    input raises where eager's write through a view of it need not: corpus
    write_through_narrow_of_expanded_input.)"""
    return base.source is not None and ctx.input_vars.get(base.source.name()) is base and \
        not has_shared_elements(base.meta)


def has_shared_elements(m: torch.Tensor) -> bool:
    """Do two elements of meta tensor `m` share memory (a stride-0 dim, e.g. expand)?"""
    overlap = torch._debug_has_internal_overlap(m)  # 0 no, 1 yes, 2 too hard
    return overlap == 1 or (overlap == 2 and not _distinct_elements(m))


def _distinct_elements(m: torch.Tensor) -> bool:
    """Each element at its own address: with the dims ordered by stride, each stride
    passes the extent of the dims below it (a slice or narrow of a dense tensor; ATen
    calls these "too hard" and, unlike a stride-0 dim, lets in-place ops write them)."""
    if not all(isinstance(x, int) for x in (*m.shape, *m.stride())):
        return False
    extent = 0
    dims = sorted((st, s) for s, st in zip(m.shape, m.stride()) if s > 1)
    for stride, size in dims:
        if stride <= extent:
            return False
        extent += stride * (size - 1)
    return True


# Note [Writes through views under grad]
# Eager records an in-place op on a view of a tensor that requires grad (or one writing
# a value that does) as CopySlices on the base: the base's gradient is the output's
# gradient with the view's region sent through the op's backward.  The functionalized
# base (Note [Writes through views]: the old base with the view's new elements put back
# by concatenation, a `where`, a reshape or a permutation) has exactly that gradient, and
# each other live view replayed on it has its view's.  So the write is captured under
# grad when every view in the group is a differentiable view made under grad mode (no
# detach(): eager's write through it is silent to the base's autograd; none made under
# no_grad: eager raises "A view was created in no_grad mode and is being modified
# inplace"), all of them and the base requiring grad or none, and the base is an
# intermediate (views of graph inputs are not functionalized).  The base and its views
# require grad afterwards.  A view op with several results (chunk, split: eager raises)
# is no view step here.  A write that does not read the view's old value still reads
# the rest of the base (`reads_base`), so the old base gets eager's zero gradient there.
def _made_under_grad(v: TensorVar) -> bool:
    """Was each view op from its base to `v` a differentiable view made under grad mode
    (no detach, none under no_grad: eager refuses an in-place op on such a view under
    grad, or keeps it silent to autograd)?"""
    return v.view_grad and v.view_steps is not None and \
        not any(fn in _IDENTITIES for fn, _, _, _ in v.view_steps)


def _slice_sizes(base_value, steps) -> list:
    """The size along its dim of the operand of each step (None for other steps)."""
    meta = torch.empty(tuple(int(d) for d in base_value.type.shape), device="meta")
    out = []
    for step in steps:
        if step[0] == "reshape":
            out.append(None)
            meta = meta.reshape(step[2])
        elif step[0] == "permute":
            out.append(None)
            meta = meta.permute(step[1])
        else:
            _, dim, start, stop, stride = step
            out.append(int(meta.shape[dim]))
            meta = meta[(slice(None),) * dim + (slice(start, stop, stride),)]
    return out


# Note [In-place under grad]
# Eager's autograd records `y.op_(a)` on a non-leaf y as the out-of-place op of y's old
# value: y's grad_fn becomes that op's backward.  The functionalized IR says the same (y's
# value is op(old y, a)), so such a write is captured when y is an intermediate the frame
# computed (through a view of it: Note [Writes through views under grad]), grad mode is
# on, and no operand is a gradient cut.  Afterwards y requires grad, and its meta tensor
# says so: the reverted first version (4a41f7f) left it detached, so the op after
# `ReLU(inplace=True)` traced as not requiring grad, a silent cut of every gradient before
# it (resnet_tiny's conv1.weight got none).  Eager's refusals stay eager's:
# a graph input (a leaf that requires grad raises; a non-leaf's history would be rebased
# after the graph, which write-back does not do) breaks and runs there, as does a write
# under no_grad into a tensor that requires grad (eager keeps its old grad_fn); a tensor
# an earlier op saved for its backward was already refused (ctx.saved_for_backward), and a
# leaf that requires grad cannot be made inside a graph (torch_table.new_tensor).  Under
# no_grad, writing a value that depends on a tensor that requires grad makes y a gradient
# cut, as an op's result under no_grad is.  A write that does not read y's old value
# (`y.copy_(w)`) breaks: eager's backward gives the old value a zero gradient (x.grad is
# zeros), the graph, where nothing reads it, none.
def autograd_of_write(ctx, tv: TensorVar, operands: list, result_requires_grad: bool,
                      propagate, name: str, reads_old: bool = True) -> tuple:
    """(requires_grad, grad_cut) of `tv` after an in-place op on it with tensor operands
    `operands` (tv among them), whose result eager records for autograd iff
    `result_requires_grad`; raises where that cannot be traced (Note [In-place under
    grad]).  `propagate`: through_views' result for this write; reads_old: whether the
    new value was computed from tv's old one."""
    if not result_requires_grad:
        if tv.requires_grad and _leaf_input_written_without_grad(ctx, tv):
            return True, False  # Note [Parameters written under no_grad]
        if tv.requires_grad:
            raise Unsupported(INPLACE_ON_ALIAS, f"{name} under no_grad on a tensor that requires"
                                                " grad")
        cut = any(t.grad_cut or t.requires_grad for t in operands)
        return False, tv.grad_cut or (tv.meta.is_floating_point() and cut)
    what = "on a tensor that requires grad" if tv.requires_grad else \
        "writes a value that requires grad into a tensor that does not"
    if tv.source is not None:
        _input_written_under_grad(ctx, tv, name, what)
    if propagate is not None:  # Note [Writes through views under grad]
        if not propagate.differentiable:
            raise Unsupported(INPLACE_ON_ALIAS, f"{name} {what}, through a view made under"
                                                " no_grad or by detach()")
        reads_old = reads_old or propagate.reads_base
    elif tv.is_view or tv.view_base is not None:
        raise Unsupported(INPLACE_ON_ALIAS, f"{name} {what}, through a view")
    if tv.requires_grad and not reads_old:
        raise Unsupported(INPLACE_ON_ALIAS, f"{name} overwrites a tensor that requires grad"
                                            " without reading it (eager's gradient of the old"
                                            " value is zeros, the graph's none)")
    if any(t.grad_cut for t in operands):
        raise Unsupported(GRADIENT_CUT, f"{name}: a detached / no_grad value feeds an op that"
                                        " records gradients")
    return True, False


# Note [In-place on a graph input under grad]
# A graph input that is not a leaf requiring grad (`h = x * 2` passed in, a tensor live
# at a break, a buffer written with a value that requires grad) is written in place
# under grad as eager writes it: its new value is a graph output that requires grad, and
# after the graph `Entry.run` copies it into the caller's tensor *with grad on*, so
# autograd records the copy (CopyBackwards: the gradient of the tensor's later uses goes
# to the new value, none to the old one) and bumps the version once, as eager's op does:
# a node of the caller's that saved the tensor raises at backward, as eager's does.  The
# graph gets a clone of that input (the caller's tensor is written before the backward
# runs, and eager's in-place op saves its original value as a clone too); eager's
# gradient of the old value is then the clone's.  Eager raises for a leaf that requires
# grad and for an inference tensor, and a view carries its base's history (CopySlices,
# a no_grad view's refusal, a multi-output view's): these break (RB010, a guarded fact
# of the input, so a call with another kind of tensor recompiles), and eager runs them.
# Note [Parameters written under no_grad]: an optimizer's step writes its parameters,
# leaves that require grad, under no_grad (`p.addcdiv_(...)`).  Eager changes the data
# and keeps the leaf as it is.  Such a write into a graph input that is a leaf (guarded)
# is captured and written back; the tensor still requires grad, and since the graph's
# autodiff would take its new value as computed from the old one, any later op under
# grad with it as an operand breaks (torch_table.new_tensor) -- eager would start a new
# history at the leaf there.
def _leaf_input_written_without_grad(ctx, tv: TensorVar) -> bool:
    src = tv.source.name() if tv.source is not None else None
    example = ctx.examples.get(src)
    if src is None or ctx.input_vars.get(src) is not tv or tv.is_view or \
            tv.view_base is not None or not isinstance(example, torch.Tensor):
        return False
    leaf = bool(example.is_leaf and not example._is_view())
    ctx.guard_fact(tv.source, _is_plain_leaf, "{}.is_leaf and not {}._is_view()", leaf)
    tv.written_without_grad = leaf
    return leaf


def _is_plain_leaf(t) -> bool:
    return bool(t.is_leaf and not t._is_view())


def _input_written_under_grad(ctx, tv: TensorVar, name: str, what: str) -> None:
    """Raise where a write under grad into the graph input `tv` is not captured (Note
    [In-place on a graph input under grad]); guard the facts that allowed it."""
    src = tv.source.name()
    example = ctx.examples.get(src)
    if ctx.input_vars.get(src) is not tv or not isinstance(example, torch.Tensor) or \
            tv.view_base is not None or tv.is_view:
        raise Unsupported(INPLACE_ON_ALIAS, f"{name} {what}, an input of the graph")
    refused = refuses_write_under_grad(example)
    ctx.guard_fact(tv.source, refuses_write_under_grad,
                   "refuses_write_under_grad({})", refused)
    if refused:
        raise Unsupported(INPLACE_ON_ALIAS, f"{name} {what}, an input of the graph that is"
                                            " a leaf that requires grad, a view or an"
                                            " inference tensor")


def refuses_write_under_grad(t: torch.Tensor) -> bool:
    """The guarded fact of Note [In-place on a graph input under grad]."""
    return bool(t._is_view() or t.is_inference() or (t.is_leaf and t.requires_grad))


# Note [Overlapping writes]
# Eager refuses an in-place op whose operand partially overlaps the written tensor
# (`x[1:] = x[:-1]`, `x.mul_(x.t())`: "unsupported operation: some elements of the input
# tensor and the written-to tensor refer to a single memory location"), before writing
# anything; where ATen cannot tell (non-dense views: "too hard") it writes in its kernel's
# order, which a functional value does not say.  So an operand that shares the written
# tensor's storage is allowed only when their elements are disjoint, or are the same
# elements in the same layout (`t.mul_(t)`); otherwise the op breaks (RB010) and torch
# runs it: it raises, or computes, as eager does, with the tensor unchanged on a raise.
# The addresses come from the meta tensors: views of one tensor are views of one meta
# storage (an in-place op keeps its tensor's meta, see apply_inplace), so their offsets
# and strides are comparable; tensors that share storage by other means (two inputs) are
# not, and break.
def refuse_overlapping_operands(tv: TensorVar, operands: list, name: str,
                                written=None) -> None:
    """Raise RB010 where an operand of an in-place op on `tv` shares its storage other
    than as disjoint elements or as the same elements (Note [Overlapping writes]).
    written: the meta tensor of the elements written, when not all of tv (`tv[idx] = v`
    writes tv's meta[idx])."""
    written = tv.meta if written is None else written
    for t in operands:
        if t is tv or not isinstance(t, TensorVar) or t.alias is not tv.alias:
            continue
        if not _disjoint_or_same(written, t.meta):
            raise Unsupported(INPLACE_ON_ALIAS, f"{name} reads a tensor that partially overlaps"
                                                " the tensor it writes")


def same_elements(written: torch.Tensor, t: TensorVar) -> bool:
    """Is `t` the elements `written` (a meta view of the written tensor), in the same
    layout and dtype?  (Its value is then theirs: Note [Writes through views].)"""
    b = t.meta
    return torch._C._is_alias_of(written, b) and \
        (written.shape, written.stride(), written.storage_offset(), written.dtype) == \
        (b.shape, b.stride(), b.storage_offset(), b.dtype)


def _disjoint_or_same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0:
        return True
    if not torch._C._is_alias_of(a, b):
        return False  # no common meta storage: their relative position is unknown
    if (a.shape, a.stride(), a.storage_offset(), a.dtype) == \
            (b.shape, b.stride(), b.storage_offset(), b.dtype):
        return True
    if a.element_size() != b.element_size() or a.numel() + b.numel() > 1 << 22:
        return False
    return not bool(torch.isin(_addresses(a), _addresses(b)).any())


def _addresses(m: torch.Tensor) -> torch.Tensor:
    """The storage index of each element of `m` (static sizes)."""
    out = torch.tensor(int(m.storage_offset()))
    for size, stride in zip(m.shape, m.stride()):
        out = out.unsqueeze(-1) + torch.arange(int(size)) * int(stride)
    return out.reshape(-1)


def _chain(v: TensorVar):
    """(root TensorVar, its value then, primitive steps) when v is a chain of supported
    view steps of an intermediate, taken since v was made; else None."""
    if v.view_base is None or v.view_steps is None or v.value is not v.view_made:
        return None
    root, value = v.view_base
    if any(is_symbolic(d) for d in value.type.shape):  # the steps run on a meta tensor
        return None  # (through_views refuses a symbolic base anyway)
    steps = _primitives(value, v.view_steps)
    return None if steps is None else (root, value, steps)


def _primitives(value, view_steps) -> Optional[list]:
    """The view steps as IR index maps: ("reshape", in shape, out shape), ("permute",
    perm), ("slice", dim, start, stop, step); None where a step is not one of these."""
    meta = torch.empty(tuple(int(d) for d in value.type.shape), device="meta")
    out = []
    for fn, args, kwargs, item in view_steps:
        if item is not None:
            return None
        args = [meta if a is VIEW_BASE else a for a in args]
        try:
            result = fn(*args, **kwargs)
        except Exception:
            return None
        if fn in _RESHAPES:
            out.append(("reshape", list(meta.shape), list(result.shape)))
        elif fn in _PERMUTES:
            out.append(("permute", _perm(fn, meta.dim(), args[1:], kwargs)))
        elif fn in _NARROWS:
            dim, start, length = _narrow_args(meta.dim(), args[1:], kwargs)
            out.append(("slice", dim, start, start + length, 1))
        elif fn in _SELECTS or fn in _MOVEDIMS:
            if kwargs or len(args) != 3 or not all(isinstance(a, int) for a in args[1:]):
                return None
            rank, dim = meta.dim(), args[1] % max(meta.dim(), 1)
            if fn in _MOVEDIMS:
                perm = [d for d in range(rank) if d != dim]
                perm.insert(args[2] % max(rank, 1), dim)
                out.append(("permute", perm))
            else:
                i = args[2] + meta.shape[dim] if args[2] < 0 else args[2]
                out.append(("slice", dim, i, i + 1, 1))
                shape = list(meta.shape)
                out.append(("reshape", shape[:dim] + [1] + shape[dim + 1:],
                            shape[:dim] + shape[dim + 1:]))
        elif fn in _DIAGONALS:
            steps = diagonal_primitives(list(meta.shape), args[1:], kwargs)
            if steps is None:
                return None
            out += steps
        elif fn is operator.getitem:
            steps = _getitem_primitives(list(meta.shape), args[1])
            if steps is None:
                return None
            out += steps
        elif fn not in _IDENTITIES:
            return None
        meta = result
    return out


def diagonal_primitives(shape, args, kwargs) -> Optional[list]:
    """`diagonal(offset, dim1, dim2)` as primitive steps: the two dims moved last,
    flattened into one, and every (m + 1)-th element of it from the diagonal's first (m:
    dim2's size), so writing it back is a strided slice's `where` (Note [Writes through
    views])."""
    names = ("offset", "dim1", "dim2")
    values = dict(zip(names, (0, 0, 1)))
    values.update(zip(names, args))
    values.update(kwargs)
    if set(values) != set(names) or not all(isinstance(values[k], int) for k in names):
        return None
    rank = len(shape)
    offset, d1, d2 = values["offset"], values["dim1"] % rank, values["dim2"] % rank
    others = [d for d in range(rank) if d not in (d1, d2)]
    n, m = shape[d1], shape[d2]
    k = max(min(n, m - offset) if offset >= 0 else min(n + offset, m), 0)
    start = (offset if offset >= 0 else -offset * m) if k else 0
    lead = [shape[d] for d in others]
    return [("permute", others + [d1, d2]), ("reshape", lead + [n, m], lead + [n * m]),
            ("slice", len(others), start, start + (k - 1) * (m + 1) + 1 if k else start,
             m + 1)]


def _getitem_primitives(shape, index) -> Optional[list]:
    """Basic indexing (ints, slices with a positive step, None, Ellipsis) as primitive
    steps."""
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(1 for it in items if it is Ellipsis) > 1 or \
            not all(it is None or it is Ellipsis or isinstance(it, (int, slice))
                    for it in items) or any(isinstance(it, bool) for it in items):
        return None
    used = sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > len(shape):
        return None
    if Ellipsis in items:
        k = items.index(Ellipsis)
        items = items[:k] + [slice(None)] * (len(shape) - used) + items[k + 1:]
    steps, dim, shape = [], 0, list(shape)
    for it in items:
        if it is None:
            new = shape[:dim] + [1] + shape[dim:]
            steps.append(("reshape", shape, new))
            shape, dim = new, dim + 1
        elif isinstance(it, int):
            i = it + shape[dim] if it < 0 else it
            if not 0 <= i < shape[dim]:
                return None
            steps.append(("slice", dim, i, i + 1, 1))
            new = shape[:dim] + shape[dim + 1:]
            steps.append(("reshape", shape[:dim] + [1] + shape[dim + 1:], new))
            shape = new
        else:
            if it.step is not None and it.step < 1:  # eager raises for a negative step
                return None
            start, stop, step = it.indices(shape[dim])
            n = len(range(start, stop, step))
            steps.append(("slice", dim, start, start + (n - 1) * step + 1 if n else start, step))
            shape = shape[:dim] + [n] + shape[dim + 1:]
            dim += 1
    return steps


def replay(b, value, steps) -> list:
    """The value after each primitive step applied to `value`, first to last."""
    values = [value]
    for step in steps:
        current = values[-1]
        if step[0] == "reshape":
            values.append(b.reshape(current, shape=step[2]))
        elif step[0] == "permute":
            values.append(b.permute(current, perm=step[1]))
        else:
            _, dim, start, stop, stride = step
            values.append(b.slice(current, dim=dim, start=start, stop=stop, step=stride))
    return values


def _write_back(b, base_value, steps, new_view):
    """The base's new value: each step inverted, from the view back to the base."""
    values = replay(b, base_value, steps)
    new = new_view
    for i in range(len(steps) - 1, -1, -1):
        step, parent = steps[i], values[i]
        if step[0] == "reshape":
            new = b.reshape(new, shape=step[1])
        elif step[0] == "permute":
            new = b.permute(new, perm=_inverse(step[1]))
        elif step[4] != 1:
            new = _scatter_strided(b, parent, new, step[1], step[2], step[4])
        else:
            _, dim, start, stop, _ = step
            size = int(parent.type.shape[dim])
            parts = []
            if start > 0:
                parts.append(b.slice(parent, dim=dim, start=0, stop=start))
            parts.append(new)
            if stop < size:
                parts.append(b.slice(parent, dim=dim, start=stop, stop=size))
            new = b.cat(parts, dim=dim) if len(parts) > 1 else new
    return new


def _scatter_strided(b, parent, new, dim, start, step):
    """`parent` with `parent[..., start::step, ...][:n] = new` along dim (n: new's size
    there): the elements of `new` spread `step` apart by padding, selected by a mask
    spread the same way."""
    if int(new.type.shape[dim]) == 0:
        return parent
    size = int(parent.type.shape[dim])
    mask = b.full(value=True, shape=list(new.type.shape), dtype=bool_, device=new.type.device)
    placed = spread(b, new, dim, start, step, size, 0)
    return b.where(spread(b, mask, dim, start, step, size, False), placed, parent)


def spread(b, v, dim, start, step, size, fill):
    """A value of size `size` along dim holding v's elements at start, start + step, ...
    and `fill` elsewhere (v's size n there satisfies start + (n - 1) * step < size)."""
    shape = [int(d) for d in v.type.shape]
    n, rank = shape[dim], len(shape)
    if n and step > 1:
        v = b.reshape(v, shape=shape[:dim + 1] + [1] + shape[dim + 1:])
        v = b.pad(v, pads=_pads(rank + 1, dim + 1, 0, step - 1), value=fill)
        v = b.reshape(v, shape=shape[:dim] + [n * step] + shape[dim + 1:])
        v = b.slice(v, dim=dim, start=0, stop=(n - 1) * step + 1)
    extent = (n - 1) * step + 1 if n else 0
    if start == 0 and extent == size:
        return v
    return b.pad(v, pads=_pads(rank, dim, start, size - start - extent), value=fill)


def _pads(rank, dim, before, after) -> list:
    """F.pad's list (last dim first) padding only `dim`."""
    pads = [0] * (2 * (rank - dim))
    pads[-2:] = [before, after]
    return pads


def _perm(fn, rank, args, kwargs) -> list:
    if fn in (T.t, torch.t):
        return list(range(rank))[::-1]
    if fn in (T.permute, torch.permute):
        dims = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
        dims = kwargs.get("dims", dims)
        return [d % rank for d in dims]
    d0, d1 = (list(args) + [kwargs.get("dim0"), kwargs.get("dim1")])[:2]
    perm = list(range(rank))
    perm[d0 % rank], perm[d1 % rank] = perm[d1 % rank], perm[d0 % rank]
    return perm


def _inverse(perm) -> list:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


def _narrow_args(rank, args, kwargs):
    values = list(args) + [kwargs.get(k) for k in ("dim", "start", "length")][len(args):]
    dim, start, length = values[:3]
    return dim % rank, int(start), int(length)
