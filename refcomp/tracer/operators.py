"""Python operators on traced values: arithmetic, comparison, identity and truth.

Owns: `binary`/`inplace_binary`/`unary` (a tensor operand goes to the torch table, a
dunder override is traced through the translator), `is_same`, `truth`, constant folding
(`fold`).  Spec: spec/tracer.md, "Python features".
"""

from __future__ import annotations

import operator

import sympy
import torch

from refcomp import guards as G
from refcomp.reasons import (
    INEXPRESSIBLE_OP,
    TENSOR_CONTROL_FLOW,
    TRACE_EXCEPTION,
    Unsupported,
)
from refcomp.sources import (
    IdentitySource,
)
from refcomp.tracer import (
    dynamic_floats,
    effects,
    objects,
    opaque,
    torch_table,
)
from refcomp.tracer.containers import iterate
from refcomp.tracer.context import CONSTANT_TYPES
from refcomp.tracer.facts import (
    concrete,
    concrete_vt,
    nested_symbols,
    require_const,
    size_or_tuple,
)
from refcomp.tracer.values import (
    VT,
    ConstVar,
    DictVar,
    ListVar,
    ObjectVar,
    TensorVar,
    TupleVar,
    as_python,
    sequence_of,
)

_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
           "@": operator.matmul, "&": operator.and_, "|": operator.or_, "^": operator.xor,
           "<<": operator.lshift, ">>": operator.rshift, "<": operator.lt,
           "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
           ">=": operator.ge}
OPERATOR_SYMBOL = {fn: sym for sym, fn in _BINARY.items()}
_INPLACE_METHOD = {"+": "add_", "-": "sub_", "*": "mul_", "/": "div_", "//": "floor_divide_",
                   "%": "remainder_", "**": "pow_", "&": "bitwise_and_", "|": "bitwise_or_",
                   "^": "bitwise_xor_"}
_UNARY = {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert}


# --- operators ------------------------------------------------------------------------------
# Operators on complex tensors whose table entry has no complex rule: the torch function
# an opaque node calls (tensor first; a reflected form swaps where the operator commutes).
_COMPLEX_BINARY = {"+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.div,
                   "**": torch.pow, "@": torch.matmul, "==": torch.eq, "!=": torch.ne}
_COMMUTES = frozenset("+ * == !=".split())


def _complex_operand(*vts) -> bool:
    return any(isinstance(v, TensorVar) and v.meta.is_complex() for v in vts)


def binary(tx, sym: str, a: VT, b: VT) -> VT:
    if _complex_operand(a, b) and sym in _COMPLEX_BINARY and \
            not torch_table.TABLE[_BINARY[sym]].complex:
        if not isinstance(a, TensorVar) and sym in _COMMUTES:
            a, b = b, a
        if isinstance(a, TensorVar):
            return opaque.call_opaque(tx.ctx, _COMPLEX_BINARY[sym], [a, b], {})
    if isinstance(a, TensorVar) or isinstance(b, TensorVar):
        return torch_table.call_torch(tx.ctx, _BINARY[sym], [a, b], {})
    if dynamic_floats.is_dynamic(a) or dynamic_floats.is_dynamic(b):
        return dynamic_floats.binary(tx, sym, a, b)
    if is_symbolic_value(a) or is_symbolic_value(b):
        return _symbolic_binary(tx, sym, a.value, b.value)
    if isinstance(a, (TupleVar, ListVar)) or isinstance(b, (TupleVar, ListVar)):
        return _sequence_op(tx, sym, sequence_of(a) or a, sequence_of(b) or b)
    if isinstance(a, ConstVar) and isinstance(b, ConstVar):
        if sym in ("==", "!="):
            guard_compared(tx.ctx, a, b, equality=True)
        return fold(_BINARY[sym], a.value, b.value, ctx=tx.ctx)
    if sym in ("==", "!=") and all(isinstance(v, (TupleVar, ListVar, ConstVar)) for v in (a, b)):
        return fold(_BINARY[sym], as_python(a), as_python(b), ctx=tx.ctx)
    raise Unsupported(INEXPRESSIBLE_OP, f"operator {sym} on {a!r}, {b!r}")


