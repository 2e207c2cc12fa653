"""The `scatters` pass: a write into a slice of a base, spelled as pads and a `where` or as a
`cat` of the base's other slices, becomes one `slice_scatter`.

Owns: the two rules that recognize those spellings (`RULES`).  Must not know: the tracer,
backends.  Spec: spec/passes.md, "scatters"; why: spec/memory.md, "Writes in place".

Note [Functionalized writes]: the IR has no storage, so `h[:, 1::2] *= 3` is the base's new
value.  refcomp/tracer/mutation.py spells it with ops every backend has: a step-1 window
as `cat(slice(h, 0, a), new, slice(h, b, n))`, a strided one as `where(mask, placed, h)`
where `placed` and `mask` are `new` and an all-true value spread `step` apart by
reshape/pad/slice chains.  Both read and write every element of the base, and the pads
run as copies.  `slice_scatter(h, new)` says the same thing in one op, which the kernel
backends store as `new`'s elements only (over h's bytes when h dies there).
"""

from __future__ import annotations

import numpy as np

from ir.graph import Graph, Value
from ir.ops.layout import slice_bounds
from ir.ops.rules import normalize_dim
from ir.passes.registry import register_pass
from ir.rewrite import RuleTable, rewrite
from ir.types import bool_

RULES = RuleTable("scatters")
rule = RULES.rule


def _ints(shape) -> list | None:
    return [int(d) for d in shape] if all(isinstance(d, int) for d in shape) else None


