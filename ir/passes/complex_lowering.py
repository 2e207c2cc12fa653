"""Complex lowering: complex values become float pairs, so kernels never load a complex.

Owns: the `lower_complex` pass and `RULES`, its rule table on the rewrite engine.  A
complex value z of type c64[s] is carried as p = view_as_real(z): f32[s,2], torch's own
layout (strides x2, last stride 1).  Each rule rewrites one node that computes on complex
values into float ops on the pairs of its operands and returns `view_as_complex` of the
resulting pair; `view_as_real(view_as_complex(p)) -> p` then joins the rules' pairs, so
a chain of complex ops becomes a chain of float ops.  What remains complex: graph inputs
(read through view_as_real), graph outputs (view_as_complex of a pair) and the operands
and results of extern ops (ATen computes those).  Spec: spec/ir.md, "Complex values".

Kernel backends run it first (ir/passes/pipelines.py); gradients are taken after it
(refcomp/runtime.py), so torch's convention for complex gradients (the gradient of a real
loss is dL/dre + i dL/dim) is the float pairs' own gradient read through the views.
"""

from __future__ import annotations

from typing import Optional

from ir.graph import Graph, Node, Value
from ir.ops.rules import normalize_dim, normalize_dims
from ir.passes.cse import cse
from ir.passes.dce import dce
from ir.passes.registry import register_pass
from ir.rewrite import Rewriter, RuleTable
from ir.types import bool_, real_dtype

RULES = RuleTable("lower_complex")
rule = RULES.rule


def has_complex(g: Graph) -> bool:
    return any(v.type.dtype.is_complex for v in g.inputs) or any(
        v.type.dtype.is_complex for n in g.nodes for v in n.outputs)


@register_pass("lower_complex")
def lower_complex(g: Graph) -> Graph:
    """Every complex computation as float-pair arithmetic; complex values stay only at the
    graph's inputs and outputs and at extern ops, joined to the pairs by the two views."""
    return dce(cse(RULES(g))) if has_complex(g) else g  # one pair per complex value


# --- pairs and parts --------------------------------------------------------------------
def _pair(rw: Rewriter, z: Value) -> Value:
    """z's float pairs: [..., 2]."""
    node = rw.producer(z, "view_as_complex")
    return node.inputs[0] if node is not None else rw.emit("view_as_real", [z])


def _parts(rw: Rewriter, v: Value, parts_dtype):
    """(re, im) of v in `parts_dtype`; a real v's im is an explicit +0.0: torch promotes
    it to complex and computes every cross term (inf * 0 is NaN, -0.0 + 0.0 is 0.0)."""
    if not v.type.dtype.is_complex:
        re = _cast(rw, v, parts_dtype)
        return re, _scalar(rw, 0.0, re)
    p = _pair(rw, v)
    joined = _joined_parts(rw, p)
    if joined is not None:  # a pair a rule made: its parts, not slices of it
        return tuple(_cast(rw, part, parts_dtype) for part in joined)
    p = _cast(rw, p, parts_dtype)
    rank = v.type.rank
    return tuple(rw.emit("squeeze", [rw.emit("slice", [p], dim=rank, start=k, stop=k + 1)],
                         dims=[rank]) for k in (0, 1))


def _joined_parts(rw: Rewriter, p: Value):
    """(re, im) where p is a pair `_join` made, else None."""
    node = rw.producer(p, "where")
    if node is None or not _is_first_of_pair(rw, node.inputs[0]):
        return None
    parts = []
    for half in node.inputs[1:]:
        made = rw.producer(half, "expand")
        made = made and rw.producer(made.inputs[0], "unsqueeze")
        if made is None or made.attrs["dim"] != p.type.rank - 1:
            return None
        part = made.inputs[0]
        scalar = rw.producer(part, "reshape")  # a rank-0 part, reshaped to the rank
        parts.append(scalar.inputs[0] if scalar is not None and
                     scalar.inputs[0].type.rank == 0 else part)
    return tuple(parts)


def _is_first_of_pair(rw: Rewriter, mask: Value) -> bool:
    made = rw.producer(mask, "expand")
    made = made and rw.producer(made.inputs[0], "reshape")
    made = made and rw.producer(made.inputs[0], "constant")
    return made is not None and made.attrs["data"] == [True, False]


def _cast(rw, v, dtype):
    return v if v.type.dtype == dtype else rw.emit("cast", [v], dtype=dtype)


