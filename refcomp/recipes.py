"""Values crossing a graph break: how each live value is rebuilt after the graph.

Owns: `Recipes` (symbolic value -> recipe, and the check that rebuilt tensors alias
as eager's would), `make` (recipe -> real object, after the graph has run),
`load_source` (a Source read from a segment's L/G/C/B), `OpaqueVar` and `Refused`.
Must not know the tracer's loop or the cache.  Spec: spec/runtime.md, "Generated code at
a break" (Rebuild) and "Frames that run eagerly instead".

Note [Opaque numbers]: a Python number live at a resume point (a running total, a
value read by `.item()`) is first specialized like any constant.  When a later
call misses only because such a number changed, the resume point re-traces with
that name opaque (`OpaqueVar`: its type is guarded, its value is not) and drops the
specialized entries, so a loop does not recompile per value.  The tracer can only
move an opaque value; an instruction that needs it (arithmetic, a jump, a call
argument) fails and becomes a break executed concretely.  Any other failure of a
handler inside a segment is turned into such a break too: running one instruction
concretely is always what eager does.
"""

from __future__ import annotations

import copy
import types

import sympy
import torch

from codegen import sizes as sz
from refcomp.sources import (
    ATTR,
    AttrSource,
    BuiltinSource,
    ClosureCellSource,
    ClosureSource,
    ConstSource,
    DerivedSource,
    DictOfSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    TensorKeySource,
)
from refcomp.tracer.context import CONSTANT_TYPES
from refcomp.tracer.facts import has_symbols
from refcomp.tracer.values import (
    NULL,
    ConstVar,
    ContextTokenVar,
    DictIteratorVar,
    DictVar,
    DictViewVar,
    EnumerateVar,
    ExitVar,
    FunctionVar,
    IteratorVar,
    ListIteratorVar,
    ListVar,
    MethodVar,
    ModelOutputVar,
    ObjectVar,
    OpaqueVar,
    TensorVar,
    TupleVar,
    make_model_output,
    make_tuple,
)

# The NULL slot of a call site (`[NULL, callable, args]`): the generated code pushes it.
REAL_NULL = type("NULL", (), {"__repr__": lambda self: "NULL"})()
GRAD_CONTEXTS = (torch.no_grad, torch.enable_grad)


class Refused(Exception):
    """The state at a break cannot be rebuilt faithfully after the graph."""


_IMMUTABLE = CONSTANT_TYPES + (torch.dtype, torch.device, torch.Size, range, slice, type,
                               type(Ellipsis),
                               types.FunctionType, types.BuiltinFunctionType, types.ModuleType,
                               types.MethodDescriptorType, types.WrapperDescriptorType,
                               types.MethodWrapperType, types.BuiltinMethodType)


def _immutable(value) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable(v) for v in value)
    return isinstance(value, _IMMUTABLE)