def _padded_dim(node):
    """(dim, before, after) when `node` (a pad) pads exactly one dim, else None."""
    pads, rank = list(node.attrs["pads"]), node.inputs[0].type.rank
    touched = [(rank - 1 - k, pads[2 * k], pads[2 * k + 1]) for k in range(len(pads) // 2)
               if pads[2 * k] or pads[2 * k + 1]]
    return touched[0] if len(touched) == 1 else None


def _interleave(rw, v: Value):
    """((leaf, its shape), dim, step, chain) when v = slice(reshape(pad(reshape(leaf))))
    places leaf's elements `step` apart along dim from 0 (mutation.py `spread`), else
    None.  The leaf may come with a size-1 dim after dim: it is reshaped when used."""
    s = rw.producer(v, "slice")
    r1 = s and rw.producer(s.inputs[0], "reshape")
    p = r1 and rw.producer(r1.inputs[0], "pad")
    padded = p and _padded_dim(p)
    if not padded or s.attrs["step"] != 1 or s.attrs["start"] != 0:
        return None
    d, column = padded[0] - 1, _ints(p.inputs[0].type.shape)
    if d < 0 or column is None or column[d + 1] != 1:
        return None
    shape = column[:d + 1] + column[d + 2:]
    n, step = shape[d], padded[2] + 1
    if padded[1] != 0 or n == 0 or step < 2 or \
            _ints(r1.outputs[0].type.shape) != shape[:d] + [n * step] + shape[d + 1:] or \
            normalize_dim(s.attrs["dim"], len(shape)) != d or \
            _ints(v.type.shape) != shape[:d] + [(n - 1) * step + 1] + shape[d + 1:]:
        return None
    r0 = rw.producer(p.inputs[0], "reshape")
    if r0 is not None and _ints(r0.inputs[0].type.shape) == shape:
        return (r0.inputs[0], shape), d, step, [s, r1, p, r0]
    # fold made reshape(full) a `full` of the column shape: the leaf is its reshape
    return (p.inputs[0], shape), d, step, [s, r1, p]


def _spread(rw, placed: Value):
    """(leaf, dim, start, step, chain): `placed` holds leaf's elements at start, start + step,
    ... along dim (other elements are never read), else None."""
    outer = rw.producer(placed, "pad")
    padded = outer and _padded_dim(outer)
    inner = outer.inputs[0] if padded else placed
    found = _interleave(rw, inner)
    if found is None and not padded:
        return None
    leaf, d, step, chain = found if found else ((inner, _ints(inner.type.shape)), padded[0],
                                                1, [])
    if padded:
        if padded[0] != d:
            return None
        chain = [outer] + chain
    return leaf, d, padded[1] if padded else 0, step, chain


def _true(rw, v: Value) -> bool:
    splat = rw.splat(v)
    return v.type.dtype == bool_ and splat is not None and bool(splat)


def _all_true(rw, mask: Value, chain: list) -> bool:
    """Whether `mask` is `chain` (the layout nodes of the placed value, outermost first)
    applied to an all-true value, every pad filling False: then it is true exactly where
    the placed value holds the leaf's elements."""
    for node in chain:
        twin = rw.producer(mask, node.op.name)
        if twin is None or twin.attrs.keys() != node.attrs.keys() or any(
                twin.attrs[k] != node.attrs[k] for k in node.attrs if k != "value"):
            return False
        if twin.op.name == "pad" and twin.attrs["value"] not in (False, 0):
            return False
        mask = twin.inputs[0]
        # fold may have made the rest of the chain a `full` of this shape
        if _true(rw, mask) and mask.type.shape == node.inputs[0].type.shape:
            return True
    return False


def _mask_array(shape, d, start, step, n) -> np.ndarray:
    out = np.zeros(shape, bool)
    index = [slice(None)] * len(shape)
    index[d] = slice(start, start + (n - 1) * step + 1, step)
    out[tuple(index)] = True
    return out


def _is_mask(rw, mask: Value, chain, leaf, d, start, step) -> bool:
    if _all_true(rw, mask, chain):
        return True
    node = rw.producer(mask, "constant")  # fold evaluated a small mask
    if node is None:
        return False
    data = np.asarray(node.attrs["data"], dtype=bool)
    expected = _mask_array(_ints(mask.type.shape), d, start, step, leaf[1][d])
    return data.shape == expected.shape and bool((data == expected).all())


@rule("where")
def where_of_spread(node, rw):
    """where(spread(true), spread(v), x) -> slice_scatter(x, v)   (v placed start::step)

    The mask must be the placed value's own reshape/pad/slice chain applied to all-true
    with False padding (or a folded constant equal to it), so the two select exactly the
    window's elements."""
    mask, placed, base = node.inputs
    out = node.output.type
    if placed.type != out or base.type != out or mask.type.shape != out.shape or \
            _ints(out.shape) is None or out.dtype.is_complex:
        return None
    found = _spread(rw, placed)
    if found is None:
        return None
    leaf, d, start, step, chain = found
    value, shape = leaf
    if shape is None or value.type.dtype != out.dtype or \
            not _is_mask(rw, mask, chain, leaf, d, start, step):
        return None
    if _ints(value.type.shape) != shape:
        value = rw.emit("reshape", [value], shape=shape)
    n = shape[d]
    return rw.emit("slice_scatter", [base, value], dim=d, start=start,
                   stop=start + (n - 1) * step + 1, step=step)


def _window(rw, part: Value, d: int):
    """(base, start, stop) when `part` is a step-1 slice along dim d, else None."""
    s = rw.producer(part, "slice")
    if s is None or s.attrs["step"] != 1 or normalize_dim(s.attrs["dim"], part.type.rank) != d:
        return None
    size = s.inputs[0].type.shape[d]
    if not all(isinstance(x, int) for x in (size, s.attrs["start"], s.attrs["stop"])):
        return None
    start, stop = slice_bounds(size, s.attrs["start"], s.attrs["stop"], 1)
    return s.inputs[0], start, stop


@rule("cat")
def cat_around(node, rw):
    """cat(x[:a], v, x[b:]) -> slice_scatter(x, v, a, b)   (either side may be absent)"""
    parts, out = node.inputs, node.output.type
    if len(parts) not in (2, 3) or _ints(out.shape) is None or out.dtype.is_complex:
        return None
    d = normalize_dim(node.attrs["dim"], out.rank)
    for k in ((1,) if len(parts) == 3 else (0, 1)):
        v, sides = parts[k], [p for i, p in enumerate(parts) if i != k]
        windows = [_window(rw, p, d) for p in sides]
        if None in windows or len({w[0] for w in windows}) != 1:
            continue
        base = windows[0][0]
        if base.type != out or v.type.dtype != out.dtype:
            continue
        n, size = int(v.type.shape[d]), int(out.shape[d])
        before = windows[0] if k > 0 else None
        after = windows[-1] if k < len(parts) - 1 else None
        start = 0 if before is None else before[2]
        if (before is not None and before[1] != 0) or \
                (after is not None and (after[1] != start + n or after[2] != size)) or \
                (after is None and start + n != size):
            continue
        return rw.emit("slice_scatter", [base, v], dim=d, start=start, stop=start + n, step=1)
    return None


@register_pass("scatters")
def scatters(g: Graph) -> Graph:
    """Rewrite each write into a window of a base, spelled as pads and a `where` or as a
    `cat` (Note [Functionalized writes]), into one `slice_scatter`.

    Rewrites: with RULES, until none fires (the rewrite engine, ir/rewrite.py); the pads,
    slices and masks it leaves unused are for dce.  Never touches: effectful nodes, fused
    nodes and their bodies, symbolic shapes, complex values (lower_complex knows the pads
    and cats).  Requires: a verified graph.  Preserves: every value's type and every
    result exactly (the same elements are selected).  Idempotent.
    """
    return rewrite(g, RULES)
