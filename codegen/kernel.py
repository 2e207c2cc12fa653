"""The backend-neutral loop-level Kernel: iteration space, loads/stores, scalar body.

Owns: `Index` (affine index expressions with floor-div/mod atoms), the Kernel data
model (`Buffer`, `Let`, `Store`, `Reduce`, `Stage`, `Acc`, `Kernel`), its one
printed form (`print_kernel`, also the cache key of compiled kernels) and
`collapse` (merging loop dims that every index walks contiguously).  Must not
know: graphs, LLVM, Triton.  The numpy executor is codegen/kernel_numpy.py.
Spec: spec/codegen.md, "Kernel model" (stages, accumulators, sizes as arguments).

    kernel(in0: f32[32], out0: f32[4]) outer [o0 < 4] {
      acc a0: f32 = sum
      stage [r0 < 8] {
        %0 = load in0[8*o0 + r0] : f32
        reduce a0 sum %0
      }
      stage [] {
        %1 = acc a0 : f32
        store out0[o0] = %1
      }
    }
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from codegen import sizes
from codegen.sizes import Size
from ir.types import DType

# --- index expressions -------------------------------------------------------------------


@dataclass(frozen=True)
class DivMod:
    """The index atom `(inner // div) % mod` (`mod` None: no modulus); div and mod are
    positive sizes (ints or size expressions)."""

    inner: "Index"
    div: Size
    mod: Union[Size, None]

    def __str__(self) -> str:
        text = f"({self.inner} // {_size_str(self.div)})" if self.div != 1 else f"({self.inner})"
        return f"({text} % {_size_str(self.mod)})" if self.mod is not None else text


Atom = Union[str, DivMod]


def _atom_key(atom: Atom) -> str:
    return atom if isinstance(atom, str) else "~" + str(atom)


def _size_str(x: Size) -> str:
    """A size in printed kernels: ints as is, expressions in parentheses (unambiguous)."""
    if isinstance(x, int):
        return str(x)
    return str(x) if x.is_Symbol else f"({x})"


def _add(a: Size, b: Size) -> Size:
    return a + b if isinstance(a, int) and isinstance(b, int) else sizes.norm(a + b)


def _mul(a: Size, b: Size) -> Size:
    return a * b if isinstance(a, int) and isinstance(b, int) else sizes.norm(a * b)


@dataclass(frozen=True)
class Index:
    """sum(coeff * atom) + const, atoms being loop variables or DivMod terms.

    Coefficients and the constant are sizes: ints, or expressions over size symbols
    (a stride of a symbolic shape), See Note [Runtime sizes]."""

    terms: tuple = ()  # ((atom, coeff), ...) sorted by atom, no zero coefficients
    const: Size = 0

    @staticmethod
    def var(name: str) -> "Index":
        return Index(((name, 1),), 0)

    @staticmethod
    def of(value: Size) -> "Index":
        return Index((), sizes.norm(value))

    def __add__(self, other: "Index") -> "Index":
        coeffs = dict(self.terms)
        for atom, c in other.terms:
            coeffs[atom] = _add(coeffs.get(atom, 0), c)
        return _make(coeffs, _add(self.const, other.const))

    def scale(self, factor: Size) -> "Index":
        return _make({a: _mul(c, factor) for a, c in self.terms}, _mul(self.const, factor))

    def coeff(self, name: str) -> Size:
        return dict(self.terms).get(name, 0)

    def variables(self) -> set:
        """Loop variables, including those inside DivMod atoms."""
        out = set()
        for atom, _ in self.terms:
            out |= {atom} if isinstance(atom, str) else atom.inner.variables()
        return out

    def bounds(self, ranges: dict):
        """(min, max) over the loop ranges (var -> size), or None when the sign of a
        symbolic coefficient is unknown; DivMod atoms are bounded too."""
        lo = hi = self.const
        for atom, c in self.terms:
            b = _atom_bounds(atom, ranges)
            if b is None:
                return None
            a_lo, a_hi = b
            if sizes.provably_nonneg(c):
                lo, hi = _add(lo, _mul(c, a_lo)), _add(hi, _mul(c, a_hi))
            elif sizes.provably_nonpos(c):
                lo, hi = _add(lo, _mul(c, a_hi)), _add(hi, _mul(c, a_lo))
            else:
                return None
        return lo, hi

    def _split(self, d: Size):
        """(quotient terms, constant, remainder Index): self == d*quotient + remainder."""
        quot = {a: sizes.fdiv(c, d) for a, c in self.terms if sizes.divides(d, c)}
        rest_terms = tuple((a, c) for a, c in self.terms if a not in quot)
        if isinstance(self.const, int) and isinstance(d, int):
            qconst, rconst = self.const // d, self.const % d
        elif sizes.divides(d, self.const):
            qconst, rconst = sizes.fdiv(self.const, d), 0
        else:
            qconst, rconst = 0, self.const
        return quot, qconst, Index(rest_terms, rconst)

    def floordiv(self, d: Size, ranges: dict) -> "Index":
        """self // d, simplified exactly when the remainder part provably stays in [0, d)."""
        if d == 1:
            return self
        quot, qconst, rest = self._split(d)
        b = rest.bounds(ranges)
        if b is not None and sizes.provably_nonneg(b[0]) and sizes.provably_lt(b[1], d):
            return _make(quot, qconst)
        return _make({DivMod(self, d, None): 1}, 0)

    def mod(self, m: Size, ranges: dict) -> "Index":
        """self % m, simplified exactly when the reduced form provably stays in [0, m)."""
        _, _, rest = self._split(m)
        b = rest.bounds(ranges)
        if b is not None and sizes.provably_nonneg(b[0]) and sizes.provably_lt(b[1], m):
            return rest
        return _make({DivMod(rest, 1, m): 1}, 0)

    def substitute(self, mapping: dict) -> "Index":
        """Replace variables by Index expressions (not inside DivMod atoms)."""
        out = Index.of(self.const)
        for atom, c in self.terms:
            if isinstance(atom, str) and atom in mapping:
                out = out + mapping[atom].scale(c)
            else:
                out = out + Index(((atom, c),), 0)
        return out

    def symbols(self) -> set:
        out = sizes.symbols_of(self.const)
        for atom, c in self.terms:
            out |= sizes.symbols_of(c)
            if isinstance(atom, DivMod):
                out |= atom.inner.symbols() | sizes.symbols_of(atom.div)
                out |= sizes.symbols_of(atom.mod) if atom.mod is not None else set()
        return out

    def __str__(self) -> str:
        parts = []
        for atom, c in self.terms:
            parts.append(str(atom) if c == 1 else f"{_size_str(c)}*{atom}")
        if self.const != 0 or not parts:
            parts.append(_size_str(self.const))
        return " + ".join(parts).replace("+ -", "- ")


