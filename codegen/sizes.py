"""Sizes inside Kernels: Python ints, or sympy expressions over the graph's size symbols.

Owns: the arithmetic a Kernel does on sizes (`norm`, `fdiv`, `divides`, `provably_*`),
evaluating a size for concrete symbols (`evaluate`), and the Python source of a size
(`py_source`, used by the runtime's generated call and by the Triton launcher).
Must not know: LLVM, Triton, graphs.  Spec: spec/codegen.md, "Kernel model".

A Kernel is compiled once for every value of its symbols (Note [Runtime sizes] in
codegen/kernel.py), so every decision lowering takes on a size must hold for all of
them: the `provably_*` predicates answer True only when sympy proves the fact for
every positive integer value of the symbols (size symbols are declared
`integer=True, positive=True`, ir.types.size_symbol); "unknown" counts as False,
and the caller then keeps the general form (a `DivMod` atom instead of a folded
index), never a guess.  Static sizes stay Python ints, so static kernels pay no
sympy on their path.
"""

from __future__ import annotations

from typing import Callable, Union

import sympy

Size = Union[int, sympy.Expr]


def norm(x) -> Size:
    """Canonical form: an int when the value is a number, else an expanded sympy Expr."""
    if isinstance(x, int):
        return x
    x = sympy.expand(sympy.sympify(x))
    return int(x) if x.is_Integer else x


def is_static(x) -> bool:
    return isinstance(x, int)


def symbols_of(x) -> set:
    return set() if isinstance(x, int) else set(x.free_symbols)


def fdiv(a: Size, d: Size) -> Size:
    """floor(a / d) for d > 0."""
    if isinstance(a, int) and isinstance(d, int):
        return a // d
    return norm(sympy.floor(sympy.sympify(a) / d))


def divides(d: Size, c: Size) -> bool:
    """Whether c is a multiple of d for every value of the symbols."""
    if isinstance(d, int) and isinstance(c, int):
        return c % d == 0
    q = sympy.cancel(sympy.sympify(c) / d)
    return bool(q.is_integer)


def provably_nonneg(x: Size) -> bool:
    return x >= 0 if isinstance(x, int) else bool(x.is_nonnegative)


def provably_nonpos(x: Size) -> bool:
    return x <= 0 if isinstance(x, int) else bool(x.is_nonpositive)


def provably_lt(a: Size, b: Size) -> bool:
    """a < b for every value of the symbols."""
    diff = norm(b - a) if not (isinstance(a, int) and isinstance(b, int)) else b - a
    return diff > 0 if isinstance(diff, int) else bool(diff.is_positive)


def equal(a: Size, b: Size) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return norm(a - b) == 0


def evaluate(x: Size, values: dict) -> int:
    """The int value of a size for concrete symbols (symbol -> int)."""
    if isinstance(x, int):
        return x
    return int(x.subs(values))


def evaluator(exprs: list, symbols) -> "Callable":
    """`fn(*values) -> tuple of ints`: the sizes `exprs` for values of `symbols` (in that
    order), compiled to Python once (no sympy per call)."""
    names = {p: f"_{p}" for p in symbols}
    body = "".join(py_source(e, lambda p: names[p]) + ", " for e in exprs)
    return eval(f"lambda {', '.join(names.values())}: ({body})")  # noqa: S307


_RELATIONS = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<",
              "LessThan": "<=", "StrictGreaterThan": ">", "GreaterThan": ">="}


def int_function(symbols, expr) -> "Callable":
    """`fn(*values)`: a size expression or a relation between sizes (sympy Eq, Le...) for
    int values of `symbols`, in exact integer arithmetic.  (sympy.lambdify computes
    `floor(s0/3 + 2/3)` in floats, which can be off by one: guards and returned sizes
    must never be.)"""
    names = {p: f"_{p}" for p in symbols}
    e = sympy.sympify(expr)
    op = _RELATIONS.get(type(e).__name__)
    if op is not None:
        body = (f"{py_source(norm(e.lhs), lambda p: names[p])} {op}"
                f" {py_source(norm(e.rhs), lambda p: names[p])}")
    elif e is sympy.true or e is sympy.false:
        body = str(bool(e))
    else:
        body = py_source(norm(e), lambda p: names[p])
    return eval(f"lambda {', '.join(names.values())}: {body}")  # noqa: S307


def py_source(x: Size, name=str) -> str:
    """Python source computing the size from variables named `name(symbol)` (ints only:
    floor divisions become `//`, so no float ever appears)."""
    if isinstance(x, int):
        return str(x)
    return _py(sympy.sympify(x), name)


def _py(e, name) -> str:
    if e.is_Integer:
        return str(int(e))
    if e.is_Symbol:
        return name(e)
    if e.is_Add:
        return "(" + " + ".join(_py(a, name) for a in e.args) + ")"
    if e.is_Mul:
        num, den = sympy.fraction(e)
        if den != 1:
            raise NotImplementedError(f"size {e} is not an integer expression")
        return "(" + " * ".join(_py(a, name) for a in e.args) + ")"
    if e.is_Pow and e.exp.is_Integer and e.exp > 0:
        return "(" + " * ".join([_py(e.base, name)] * int(e.exp)) + ")"
    if isinstance(e, sympy.floor):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        return f"({_py(sympy.expand(num), name)} // {_py(den, name)})"
    if isinstance(e, sympy.ceiling):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        return f"(-((-{_py(sympy.expand(num), name)}) // {_py(den, name)}))"
    if isinstance(e, sympy.Mod):
        return f"({_py(e.args[0], name)} % {_py(e.args[1], name)})"
    if isinstance(e, (sympy.Max, sympy.Min)):
        fn = "max" if isinstance(e, sympy.Max) else "min"
        return f"{fn}({', '.join(_py(a, name) for a in e.args)})"
    raise NotImplementedError(f"size expression {e} ({type(e).__name__}) has no code form")


def decompose(e):
    """The expression tree of a size for emitters that build code node by node:
    ("int", v) | ("sym", symbol) | (op, [children]) with op in add, mul, floordiv,
    mod, max, min.  Raises NotImplementedError for anything else."""
    if isinstance(e, int):
        return ("int", e)
    e = sympy.sympify(e)
    if e.is_Integer:
        return ("int", int(e))
    if e.is_Symbol:
        return ("sym", e)
    if e.is_Add:
        return ("add", [decompose(a) for a in e.args])
    if e.is_Mul:
        num, den = sympy.fraction(e)
        if den != 1:
            raise NotImplementedError(f"size {e} is not an integer expression")
        return ("mul", [decompose(a) for a in e.args])
    if e.is_Pow and e.exp.is_Integer and e.exp > 0:
        return ("mul", [decompose(e.base)] * int(e.exp))
    if isinstance(e, sympy.floor):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        return ("floordiv", [decompose(sympy.expand(num)), decompose(den)])
    if isinstance(e, sympy.Mod):
        return ("mod", [decompose(e.args[0]), decompose(e.args[1])])
    if isinstance(e, (sympy.Max, sympy.Min)):
        return ("max" if isinstance(e, sympy.Max) else "min", [decompose(a) for a in e.args])
    raise NotImplementedError(f"size expression {e} ({type(e).__name__}) has no code form")