class Recipes:
    """How each live symbolic value becomes a real object after the graph has run.

    Recipes: ("out", i) graph output i; ("source", s) re-read from the segment's
    L/G/C/B (inputs, and objects the trace only looked at: identity is kept);
    ("const", v) an immutable constant; ("copy", v) a fresh copy of a list/dict the
    trace built from constants; ("null",); containers and ("iter", items) of recipes;
    ("list_iter", list or dict recipe, steps taken, exhausted, "keys"/"values"/"items"):
    that object's own iterator (of a dict's view); ("dict_view", dict recipe, "keys"/
    "values"/"items"): the dict's view; ("enumerate", iterator recipe, next
    count); ("raising_iter", message): a dict iterator after its dict changed size;
    ("method", self recipe, function or None, name); ("shared", slot, recipe): a mutable
    object built once per rebuild, however many live values hold it (("object", cls,
    [(name, recipe)]): an object made in the frame, made before its attributes, which
    may name it again as ("cycle",)); ("function", code, globals, default recipes,
    keyword-default recipes, cell-content recipes): a function made in the frame; ("size", fn,
    [(tensor source, dim)]): a symbolic size, from this call's input shapes.
    """

    def __init__(self, ctx):
        self.ctx = ctx
        self.tensors: list = []
        self.index: dict = {}
        self.shared: dict = {}  # id(mutable VT) -> slot
        self.building: set = set()  # slots of objects whose attributes are being described
        self.fixed_cells: set = set()  # ids of CellVars never stored into (build_break)

    def of(self, vt):
        if isinstance(vt, ObjectVar):  # Note [Objects made in the frame]
            slot = self.shared.get(id(vt))
            if slot is not None and slot in self.building:
                return ("shared", slot, ("cycle",))  # made (and memoized) before its attributes
            slot = self.shared.setdefault(id(vt), len(self.shared))
            self.building.add(slot)
            try:
                return ("shared", slot, ("object", vt.cls,
                                         [(k, self.of(v)) for k, v in vt.attrs.items()]))
            finally:
                self.building.discard(slot)
        recipe = self._of(vt)
        if recipe[0] in ("copy", "list", "dict", "iter", "list_iter", "raising_iter", "enumerate",
                         "model_output", "context_set", "function"):
            # Mutable: two names for one list must stay one list after the break.
            slot = self.shared.setdefault(id(vt), len(self.shared))
            return ("shared", slot, recipe)
        return recipe

    def _of(self, vt):
        if vt is NULL:
            return ("null",)
        if isinstance(vt, TensorVar):
            src = vt.source
            if src is not None and self.ctx.input_vars.get(src.name()) is vt:
                return ("source", src)  # the caller's tensor (written back if mutated)
            if id(vt) not in self.index:
                self.index[id(vt)] = len(self.tensors)
                self.tensors.append(vt)
            return ("out", self.index[id(vt)])
        if isinstance(vt, (ConstVar, TupleVar, ListVar, DictVar, OpaqueVar)) and \
                vt.source is not None:
            return ("source", vt.source)
        if isinstance(vt, ConstVar) and isinstance(vt.value, sympy.Basic):
            return self._size(vt.value)
        if isinstance(vt, ConstVar) and has_symbols(vt.value):  # slice(s0 - 3, None)
            raise Refused(f"a {type(vt.value).__name__} holding a dynamic size")
        if isinstance(vt, ConstVar):
            if _immutable(vt.value):
                return ("const", vt.value)
            if type(vt.value) in (list, dict, set) and all(
                    _immutable(v) for v in (vt.value.items() if isinstance(vt.value, dict)
                                            else vt.value)):
                return ("copy", vt.value)
            raise Refused(f"a {type(vt.value).__name__} built while tracing")
        if isinstance(vt, TupleVar):
            return ("tuple", [self.of(i) for i in vt.items], vt.cls)
        if isinstance(vt, DictViewVar):  # the dict's own view, as eager's
            return ("dict_view", self.of(vt.seq), vt.kind)
        if isinstance(vt, ListVar):
            return ("list", [self.of(i) for i in vt.items])
        if isinstance(vt, ModelOutputVar):  # Note [Model outputs] (refcomp/tracer/constructors.py)
            return ("model_output", vt.cls, [(k, self.of(v)) for k, v in vt.fields.items()],
                    [(k, self.of(v)) for k, v in vt.items.items()])
        if isinstance(vt, DictVar):
            return ("dict", [(k, self.of(v)) for k, v in vt.items.items()])
        if isinstance(vt, MethodVar):
            fn = vt.fn if isinstance(vt.fn, types.FunctionType) else None
            return ("method", self.of(vt.self_vt), fn, vt.name)
        if isinstance(vt, ListIteratorVar):  # the same list, advanced as far
            return ("list_iter", self.of(vt.seq), vt.pos, vt.exhausted, "keys")
        if isinstance(vt, DictIteratorVar):
            if vt.size_changed():  # the resumed loop's next step raises, as eager's does
                return ("raising_iter", vt.SIZE_CHANGED)
            if vt.keys_changed():
                raise Refused("a dict iterator whose dict's keys changed")
            return ("list_iter", self.of(vt.seq), vt.pos, False, vt.kind)
        if isinstance(vt, EnumerateVar):
            return ("enumerate", self.of(vt.inner), vt.count)
        if isinstance(vt, IteratorVar):
            return ("iter", [self.of(i) for i in vt.remaining()])
        if isinstance(vt, ContextTokenVar):
            # Note [Context variables] (refcomp/tracer/methods.py): a token live at the break
            # is made by the set itself, run when the state is rebuilt (before the replayed
            # effects: none of those reads a context variable), so its recorded set leaves
            # the effects.
            if vt.reset or not any(e is vt.effect for e in self.ctx.effects):
                raise Refused("a ContextVar token whose set is not pending")
            self.ctx.effects[:] = [e for e in self.ctx.effects if e is not vt.effect]
            return ("context_set", self.of(vt.var), self.of(vt.value))
        if isinstance(vt, FunctionVar) and all(id(c) in self.fixed_cells
                                               for c in vt.closure):
            # a function made in the frame (`t.register_hook(lambda g: g * self.scale)`
            # around a break): made again from its code, globals, defaults and closure.
            # Its cells are new ones, so only cells no code of the frame stores into
            # (`fixed_cells`: an argument's) may be closed over: the resumed code's own
            # copy of the cell then always holds the same object
            return ("function", vt.code, vt.f_globals, [self.of(d) for d in vt.defaults],
                    [(k, self.of(v)) for k, v in vt.kwdefaults.items()],
                    [self.of(c.contents) for c in vt.closure])
        if isinstance(vt, ExitVar):  # inside `with torch.no_grad():`
            return ("exit", vt.previous)
        raise Refused(f"{vt!r} cannot cross a graph break")

    def _size(self, expr):
        """A symbolic size (dynamic=True): recomputed from the inputs' shapes after the graph."""
        if not expr.free_symbols:
            if expr.is_Integer:
                return ("const", int(expr))
            raise Refused(f"the size {expr} is not an integer")
        symbols = sorted(expr.free_symbols, key=str)
        where = [self.ctx.sym_sources[s][0] for s in symbols]  # (tensor source, dim)
        return ("size", sz.int_function(symbols, expr), where)

    def check_aliasing(self):
        """Graph outputs are fresh tensors: views of inputs or of each other would not be."""
        from refcomp.runtime import _Outputs

        seen: dict = {}  # alias -> the live tensors of that storage
        views = _Outputs(self.ctx)
        for vt in self.tensors:
            if vt.alias in self.ctx.input_aliases:
                # A view the entry rebuilds from its input (Note [Returned views]) aliases
                # as eager's does: `x.view(-1, n)` live across a break (every transformers
                # model reshapes its input_ids before it breaks).
                if views.view_spec(vt) is None:
                    raise Refused("a view of an input tensor is live at the break")
                continue
            seen.setdefault(vt.alias, []).append(vt)
        for group in seen.values():
            if len(group) > 1 and not _views_of_one_base(group, views):
                raise Refused("two live tensors share storage at the break")