def _make(coeffs: dict, const: Size) -> Index:
    terms = tuple(sorted(((a, c) for a, c in coeffs.items() if c != 0),
                         key=lambda t: _atom_key(t[0])))
    return Index(terms, const if isinstance(const, int) else sizes.norm(const))


def _atom_bounds(atom: Atom, ranges: dict):
    if isinstance(atom, str):
        n = ranges[atom]
        return 0, (max(n - 1, 0) if isinstance(n, int) else sizes.norm(n - 1))
    if atom.mod is not None:
        return 0, _add(atom.mod, -1)
    b = atom.inner.bounds(ranges)
    if b is None:
        return None
    return sizes.fdiv(b[0], atom.div), sizes.fdiv(b[1], atom.div)


# --- the kernel ----------------------------------------------------------------------------

# Note [Runtime sizes]
# A graph with symbolic sizes is lowered once, with its symbols kept: loop extents,
# buffer element counts, index coefficients (strides), DivMod divisors and `size`
# Lets (a mean's count) are sympy expressions, and the kernel's `params` (its free
# symbols, sorted by name) are arguments of the compiled function: LLVM gets one
# i64 per symbol and computes the expressions in its entry code, Triton gets them
# as int arguments.  So one compiled kernel serves every value of its symbols and
# a new size never compiles anything.  Every simplification lowering makes must
# hold for all values (codegen/sizes.py `provably_*`); where it cannot be proved the
# general form stays.  Static sizes stay ints: a static kernel is exactly what it
# was, with literal strides that LLVM folds.  A symbolic stage whose per-row scratch
# would need a size known at compile time (Note [Row reuse], Note [Streaming stores]
# in codegen/llvm/emit.py) checks the size at run time instead (see there).