def _join(rw: Rewriter, node: Node, re: Value, im: Optional[Value]) -> Value:
    """The complex result of `node` from its parts (im None: zero): view_as_complex of
    where(k == 0, re, im) over the pairs' index k, one kernel that interleaves the parts
    (torch.cat of the two halves along a last dim of 2 took 4x the kernels' time)."""
    out = node.outputs[0].type
    parts, shape = real_dtype(out.dtype), list(out.shape) + [2]
    if im is None:
        im = rw.emit("full", [], value=0.0, shape=(), dtype=parts, device=out.device)
    halves = []
    for part in (re, im):
        part = _cast(rw, part, parts)
        if part.type.rank != out.rank:  # a rank-0 part beside full-shape operands
            part = rw.emit("reshape", [part], shape=[1] * out.rank)
        halves.append(rw.emit("expand", [rw.emit("unsqueeze", [part], dim=out.rank)],
                              shape=shape))
    first = rw.emit("constant", [], data=[True, False], dtype=bool_, device=out.device)
    first = rw.emit("expand", [rw.emit("reshape", [first], shape=[1] * out.rank + [2])],
                    shape=shape)
    return rw.emit("view_as_complex", [rw.emit("where", [first, *halves])])


def _complex_node(node: Node) -> bool:
    return any(v.type.dtype.is_complex for v in list(node.inputs) + list(node.outputs))


def _parts_dtype(node: Node):
    dtypes = [v.type.dtype for v in node.inputs if v.type.dtype.is_complex]
    out = node.outputs[0].type.dtype
    return real_dtype(out if out.is_complex else dtypes[0])


# Arithmetic on parts where None stands for an exact zero.
def _add(rw, a, b):
    return b if a is None else a if b is None else rw.emit("add", [a, b])


def _sub(rw, a, b):
    return a if b is None else _neg(rw, b) if a is None else rw.emit("sub", [a, b])


def _mul(rw, a, b):
    return None if a is None or b is None else rw.emit("mul", [a, b])


def _neg(rw, a):
    return None if a is None else rw.emit("neg", [a])


def _scalar(rw, value, like):
    return rw.emit("full", [], value=value, shape=(), dtype=like.type.dtype,
                   device=like.type.device)


def _or_zero(rw, a, like):
    return a if a is not None else rw.emit("full", [], value=0.0, shape=(),
                                           dtype=like.type.dtype, device=like.type.device)


# --- the two views ----------------------------------------------------------------------
@rule("view_as_real")
def pairs_of_complex_pairs(node, rw):
    """view_as_real(view_as_complex(p)) -> p"""
    made = rw.producer(node.inputs[0], "view_as_complex")
    return made.inputs[0] if made is not None else None


@rule("view_as_complex")
def complex_of_pairs(node, rw):
    """view_as_complex(view_as_real(z)) -> z"""
    made = rw.producer(node.inputs[0], "view_as_real")
    return made.inputs[0] if made is not None else None


# --- views, copies, cat: the same op on the pairs, the trailing pair dim kept -----------
@rule("reshape", "expand")
def shaped_pairs(node, rw):
    """reshape(z, s) -> view_as_complex(reshape(pair(z), s + [2])); expand likewise"""
    if not _complex_node(node):
        return None
    shape = list(node.attrs["shape"]) + [2]
    return rw.emit("view_as_complex", [rw.emit(node.op.name, [_pair(rw, node.inputs[0])],
                                               shape=shape)])


@rule("permute")
def permuted_pairs(node, rw):
    """permute(z, perm) -> view_as_complex(permute(pair(z), perm + [rank]))"""
    if not _complex_node(node):
        return None
    perm = list(node.attrs["perm"]) + [len(node.attrs["perm"])]
    return rw.emit("view_as_complex", [rw.emit("permute", [_pair(rw, node.inputs[0])],
                                               perm=perm)])


@rule("slice", "unsqueeze", "squeeze")
def dim_pairs(node, rw):
    """slice/unsqueeze/squeeze of z -> the same on pair(z), at the dims they name in z"""
    if not _complex_node(node):
        return None
    x = node.inputs[0]
    attrs = dict(node.attrs)
    if node.op.name == "slice":
        attrs["dim"] = normalize_dim(attrs["dim"], x.type.rank)
    elif node.op.name == "unsqueeze":
        attrs["dim"] = normalize_dim(attrs["dim"], x.type.rank + 1)
    elif attrs["dims"]:
        attrs["dims"] = list(normalize_dims(attrs["dims"], x.type.rank)) if x.type.rank else []
    else:
        attrs["dims"] = [d for d, n in enumerate(x.type.shape) if n == 1]
    if node.op.name == "squeeze" and not attrs["dims"]:
        return x
    return rw.emit("view_as_complex", [rw.emit(node.op.name, [_pair(rw, x)], **attrs)])