def _views_of_one_base(group, views) -> bool:
    """Do the live tensors `group` (one storage, no input's) keep eager's aliasing after
    the graph?  Yes when all but their base are views of it that the entry rebuilds on
    the base's output (Note [Views of outputs]): the base is a graph output then (a
    hidden one when it is not live), and each view is its view ops replayed on it."""
    bases = {id(vt.view_base[0]) for vt in group if views.output_view_spec(vt) is not None}
    plain = [vt for vt in group if views.output_view_spec(vt) is None]
    return len(bases) == 1 and (not plain or (len(plain) == 1 and id(plain[0]) in bases))


def load_source(src, L, G, C, B):
    """The object a source names, read from a segment's L/G/C/B (as the guards read it)."""
    if isinstance(src, LocalSource):
        return L[src.local]
    if isinstance(src, GlobalSource):
        return G[src.glob]
    if isinstance(src, BuiltinSource):
        return B[src.builtin]
    if isinstance(src, ClosureSource):
        return C[src.index].cell_contents
    if isinstance(src, ClosureCellSource):
        return C[src.index]
    if isinstance(src, AttrSource):
        base = load_source(src.base_source, L, G, C, B)
        if src.where == ATTR:
            return getattr(base, src.attr)
        return getattr(base, src.where)[src.attr]
    if isinstance(src, ItemSource):
        return load_source(src.base_source, L, G, C, B)[src.key]
    if isinstance(src, DerivedSource):  # (a function's default read through its class)
        return src.fn(load_source(src.base_source, L, G, C, B))
    if isinstance(src, ConstSource):
        return src.obj
    if isinstance(src, DictOfSource):
        return load_source(src.base_source, L, G, C, B).__dict__
    if isinstance(src, TensorKeySource):  # an optimizer's state[p]
        return dict.get(load_source(src.base_source, L, G, C, B),
                        load_source(src.key_source, L, G, C, B))
    if hasattr(src, "globals"):  # an inlined function's module globals
        return src.globals
    raise TypeError(f"cannot read source {src!r}")


class GradExit:
    """The `__exit__` of a traced `with torch.no_grad():` block: restores `previous`."""

    def __init__(self, previous: bool):
        self.previous = previous

    def __call__(self, *exc_info):
        torch.set_grad_enabled(self.previous)