def is_symbolic_value(v: VT) -> bool:
    return isinstance(v, ConstVar) and isinstance(v.value, sympy.Basic) and bool(
        v.value.free_symbols)


def _symbolic_binary(tx, sym, a, b) -> ConstVar:
    """Arithmetic on dynamic sizes stays symbolic; `==`/`!=` become sympy relations (Python
    `==` on sympy is structural); `/` and the rest specialize to the traced sizes."""
    if sym in ("+", "-", "*", "//", "%") and all(isinstance(v, (int, sympy.Basic))
                                                 and not isinstance(v, bool) for v in (a, b)):
        return fold(_BINARY[sym], a, b)
    if sym in ("==", "!=", "<", "<=", ">", ">=") and all(
            isinstance(v, (int, float, sympy.Basic)) for v in (a, b)):
        rel = {"==": sympy.Eq, "!=": sympy.Ne, "<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt,
               ">=": sympy.Ge}[sym](a, b)
        return ConstVar(tx.ctx.decide(rel) if isinstance(rel, sympy.Basic) and
                        rel.free_symbols else bool(rel))
    ctx = tx.ctx
    a = ctx.specialize(a) if isinstance(a, sympy.Basic) else a
    b = ctx.specialize(b) if isinstance(b, sympy.Basic) else b
    return fold(_BINARY[sym], a, b)


def _sequence_op(tx, sym, a, b):
    if sym == "+" and type(a) is type(b):
        if isinstance(a, TupleVar):
            return TupleVar(a.items + b.items, cls=size_or_tuple(a, b))
        return ListVar(a.items + b.items)
    if sym == "*":
        seq, n = (a, b) if isinstance(a, (TupleVar, ListVar)) else (b, a)
        if isinstance(n, ConstVar) and isinstance(n.value, int):
            if isinstance(seq, TupleVar):
                return TupleVar(seq.items * n.value, cls=size_or_tuple(seq))
            return ListVar(seq.items * n.value)
    if sym in ("==", "!="):
        return fold(_BINARY[sym], as_python(a), as_python(b), ctx=tx.ctx)
    raise Unsupported(INEXPRESSIBLE_OP, f"operator {sym} on {a!r}, {b!r}")


def inplace_binary(tx, sym: str, a: VT, b: VT) -> VT:
    if isinstance(a, TensorVar):
        # `x += y` on a tensor is the in-place method: the caller's tensor changes.
        return torch_table.call_torch(tx.ctx, getattr(torch.Tensor, _INPLACE_METHOD[sym]),
                                      [a, b], {})
    if isinstance(a, ListVar) and sym == "+":
        items = iterate(tx, b)
        if a.source is not None:  # Note [Replayed side effects]
            effects.record(tx, "method", a, "extend", [ListVar(items)],
                           what=f"{a.source.name()} += ...")
        a.items.extend(items)
        return a
    return binary(tx, sym, a, b)


def unary(tx, name: str, a: VT) -> VT:
    if isinstance(a, TensorVar):
        return torch_table.call_torch(tx.ctx, _UNARY[name], [a], {})
    if dynamic_floats.is_dynamic(a):
        return dynamic_floats.unary(tx, name, a)
    return fold(_UNARY[name], as_python(require_const(tx, a, "operand")), ctx=tx.ctx)


_SYMBOLIC_ARITHMETIC = (operator.add, operator.sub, operator.mul, operator.floordiv,
                        operator.mod, operator.neg, operator.pos)


