"""Sources: how a value was reached from the frame's locals, globals and closure.

Owns: the `Source` classes, their readable names (`L['self'].fc.weight`) and the
Python expression that re-reads them in generated guard code.  Must not know:
guard kinds, tracing.  Spec: spec/tracer.md, "Values and sources".

See Note [Names are data]: a generated expression never contains a user string.
Every key or attribute name is bound as a constant of the generated function
(`_k3`) and read with `L[_k3]` or `getattr(v, _k3)`, so a hostile name such as
`"x']; import os; #"` is just a dictionary key.
"""

from __future__ import annotations

import torch


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


class ClosureCellSource(Source):
    """`C.cell[name]`: a closure cell itself of the compiled function (the target of a
    replayed store into it, `cell.cell_contents = v`)."""

    def __init__(self, index: int, var: str):
        self.index, self.var = index, var

    def name(self):
        return f"C.cell[{self.var!r}]"

    def expr(self, cg):
        return f"C[{self.index}]"


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
        if self.where == ATTR:
            return f"getattr({cg.load(self.base_source)}, {cg.const(self.attr)})"
        # The module's dict is loaded once for all its entries (a deep module reads
        # `_modules`/`_parameters` of each submodule several times).
        holder = cg.load(ModuleDictSource(self.base_source, self.where))
        return f"{holder}[{cg.const(self.attr)}]"


class ModuleDictSource(Source):
    """`base._modules` / `._parameters` / `._buffers` of an nn.Module: the dict itself."""

    def __init__(self, base_source: Source, where: str):
        assert where in (MODULE, PARAM, BUFFER)
        self.base_source, self.where = base_source, where

    def base(self):
        return self.base_source

    def name(self):
        return f"{self.base_source.name()}.{self.where}"

    def expr(self, cg):
        # Read through the module's __dict__ (loaded once): a NOT_IN_DICT guard on the same
        # module (no instance `forward`) then costs one `in`, not an attribute lookup.
        return f"{cg.load(DictOfSource(self.base_source))}[{cg.const(self.where)}]"


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


class DictOfSource(Source):
    """`base.__dict__`: an object's instance attributes (NOT_IN_DICT guards read it)."""

    def __init__(self, base_source: Source):
        self.base_source = base_source

    def base(self):
        return self.base_source

    def name(self):
        return f"{self.base_source.name()}.__dict__"

    def expr(self, cg):
        return f"{cg.load(self.base_source)}.__dict__"  # fixed refcomp text, not a user name


class DerivedSource(Source):
    """A fact computed from `base` by a refcomp function: `hasattr(L['self'], 'gain')`,
    `'gelu' in G['ENABLED']`, `len(L['self'].layers)`.  `fn` is bound as a constant and
    `label` is its readable name (`{}` stands for the base's name)."""

    def __init__(self, base_source: Source, fn, label: str):
        self.base_source, self.fn, self.label = base_source, fn, label

    def base(self):
        return self.base_source

    def name(self):
        return self.label.replace("{}", self.base_source.name())

    def expr(self, cg):
        return f"{cg.const(self.fn)}({cg.load(self.base_source)})"



class ModuleSliceSource(DerivedSource):
    """`base[a:b]` of a ModuleList/Sequential: a new container of the same submodules.
    `names` are the selected submodules' names in `base`, so an item of the slice is read
    from `base` itself (`item_source`); re-reading the slice (a guard on the fresh
    container) evaluates `base[a:b]` again."""

    def __init__(self, base_source: Source, key: slice, names: tuple):
        bounds = ["" if v is None else str(v) for v in (key.start, key.stop, key.step)]
        text = ":".join(bounds if key.step is not None else bounds[:2])
        super().__init__(base_source, lambda m, k=key: m[k], f"{{}}[{text}]")
        self.names = tuple(names)

    def item_source(self, index: int) -> Source:
        return AttrSource(self.base_source, self.names[index], MODULE)

class IdentitySource(Source):
    """`a is b` for two sources: the fact behind `x is y` on two tensors the trace read
    (the same tensor under two names -- an argument passed twice, a parameter and a
    weakref to it -- is one object in eager)."""

    def __init__(self, a: Source, b: Source):
        self.a, self.b = a, b

    def base(self):
        return self.a

    def name(self):
        return f"({self.a.name()} is {self.b.name()})"

    def expr(self, cg):
        return f"({cg.load(self.a)} is {cg.load(self.b)})"


class ConstSource(Source):
    """An object refcomp holds itself (a function reached through a class, whose
    `__defaults__` and `__code__` are guarded): read back as a constant."""

    def __init__(self, obj, label: str):
        self.obj, self.label = obj, label

    def name(self):
        return f"<{self.label} at {id(self.obj):#x}>"

    def expr(self, cg):
        return cg.const(self.obj)


_CARRIERS: dict = {}  # n -> its [n, 0] tensor (shared: nothing reads or writes it)


def number_as_size(n):
    """A tensor of shape [n, 0]: no elements, so nothing to read or allocate."""
    t = _CARRIERS.get(n)
    if t is None:
        if len(_CARRIERS) > 4096:
            _CARRIERS.clear()
        t = _CARRIERS[n] = torch.empty((n, 0), dtype=torch.int64)
    return t


class NumberAsSize(DerivedSource):
    """The graph input that binds the size symbol of an int argument (Note [Number
    symbols] in refcomp/tracer/context.py): `number_as_size(L['n'])`, shape [n, 0]."""

    def __init__(self, base_source: Source):
        super().__init__(base_source, number_as_size, "number_as_size({})")


def number_as_tensor(x):
    """A 0-d float64 tensor of a Python float (the guard check makes it per call)."""
    return torch.tensor(x, dtype=torch.float64)


class NumberAsTensor(DerivedSource):
    """The graph input of a dynamic float (Note [Dynamic floats] in
    refcomp/tracer/dynamic_floats.py): `number_as_tensor(G['opt']...['lr'])`, 0-d float64."""

    def __init__(self, base_source: Source):
        super().__init__(base_source, number_as_tensor, "number_as_tensor({})")


def size_text(source: Source, dim) -> str:
    """How a guard or note names a size: `L['x'].size(0)`, or `L['n']` for a number."""
    if isinstance(source, NumberAsSize):
        return source.base_source.name()
    return f"{source.name()}.size({dim})"


class TensorKeySource(Source):
    """`base[key]` of a dict keyed by a tensor (an optimizer's `state[p]`), read with
    `dict.get` so that a guard never runs a defaultdict's `__missing__`."""

    def __init__(self, base_source: Source, key_source: Source):
        self.base_source, self.key_source = base_source, key_source

    def base(self):
        return self.base_source

    def name(self):
        return f"{self.base_source.name()}[{self.key_source.name()}]"

    def expr(self, cg):
        return f"dict.get({cg.load(self.base_source)}, {cg.load(self.key_source)})"