@dataclass(frozen=True)
class Buffer:
    name: str
    dtype: DType  # storage dtype
    numel: Size
    is_output: bool


@dataclass(frozen=True)
class Let:
    """`%name = op args {attrs} : dtype`.  op: a vocabulary name, "load", "acc" or "size"
    (the value of a size expression, attribute `value`, converted to `dtype`)."""

    name: str
    op: str
    args: tuple  # temp names
    attrs: tuple  # sorted (key, value) pairs; load: buf, index; acc: acc; const: value
    dtype: DType  # compute dtype of the result

    def attr(self, key: str):
        return dict(self.attrs)[key]


@dataclass(frozen=True)
class Store:
    buf: str
    index: Index
    value: str


@dataclass(frozen=True)
class Reduce:
    acc: str
    value: str


@dataclass(frozen=True)
class Acc:
    name: str
    op: str  # sum prod max min any all
    dtype: DType


REDUCE_OPS = ("sum", "prod", "max", "min", "any", "all")


@dataclass(frozen=True)
class Stage:
    ranges: tuple  # ((var, size), ...), outermost first
    body: tuple  # Let | Store | Reduce


@dataclass(frozen=True)
class Kernel:
    buffers: tuple  # Buffer, inputs first then outputs, in call order
    outer: tuple  # ((var, size), ...): the parallel space
    accs: tuple  # Acc
    stages: tuple  # Stage
    # ((output buffer, input buffer), ...): the output is written over the input's
    # bytes (the runtime passes one pointer for both; see Note [In-place kernels]).
    inplace: tuple = ()

    @property
    def params(self) -> tuple:
        """The size symbols the kernel takes as arguments, sorted by name (See Note
        [Runtime sizes]); () for a static kernel."""
        out = set()
        for b in self.buffers:
            out |= sizes.symbols_of(b.numel)
        for _, n in self.outer:
            out |= sizes.symbols_of(n)
        for st in self.stages:
            for _, n in st.ranges:
                out |= sizes.symbols_of(n)
            for s in st.body:
                if isinstance(s, Store):
                    out |= s.index.symbols()
                elif isinstance(s, Let) and s.op == "load":
                    out |= s.attr("index").symbols()
                elif isinstance(s, Let) and s.op == "size":
                    out |= sizes.symbols_of(s.attr("value"))
        return tuple(sorted(out, key=str))

    @property
    def inputs(self) -> list[Buffer]:
        return [b for b in self.buffers if not b.is_output]

    @property
    def outputs(self) -> list[Buffer]:
        return [b for b in self.buffers if b.is_output]

    def parallel_extent(self) -> Size:
        """The size of the dimension the runtime may split across threads (0: none)."""
        if self.outer:
            return self.outer[0][1]
        if len(self.stages) == 1 and self.stages[0].ranges and not self.accs:
            return self.stages[0].ranges[0][1]
        return 0

    def __str__(self) -> str:
        return print_kernel(self)


def print_kernel(k: Kernel) -> str:
    """The one printed form of a kernel: deterministic, used as its cache key."""
    bufs = ", ".join(f"{b.name}: {b.dtype}[{b.numel}]" for b in k.buffers)
    outer = ", ".join(f"{v} < {n}" for v, n in k.outer)
    inplace = "".join(f" inplace [{o}={i}]" for o, i in k.inplace)
    params = k.params
    head = f" sizes({', '.join(map(str, params))})" if params else ""
    lines = [f"kernel({bufs}){head} outer [{outer}]{inplace} {{"]
    for a in k.accs:
        lines.append(f"  acc {a.name}: {a.dtype} = {a.op}")
    for stage in k.stages:
        ranges = ", ".join(f"{v} < {n}" for v, n in stage.ranges)
        lines.append(f"  stage [{ranges}] {{")
        for s in stage.body:
            lines.append("    " + _stmt_str(s))
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def _stmt_str(s) -> str:
    if isinstance(s, Store):
        return f"store {s.buf}[{s.index}] = %{s.value}"
    if isinstance(s, Reduce):
        return f"reduce {s.acc} %{s.value}"
    attrs = dict(s.attrs)
    if s.op == "load":
        return f"%{s.name} = load {attrs['buf']}[{attrs['index']}] : {s.dtype}"
    if s.op == "acc":
        return f"%{s.name} = acc {attrs['acc']} : {s.dtype}"
    args = ", ".join(f"%{a}" for a in s.args)
    extra = ", ".join(f"{k}={v}" for k, v in s.attrs)
    text = f"%{s.name} = {s.op}"
    if args:
        text += " " + args
    if extra:
        text += " {" + extra + "}"
    return f"{text} : {s.dtype}"