def fold(fn, *args, ctx=None, **kwargs) -> ConstVar:
    """fn(*args, **kwargs) on traced Python values; `ctx` (the trace's context) lets sizes
    inside containers be specialised (Note [Sizes inside folded values])."""
    if any(isinstance(a, sympy.Basic) and a.free_symbols for a in args) and \
            fn not in _SYMBOLIC_ARITHMETIC:
        raise Unsupported(INEXPRESSIBLE_OP, f"{getattr(fn, '__name__', fn)} of a dynamic size")
    if nested_symbols(fn, args, kwargs):
        if ctx is None:
            raise Unsupported(INEXPRESSIBLE_OP,
                              f"{getattr(fn, '__name__', fn)} of dynamic sizes")
        args = [concrete(ctx, a) for a in args]
        kwargs = {k: concrete(ctx, v) for k, v in kwargs.items()}
    try:
        return ConstVar(fn(*args, **kwargs))
    except Exception as e:
        raise Unsupported(TRACE_EXCEPTION, f"{getattr(fn, '__name__', fn)}: {e}") from None


def is_same(a: VT, b: VT, ctx=None) -> bool:
    if dynamic_floats.is_dynamic(a) or dynamic_floats.is_dynamic(b):
        return dynamic_floats.is_same(a, b)
    if isinstance(a, ConstVar) and isinstance(b, ConstVar):
        if ctx is not None:
            guard_compared(ctx, a, b, equality=False)
            a, b = concrete_vt(ctx, a), concrete_vt(ctx, b)  # `n is 4` of a size n
        return a.value is b.value
    if isinstance(a, ConstVar) or isinstance(b, ConstVar):
        return False  # a symbolic value is never a given real object (None, a module...)
    if a is not b and isinstance(a, TensorVar) and isinstance(b, TensorVar) and \
            ctx is not None and a.source is not None and b.source is not None and \
            a.source.name() in ctx.examples and b.source.name() in ctx.examples and \
            ctx.input_vars.get(a.source.name()) is a and ctx.input_vars.get(b.source.name()) is b:
        # Two graph inputs still holding what was read: one real object under two names
        # or two objects (regression: `x is y` was False for f(t, t)).  Guarded.
        same = ctx.examples[a.source.name()] is ctx.examples[b.source.name()]
        ctx.add_guard(G.EQUALS_MATCH, IdentitySource(a.source, b.source), same)
        return same
    return a is b


def guard_compared(ctx, a: ConstVar, b: ConstVar, equality: bool) -> None:
    """Two objects compared by `is` (or `==`): the result depends on which objects they
    are, unless one is a constant (None, a number...), whose comparison with an object
    of a guarded type is decided by the type — except through a user `__eq__`."""
    objects = [v for v in (a, b) if not isinstance(v.value, CONSTANT_TYPES)]
    if len(objects) == 2:
        ctx.guard_identity(a)
        ctx.guard_identity(b)
    elif equality:
        for v in objects:
            if type(v.value).__eq__ is not object.__eq__:
                ctx.guard_identity(v)


def truth(tx, v: VT) -> bool:
    if isinstance(v, TensorVar):
        raise Unsupported(TENSOR_CONTROL_FLOW, "the truth value of a tensor")
    if isinstance(v, (TupleVar, ListVar, DictVar)):
        return bool(v.items)
    if is_symbolic_value(v):
        return tx.ctx.decide(sympy.Ne(v.value, 0))
    if isinstance(v, ObjectVar):  # __bool__, else __len__, else true
        answer = objects.truth(tx, v)
        return True if answer is None else truth(tx, answer)
    if isinstance(v, ConstVar):
        value = v.value
        if v.source is not None and not isinstance(value, CONSTANT_TYPES) and (
                hasattr(type(value), "__bool__") or hasattr(type(value), "__len__")):
            if isinstance(value, (torch.nn.ModuleList, torch.nn.Sequential,
                                  torch.nn.ModuleDict)):
                tx.ctx.guard_module_keys(v)
            else:
                tx.ctx.guard_fact(v.source, bool, "bool({})", bool(value))
        return bool(value)
    return True


def key_of(tx, v: VT):
    """A dict key: a dynamic size in it is specialised (Note [Sizes inside folded values])."""
    return plain(tx, v)


def plain(tx, v: VT):
    """as_python(v) with each dynamic size in it its traced value, guarded: for Python's
    own equality and hashing (`in`, dict keys, list.count)."""
    return as_python(concrete_vt(tx.ctx, v))