@rule("cat")
def cat_pairs(node, rw):
    """cat(zs, d) -> view_as_complex(cat(pairs(zs), d))"""
    if not _complex_node(node):
        return None
    dim = normalize_dim(node.attrs["dim"], node.outputs[0].type.rank)
    return rw.emit("view_as_complex", [rw.emit("cat", [_pair(rw, z) for z in node.inputs],
                                               dim=dim)])


@rule("copy", "stop_gradient")
def copied_pairs(node, rw):
    """copy(z) -> view_as_complex(copy(pair(z)))"""
    if not _complex_node(node):
        return None
    return rw.emit("view_as_complex", [rw.emit(node.op.name, [_pair(rw, node.inputs[0])])])


@rule("sum", "mean")
def reduced_pairs(node, rw):
    """sum(z, dims) -> view_as_complex(sum(pair(z), dims)): parts sum apart"""
    if not _complex_node(node):
        return None
    x = node.inputs[0]
    if x.type.rank == 0:
        return x  # one element: its own sum and mean
    dims = list(normalize_dims(node.attrs["dims"], x.type.rank))
    return rw.emit("view_as_complex", [rw.emit(node.op.name, [_pair(rw, x)], dims=dims,
                                               keepdim=node.attrs["keepdim"])])


# --- pointwise --------------------------------------------------------------------------
@rule("add", "sub")
def added_parts(node, rw):
    """a +- b -> (ar +- br) + i (ai +- bi)"""
    if not _complex_node(node):
        return None
    (ar, ai), (br, bi) = (_parts(rw, v, _parts_dtype(node)) for v in node.inputs)
    op = _add if node.op.name == "add" else _sub
    return _join(rw, node, op(rw, ar, br), op(rw, ai, bi))


@rule("mul")
def multiplied_parts(node, rw):
    """a * b -> (ar br - ai bi) + i (ar bi + ai br)"""
    if not _complex_node(node):
        return None
    (ar, ai), (br, bi) = (_parts(rw, v, _parts_dtype(node)) for v in node.inputs)
    re = _sub(rw, _mul(rw, ar, br), _mul(rw, ai, bi))
    return _join(rw, node, re, _add(rw, _mul(rw, ar, bi), _mul(rw, ai, br)))


@rule("div")
def divided_parts(node, rw):
    """a / b -> ((ar c + ai d) + i (ai c - ar d)) / ((c^2 + d^2) s), c = br/s, d = bi/s,
    s = max(|br|, |bi|) (no overflow in c^2 + d^2); (ar / |br|, ai / |bi|) where s is 0,
    as torch's c10 division"""
    if not _complex_node(node):
        return None
    (ar, ai), (br, bi) = (_parts(rw, v, _parts_dtype(node)) for v in node.inputs)
    if bi is None:
        return _join(rw, node, rw.emit("div", [ar, br]),
                     None if ai is None else rw.emit("div", [ai, br]))
    abs_r, abs_i = rw.emit("abs", [br]), rw.emit("abs", [bi])
    s = rw.emit("maximum", [abs_r, abs_i])
    zero = rw.emit("eq", [s, _scalar(rw, 0.0, s)])
    safe = rw.emit("where", [zero, _scalar(rw, 1.0, s), s])  # a finite gradient where 0
    c, d = rw.emit("div", [br, safe]), rw.emit("div", [bi, safe])
    scale = rw.emit("mul", [rw.emit("add", [rw.emit("mul", [c, c]), rw.emit("mul", [d, d])]),
                            safe])
    re = rw.emit("div", [_or_zero(rw, _add(rw, _mul(rw, ar, c), _mul(rw, ai, d)), s), scale])
    im = rw.emit("div", [_or_zero(rw, _sub(rw, _mul(rw, ai, c), _mul(rw, ar, d)), s), scale])
    at_zero = (rw.emit("div", [_or_zero(rw, part, s), divisor])
               for part, divisor in ((ar, abs_r), (ai, abs_i)))
    return _join(rw, node, *(rw.emit("where", [zero, z, v]) for z, v in zip(at_zero, (re, im))))


