"""Sources: how a value was reached from the frame's locals, globals and closure.

Owns: the `Source` classes, their readable names (`L['self'].fc.weight`) and the
Python expression that re-reads them in generated guard code.  Must not know:
guard kinds, tracing.  Spec: spec/guards.md, "Sources".

See Note [Names are data]: a generated expression never contains a user string.
Every key or attribute name is bound as a constant of the generated function
(`_k3`) and read with `L[_k3]` or `getattr(v, _k3)`, so a hostile name such as
`"x']; import os; #"` is just a dictionary key.
"""

from __future__ import annotations


class Source:
    """A path from a frame root to a value.  Immutable; compared by `name()`."""

    def name(self) -> str:
        raise NotImplementedError

    def expr(self, cg) -> str:
        """Python expression re-reading the value; `cg.const(obj)` binds a constant."""
        raise NotImplementedError

    def base(self):
        return None

    def __eq__(self, other):
        return isinstance(other, Source) and self.name() == other.name()

    def __hash__(self):
        return hash(self.name())

    def __repr__(self):
        return self.name()


class LocalSource(Source):
    """`L[name]`: an argument of the compiled frame."""

    def __init__(self, local: str):
        self.local = local

    def name(self):
        return f"L[{self.local!r}]"

    def expr(self, cg):
        return f"L[{cg.const(self.local)}]"


class GlobalSource(Source):
    """`G[name]`: a global of the compiled function's module."""

    def __init__(self, glob: str):
        self.glob = glob

    def name(self):
        return f"G[{self.glob!r}]"

    def expr(self, cg):
        return f"G[{cg.const(self.glob)}]"


class BuiltinSource(Source):
    """`B[name]`: a builtin (read through the function's `__builtins__`)."""

    def __init__(self, builtin: str):
        self.builtin = builtin

    def name(self):
        return f"B[{self.builtin!r}]"

    def expr(self, cg):
        return f"B[{cg.const(self.builtin)}]"


class ClosureSource(Source):
    """`C[name]`: the contents of a closure cell of the compiled function."""

    def __init__(self, index: int, var: str):
        self.index, self.var = index, var

    def name(self):
        return f"C[{self.var!r}]"

    def expr(self, cg):
        return f"C[{self.index}].cell_contents"


# Where an attribute of an nn.Module lives; reading the dict directly skips
# Module.__getattr__, which is the slow part of a guard on a deep module.
ATTR, MODULE, PARAM, BUFFER = "attr", "_modules", "_parameters", "_buffers"


class AttrSource(Source):
    """`base.attr`; `where` says which nn.Module dict holds it (or plain attribute)."""

    def __init__(self, base_source: Source, attr: str, where: str = ATTR):
        self.base_source, self.attr, self.where = base_source, attr, where

    def base(self):
        return self.base_source

    def name(self):
        if self.attr.isidentifier():
            return f"{self.base_source.name()}.{self.attr}"
        return f"getattr({self.base_source.name()}, {self.attr!r})"

    def expr(self, cg):
        base = cg.load(self.base_source)
        if self.where == ATTR:
            return f"getattr({base}, {cg.const(self.attr)})"
        return f"{base}.{self.where}[{cg.const(self.attr)}]"


class ItemSource(Source):
    """`base[key]` for a list, tuple or dict element (key: int or str or other constant)."""

    def __init__(self, base_source: Source, key):
        self.base_source, self.key = base_source, key

    def base(self):
        return self.base_source

    def name(self):
        return f"{self.base_source.name()}[{self.key!r}]"

    def expr(self, cg):
        return f"{cg.load(self.base_source)}[{cg.const(self.key)}]"