# --- collapse: fewer, longer loops -------------------------------------------------------


def collapse(k: Kernel) -> Kernel:
    """Merge adjacent loop dims that every index walks as one, and drop size-1 dims.

    Dims p, v (v inner, size n) merge when every index has coeff(p) == coeff(v) * n
    and neither appears inside a DivMod atom: then c*n*p + c*v == c*(n*p + v), so
    the merged dim (named p, size n_p * n) takes v's coefficient.  The kernel
    computes the same stores, with longer inner loops to vectorize.
    """
    while True:
        indices = _indices(k)
        in_divmod = set()
        for idx in indices:
            for atom, _ in idx.terms:
                if not isinstance(atom, str):
                    in_divmod |= atom.inner.variables()
        step = _find_step(k, indices, in_divmod)
        if step is None:
            return k
        k = step


def _find_step(k: Kernel, indices, in_divmod):
    groups = [k.outer] + [st.ranges for st in k.stages]
    for g, dims in enumerate(groups):
        for i, (var, size) in enumerate(dims):
            if isinstance(size, int) and size == 1 and var not in in_divmod:
                new = dims[:i] + dims[i + 1:]
                return _rewrite(k, g, new, lambda idx, v=var: _drop(idx, v))
            if i == 0:
                continue
            pvar, psize = dims[i - 1]
            if pvar in in_divmod or var in in_divmod:
                continue
            if all(sizes.equal(idx.coeff(pvar), _mul(idx.coeff(var), size)) for idx in indices):
                new = dims[:i - 1] + ((pvar, _mul(psize, size)),) + dims[i + 1:]
                return _rewrite(k, g, new, lambda idx, p=pvar, v=var: _merge(idx, p, v))
    return None


def _drop(idx: Index, var: str) -> Index:
    return _make({a: c for a, c in idx.terms if a != var}, idx.const)


def _merge(idx: Index, pvar: str, var: str) -> Index:
    coeffs = {a: c for a, c in idx.terms if a not in (pvar, var)}
    coeffs[pvar] = idx.coeff(var)
    return _make(coeffs, idx.const)


def _indices(k: Kernel) -> list[Index]:
    out = []
    for stage in k.stages:
        for s in stage.body:
            if isinstance(s, Store):
                out.append(s.index)
            elif isinstance(s, Let) and s.op == "load":
                out.append(s.attr("index"))
    return out


def _rewrite(k: Kernel, group: int, dims: tuple, fn) -> Kernel:
    """Replace loop group `group` (0: outer, i+1: stage i) by dims; map the indices that
    see that group: every stage's for the outer space, else only that stage's (stages
    reuse variable names, so another stage's `r0` is another loop)."""
    outer = dims if group == 0 else k.outer
    stages = []
    for i, st in enumerate(k.stages):
        if group in (0, i + 1):
            st = Stage(dims if group == i + 1 else st.ranges,
                       tuple(_map_index(s, fn) for s in st.body))
        stages.append(st)
    return Kernel(k.buffers, outer, k.accs, tuple(stages), k.inplace)


def _map_index(s, fn):
    if isinstance(s, Store):
        return Store(s.buf, fn(s.index), s.value)
    if isinstance(s, Let) and s.op == "load":
        attrs = dict(s.attrs)
        attrs["index"] = fn(attrs["index"])
        return Let(s.name, s.op, s.args, tuple(sorted(attrs.items())), s.dtype)
    return s