def make(r, outs, L, G, C, B, memo):
    kind = r[0]
    if kind == "shared":  # one object however many live values hold it
        if r[1] not in memo:
            if r[2][0] == "object":  # Note [Objects made in the frame]: no __init__ again
                obj = memo[r[1]] = object.__new__(r[2][1])
                for name, value in r[2][2]:
                    object.__setattr__(obj, name, make(value, outs, L, G, C, B, memo))
                return obj
            memo[r[1]] = make(r[2], outs, L, G, C, B, memo)
        return memo[r[1]]
    if kind == "out":
        return outs[r[1]]
    if kind == "source":
        return load_source(r[1], L, G, C, B)
    if kind == "const":
        return r[1]
    if kind == "size":
        return int(r[1](*(load_source(s, L, G, C, B).shape[d] for s, d in r[2])))
    if kind == "copy":
        return copy.deepcopy(r[1])
    if kind == "exit":
        return GradExit(r[1])
    if kind == "null":
        return REAL_NULL
    if kind == "tuple":
        items = tuple(make(i, outs, L, G, C, B, memo) for i in r[1])
        return make_tuple(r[2], items)  # torch.return_types.*, namedtuples
    if kind == "list":
        return [make(i, outs, L, G, C, B, memo) for i in r[1]]
    if kind == "dict":
        return {k: make(v, outs, L, G, C, B, memo) for k, v in r[1]}
    if kind == "context_set":
        return make(r[1], outs, L, G, C, B, memo).set(make(r[2], outs, L, G, C, B, memo))
    if kind == "model_output":
        return make_model_output(r[1], {k: make(v, outs, L, G, C, B, memo) for k, v in r[2]},
                                 {k: make(v, outs, L, G, C, B, memo) for k, v in r[3]})
    if kind == "iter":
        return iter([make(i, outs, L, G, C, B, memo) for i in r[1]])
    if kind == "list_iter":  # a list's or dict's (or its view's) iterator, `pos` steps in
        seq = () if r[3] else make(r[1], outs, L, G, C, B, memo)
        it = iter(getattr(seq, r[4])() if r[4] != "keys" else seq)
        for _ in range(r[2]):
            next(it)
        return it
    if kind == "dict_view":
        return getattr(make(r[1], outs, L, G, C, B, memo), r[2])()
    if kind == "enumerate":
        return enumerate(make(r[1], outs, L, G, C, B, memo), r[2])
    if kind == "raising_iter":
        return _RaisingIterator(r[1])
    if kind == "function":
        fn = types.FunctionType(r[1], r[2], r[1].co_name,
                                tuple(make(d, outs, L, G, C, B, memo) for d in r[3]) or None,
                                tuple(types.CellType(make(c, outs, L, G, C, B, memo))
                                      for c in r[5]) or None)
        fn.__qualname__ = r[1].co_qualname
        fn.__kwdefaults__ = {k: make(v, outs, L, G, C, B, memo) for k, v in r[4]} or None
        return fn
    obj = make(r[1], outs, L, G, C, B, memo)  # "method"
    return types.MethodType(r[2], obj) if r[2] is not None else getattr(obj, r[3])


class _RaisingIterator:
    """A dict iterator after its dict changed size: every step raises CPython's error."""

    def __init__(self, message: str):
        self.message = message

    def __iter__(self):
        return self

    def __next__(self):
        raise RuntimeError(self.message)


# --- replayed side effects (Note [Replayed side effects], refcomp/tracer/effects.py) ---------
def effect_recipes(effects, target_of, value_of) -> list:
    """The recipes of recorded effects: targets by `target_of`, values by `value_of`."""
    out = []
    for kind, target, name, args, kwargs, what in effects:
        if kind == "setglobal":
            tr = ("globals", target)  # None: the frame's own globals
        else:
            tr = target_of(target)
        out.append((kind, tr, name, [value_of(a) for a in args],
                    {k: value_of(v) for k, v in kwargs.items()}, what))
    return out


def replay(effects, resolve, G) -> None:
    """Run the effects, in program order, after the graph (`resolve`: recipe -> object).

    Every target and value is resolved before the first effect runs: a recipe names a
    value as the trace saw it at the effect's place in the program, and a "source"
    recipe means the object as it was when the frame started (a read after a traced
    mutation is of the symbolic value, never a source).  Resolving one effect's values
    after an earlier one ran would read the changed state: `kwargs["new"] =
    kwargs.pop("old")` replays a pop, then a setitem whose value is `kwargs["old"]`
    (transformers 5.24's deprecate_kwarg: KeyError).
    """
    resolved = []
    for kind, tr, name, args, kwargs, _ in effects:
        if kind == "setglobal":
            where = G if tr[1] is None else load_source(tr[1], None, G, None, None)
            resolved.append((kind, where, name, [resolve(args[0])], {}))
        else:
            resolved.append((kind, resolve(tr), name, [resolve(a) for a in args],
                             {k: resolve(v) for k, v in kwargs.items()}))
    for kind, target, name, values, kwargs in resolved:
        if kind == "setglobal":
            target[name] = values[0]
        elif kind == "method":
            getattr(target, name)(*values, **kwargs)
        elif kind == "call":
            target(*values, **kwargs)
        elif kind == "setattr":
            setattr(target, name, values[0])
        elif kind == "object_setattr":  # object's own store: no __setattr__ override runs
            object.__setattr__(target, name, values[0])
        elif kind == "setitem":
            target[values[0]] = values[1]
        else:  # "delitem"
            del target[values[0]]
