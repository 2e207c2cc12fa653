"""Kernels that differ only in sizes share one compiled body, with those sizes as arguments.

Owns: `share(kernels)`, which gives each Kernel of a compile the Kernel to compile for
it and the values of the size symbols that body takes in place of its own ints, and
the process-wide table of the bodies made so.  Must not know: LLVM, graphs, torch.
Spec: spec/codegen.md, "Kernels shared across sizes".

Note [Sizes as arguments]
Kernels of one compile equal but for some ints (DenseNet's batch norms, C growing by 32
a layer) become one body whose differing ints are size symbols (Note [Runtime sizes] in
codegen/kernel.py), compiled once and run with each kernel's values; ints that agree stay
literal.  Which ints may become symbols, and why the body with its symbols bound is the
kernel exactly: spec/codegen.md, "Kernels shared across sizes".  A symbol is shared by
every position whose values agree in every kernel of the group, so `numel` and a stride
equal in all of them stay one argument.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import sympy

from codegen.kernel import DivMod, Index, Kernel, Let, Stage, Store

# skeleton (a blanked Kernel) -> [(body Kernel, pattern)]; a pattern holds per position
# an int (literal) or a symbol
_BODIES: dict = {}
_PREFIX = "z"  # the symbols of shared bodies (graph size symbols are s0, s1, ...)


def _open(x) -> bool:
    """Whether the size at this position may become a symbol (See Note [Sizes as arguments])."""
    return isinstance(x, int) and x >= 2


def _map_sizes(k: Kernel, fn: Callable) -> Kernel:
    """`k` with every position that may become a symbol replaced by `fn(value)`, visited
    in one fixed order (buffers, outer, stages in order, statements in order)."""
    def size(x):
        return fn(x) if _open(x) else x

    def index(idx: Index) -> Index:
        terms = tuple((a, c if isinstance(a, DivMod) else size(c)) for a, c in idx.terms)
        return Index(terms, size(idx.const))

    open_ranges = not k.accs and len(k.stages) == 1
    buffers = tuple(replace(b, numel=size(b.numel)) for b in k.buffers)
    outer = tuple((v, size(n)) for v, n in k.outer)
    stages = []
    for st in k.stages:
        ranges = tuple((v, size(n) if open_ranges else n) for v, n in st.ranges)
        body = []
        for s in st.body:
            if isinstance(s, Store):
                s = Store(s.buf, index(s.index), s.value)
            elif isinstance(s, Let) and s.op == "load":
                attrs = tuple((key, index(v) if key == "index" else v) for key, v in s.attrs)
                s = Let(s.name, s.op, s.args, attrs, s.dtype)
            body.append(s)
        stages.append(Stage(ranges, tuple(body)))
    return Kernel(buffers, outer, k.accs, tuple(stages), k.inplace)


class _Blank:
    """An open size in a skeleton: one object, equal only to itself, printed `?`, holding
    no size symbol."""

    is_Symbol = True
    free_symbols = frozenset()

    def __str__(self) -> str:
        return "?"


_BLANK = _Blank()


def _skeleton(k: Kernel) -> tuple[Kernel, tuple]:
    """(the kernel with its open sizes blanked, their values in order).  The blanked
    Kernel is the key (frozen dataclasses: hashed, not printed)."""
    values: list = []

    def blank(x):
        values.append(x)
        return _BLANK
    return _map_sizes(k, blank), tuple(values)


def _body(k: Kernel, pattern: tuple) -> Kernel:
    it = iter(pattern)
    return _map_sizes(k, lambda _x: next(it))


def _match(pattern: tuple, values: tuple):
    """{symbol: value} when `values` fit `pattern` (literals equal, each symbol one value)."""
    binding: dict = {}
    for p, v in zip(pattern, values):
        if isinstance(p, int):
            if p != v:
                return None
        elif binding.setdefault(p, v) != v:
            return None
    return binding


def _unify(rows: list, every: bool = False) -> tuple:
    """The pattern of a group's value rows: literal where all agree (unless `every`), else
    one symbol per distinct column of values."""
    symbols: dict = {}
    pattern = []
    for column in zip(*rows):
        if len(set(column)) == 1 and not every:
            pattern.append(column[0])
        else:
            pattern.append(symbols.setdefault(column, sympy.Symbol(
                f"{_PREFIX}{len(symbols)}", integer=True, positive=True)))
    return tuple(pattern)


def share(kernels: list, every: bool = False) -> list:
    """For each kernel, (the Kernel to compile, {symbol: int} to pass for its extra size
    arguments); a kernel nothing shares with is returned as is with {}.

    `every` (for tests: the fuzzer's `--sizes-as-arguments`) gives every kernel a body
    with all its open sizes as arguments, shared or not, so each program checks that
    such a body computes what its kernel does."""
    out: list = [(k, {}) for k in kernels]
    groups: dict = {}
    for i, k in enumerate(kernels):
        if any(str(p).startswith(_PREFIX) for p in k.params):
            continue  # (never: graph symbols are s0...; kept safe)
        key, values = _skeleton(k)
        groups.setdefault(key, []).append((i, values))
    for key, members in groups.items():
        rest = []
        for i, values in members:
            for body, pattern in _BODIES.get(key, ()):
                binding = _match(pattern, values)
                if binding is not None:
                    out[i] = (body, binding)
                    break
            else:
                rest.append((i, values))
        rows = list(dict.fromkeys(values for _, values in rest))
        if len(rows) < (1 if every else 2) or not rows[0]:
            continue
        pattern = _unify(rows, every)
        body = _body(kernels[rest[0][0]], pattern)
        _BODIES.setdefault(key, []).append((body, pattern))
        for i, values in rest:
            out[i] = (body, _match(pattern, values))
    return out