@rule("neg", "conj")
def negated_parts(node, rw):
    """-z -> -re - i im;  conj(z) -> re - i im"""
    if not _complex_node(node):
        return None
    re, im = _parts(rw, node.inputs[0], _parts_dtype(node))
    return _join(rw, node, _neg(rw, re) if node.op.name == "neg" else re, _neg(rw, im))


@rule("exp")
def exp_parts(node, rw):
    """exp(z) -> e^re cos(im) + i e^re sin(im)"""
    if not _complex_node(node):
        return None
    re, im = _parts(rw, node.inputs[0], _parts_dtype(node))
    e = rw.emit("exp", [re])
    return _join(rw, node, rw.emit("mul", [e, rw.emit("cos", [im])]),
                 rw.emit("mul", [e, rw.emit("sin", [im])]))


@rule("abs")
def abs_parts(node, rw):
    """|z| -> s sqrt((re/s)^2 + (im/s)^2), s = max(|re|, |im|) (no overflow); 0 where s is 0
    (with gradient 0, as torch's sgn(0)), inf where s is inf"""
    if not _complex_node(node):
        return None
    re, im = _parts(rw, node.inputs[0], _parts_dtype(node))
    s = rw.emit("maximum", [rw.emit("abs", [re]), rw.emit("abs", [im])])
    zero, inf = _scalar(rw, 0.0, s), _scalar(rw, float("inf"), s)
    at_zero = rw.emit("eq", [s, zero])
    safe = rw.emit("where", [at_zero, _scalar(rw, 1.0, s), s])  # no 0/0 in the gradient
    a, b = rw.emit("div", [re, safe]), rw.emit("div", [im, safe])
    sq = rw.emit("add", [rw.emit("mul", [a, a]), rw.emit("mul", [b, b])])
    root = rw.emit("sqrt", [rw.emit("where", [at_zero, _scalar(rw, 1.0, s), sq])])
    r = rw.emit("where", [rw.emit("eq", [s, inf]), inf, rw.emit("mul", [safe, root])])
    return rw.emit("where", [at_zero, zero, r])


@rule("angle")
def angle_parts(node, rw):
    """angle(z) -> atan2(im, re)"""
    re, im = _parts(rw, node.inputs[0], _parts_dtype(node))
    return rw.emit("atan2", [im, re])


@rule("complex")
def complex_parts(node, rw):
    """complex(re, im) -> view_as_complex of the pairs (re, im)"""
    return _join(rw, node, *node.inputs)


@rule("eq", "ne")
def compared_parts(node, rw):
    """a == b -> ar == br and ai == bi;  a != b -> ar != br or ai != bi"""
    if not _complex_node(node):
        return None
    parts = _parts_dtype(node)
    (ar, ai), (br, bi) = (_parts(rw, v, parts) for v in node.inputs)
    op = node.op.name
    both = "logical_and" if op == "eq" else "logical_or"
    return rw.emit(both, [rw.emit(op, [ar, br]),
                          rw.emit(op, [_or_zero(rw, ai, ar), _or_zero(rw, bi, ar)])])


@rule("where")
def selected_parts(node, rw):
    """where(c, a, b) -> where(c, ar, br) + i where(c, ai, bi)"""
    if not _complex_node(node):
        return None
    c, a, b = node.inputs
    (ar, ai), (br, bi) = (_parts(rw, v, _parts_dtype(node)) for v in (a, b))
    im = None if ai is None and bi is None else rw.emit(
        "where", [c, _or_zero(rw, ai, ar), _or_zero(rw, bi, br)])
    return _join(rw, node, rw.emit("where", [c, ar, br]), im)


@rule("cast")
def cast_parts(node, rw):
    """cast(z, complex) -> the parts cast; cast(x, complex) -> x + 0i;
    cast(z, bool) -> re != 0 or im != 0; cast(z, real) -> cast(re) (torch drops im)"""
    if not _complex_node(node):
        return None
    (x,), target = node.inputs, node.attrs["dtype"]
    if target.is_complex:
        if x.type.dtype.is_complex:
            return rw.emit("view_as_complex", [_cast(rw, _pair(rw, x), real_dtype(target))])
        return _join(rw, node, x, None)
    re, im = _parts(rw, x, real_dtype(x.type.dtype))
    if target == bool_:
        return rw.emit("logical_or", [rw.emit("cast", [re], dtype=bool_),
                                      rw.emit("cast", [im], dtype=bool_)])
    return _cast(rw, re, target)
