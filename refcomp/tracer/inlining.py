"""Calling Python functions by tracing their bytecode in a child translator.

Owns: which functions may be inlined (`INLINE_SKIP`), their defaults and closure cells
(guarded where read), the globals of another module (`GlobalsDict`), and generator
expressions.  Spec: spec/tracer.md, "Inlining".
"""

from __future__ import annotations

import inspect
import types

from refcomp.reasons import (
    TRACE_EXCEPTION,
    UNSUPPORTED_CALL,
    Unsupported,
)
from refcomp.sources import (
    AttrSource,
    ConstSource,
    ItemSource,
    Source,
)
from refcomp.tracer.context import CONSTANT_TYPES
from refcomp.tracer.facts import has_symbols, is_constant, is_torch_function, public_name
from refcomp.tracer.values import (
    VT,
    ConstVar,
    DictVar,
    FunctionVar,
    GeneratorVar,
    PartialVar,
    TupleVar,
    as_python,
)


def unpack_partial(tx, fn: ConstVar) -> PartialVar:
    """A real functools.partial as a PartialVar: its func, args and keywords are read
    from their sources (guarded like any argument), so another partial recompiles."""
    value, src = fn.value, fn.source
    if src is None:
        return PartialVar(tx.ctx.wrap(value.func, None),
                          [tx.ctx.wrap(a, None) for a in value.args],
                          {k: tx.ctx.wrap(v, None) for k, v in value.keywords.items()})
    func = tx.ctx.wrap(value.func, AttrSource(src, "func"))
    args = tx.ctx.wrap(value.args, AttrSource(src, "args"))
    keywords = tx.ctx.wrap(value.keywords, AttrSource(src, "keywords"))
    if not isinstance(args, TupleVar) or not isinstance(keywords, DictVar):
        raise Unsupported(UNSUPPORTED_CALL, f"call of {value!r}")
    return PartialVar(func, args.items, keywords.items)


# --- inlining library Python (spec/tracer.md, "Inlining") -----------------------------------
# Python functions of these modules are not traced through: they change dispatch or
# global state, or exist to observe the program.  A call to one is a graph break.
INLINE_SKIP = ("torch._dynamo", "torch.compiler", "torch.fx", "torch.jit._script",
               "torch.jit._trace", "torch.autograd", "torch.utils.checkpoint",
               "torch.utils.hooks", "torch.utils._python_dispatch", "torch.overrides",
               "torch.distributed", "torch.cuda", "torch.random", "torch.serialization",
               "torch._ops", "torch._C", "logging", "warnings")


def check_inlinable(fn) -> None:
    module = getattr(fn, "__module__", None) or ""
    for prefix in INLINE_SKIP:
        if module == prefix or module.startswith(prefix + "."):
            raise Unsupported(UNSUPPORTED_CALL, f"{public_name(fn)} is on the inline skip list"
                                       f" ({prefix})")


def unwrapped(fn):
    """torch's own wrappers that only convert exceptions (a try block the tracer does not
    enter) are traced as the function they wrap: while tracing nothing raises."""
    inner = getattr(fn, "__wrapped__", None)
    if getattr(fn, "_wrapped_by_lr_sched", False):  # binds the optimizer itself: traced
        return fn
    if isinstance(inner, types.FunctionType) and is_torch_function(fn) and \
            fn.__code__.co_name in ("wrapped", "wrapper", "_fn"):
        return inner
    return fn


def tx_root(tx):
    while tx.parent is not None:
        tx = tx.parent
    return tx


class GlobalsDict(Source):
    """The globals dict of an inlined function from another module (held as a constant)."""

    def __init__(self, fn):
        # Named by the module whose dict it is, not fn.__module__: functools.wraps copies
        # the wrapped function's __module__ onto a wrapper whose globals are another
        # module's (transformers' capture_outputs), and guards load sources by name, so
        # two dicts under one name read the wrong one (every guard failed right after
        # tracing).  A dict that is no module's own is told apart by its id.
        import sys

        self.globals = fn.__globals__
        name = self.globals.get("__name__", fn.__module__)
        module = sys.modules.get(name) if isinstance(name, str) else None
        self.module = name if module is not None and vars(module) is self.globals else \
            f"{name}@{id(self.globals):#x}"

    def name(self):
        # `M[...]`, not `G[...]`: `G['torch']` is the compiled frame's global `torch` (the
        # module object), and a check that loaded torch's globals dict under that name
        # subscripted the module and raised: every frame that read `torch` and inlined a
        # function of torch/__init__.py (F.pad's non-constant modes call
        # torch.are_deterministic_algorithms_enabled) failed its guards right after
        # tracing and ran eagerly (tests/frontend/test_globals_sources.py).
        return f"M[{self.module!r}]"

    def expr(self, cg):
        return cg.const(self.globals)


# Note [lru_cache wrappers]: a call of a `functools.lru_cache` wrapper of a Python
# function traces the function it wraps, the cache skipped, as Dynamo does
# (transformers' `is_torch_distributed_available()` inside Wav2Vec2's forward broke the
# graph).  One whose trace records a side effect (Note [Replayed side effects]) breaks:
# the cache decides whether the body runs, so replaying its effects at every call would
# be wrong on a hit (`calls.append(n)` ran again for a size the cache had seen).  A
# function marked `_dynamo_marked_constant` (torch._dynamo.
# assume_constant_result; transformers' `_make_compile_constant` marks its install probes
# under their lru_cache) is called while tracing, through its cache when it has one, and
# its result is a constant, unguarded, as under Dynamo: the marker promises the answer
# never changes.  Its arguments must be constants and its result a constant (else RB004).
def assumed_constant(value, args, kwargs) -> VT:
    name = getattr(value, "__qualname__", repr(value))
    values = list(args) + list(kwargs.values())
    if not all(is_constant(v) for v in values) or has_symbols([as_python(v) for v in values]):
        raise Unsupported(UNSUPPORTED_CALL, f"{name} (assume_constant_result) of a non-constant"
                                   " argument")
    result = value(*[as_python(a) for a in args],
                   **{k: as_python(v) for k, v in kwargs.items()})
    if not isinstance(result, CONSTANT_TYPES):
        raise Unsupported(UNSUPPORTED_CALL, f"{name} (assume_constant_result) returned a"
                                   f" {type(result).__name__}, not a constant")
    return ConstVar(result)


def wrap_defaults(tx, fn, src) -> tuple:
    """fn.__defaults__, read from `src` (guarded: mutating `fn.__defaults__` recompiles)."""
    vt = tx.ctx.wrap(fn.__defaults__, AttrSource(src, "__defaults__"))
    return tuple(vt.items) if isinstance(vt, TupleVar) else ()


def wrap_kwdefaults(tx, fn, src) -> dict:
    if not fn.__code__.co_kwonlyargcount:
        return {}  # keyword-only defaults cannot matter to a function without them
    vt = tx.ctx.wrap(fn.__kwdefaults__, AttrSource(src, "__kwdefaults__"))
    return dict(vt.items) if isinstance(vt, DictVar) else {}


def real_closure(tx, fn, fn_source) -> tuple:
    cells = []
    for i, cell in enumerate(fn.__closure__ or ()):
        try:
            cell.cell_contents
        except ValueError:
            raise Unsupported(TRACE_EXCEPTION, "empty closure cell") from None
        source = cell_source = None
        if fn_source is not None:
            cell_source = ItemSource(AttrSource(fn_source, "__closure__"), i)
            source = AttrSource(cell_source, "cell_contents")
        known = tx.ctx.real_cells.get(id(cell))
        cells.append(known[1] if known is not None else
                     tx.ctx.real_cell(cell, source, cell_source))
    return tuple(cells)


def inline(tx, code, f_globals, args, kwargs, defaults, kwdefaults, closure, globals_source):
    """Run `code` called with these arguments in a child translator; its return value."""
    locals_ = bind_arguments(code, list(args), dict(kwargs), tuple(defaults), dict(kwdefaults))
    cells = dict(zip(code.co_freevars, closure))
    return tx.child(code, f_globals, locals_, cells, globals_source).run()


def inline_function(tx, fn, src, args, kwargs) -> VT:
    """Call the Python function `fn`, read from `src` (None: held by the guards as a
    constant), by tracing its bytecode.  Its __code__, defaults and closure cells are
    guarded where they are read, so replacing any of them recompiles."""
    check_inlinable(fn)
    src = src or ConstSource(fn, fn.__qualname__)
    inner = unwrapped(fn)
    if inner is not fn:
        fn, src = inner, AttrSource(src, "__wrapped__")
    tx.ctx.wrap(fn.__code__, AttrSource(src, "__code__"))  # ID_MATCH: fn.__code__ = ...
    closure = real_closure(tx, fn, src)
    globals_source = None if fn.__globals__ is tx_root(tx).f_globals else GlobalsDict(fn)
    return inline(tx, fn.__code__, fn.__globals__, args, kwargs, wrap_defaults(tx, fn, src),
                  wrap_kwdefaults(tx, fn, src), closure, globals_source)


def generator_expression(tx, fn: FunctionVar, args) -> GeneratorVar:
    """`(e for x in it)`: a generator advanced by its consumer (Note [Generator
    expressions], refcomp/tracer/values.py)."""
    locals_ = bind_arguments(fn.code, list(args), {}, (), {})
    cells = dict(zip(fn.code.co_freevars, fn.closure))
    return GeneratorVar(tx.child(fn.code, fn.f_globals, locals_, cells, fn.globals_source,
                                 generator=True))


def bind_arguments(code, args: list, kwargs: dict, defaults: tuple, kwdefaults: dict) -> dict:
    """Bind VT arguments to the parameters of `code` like a Python call does."""
    names = code.co_varnames
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    pos_names, kw_names = names[:npos], names[npos:npos + nkw]
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    out: dict = {}
    if len(args) > npos and not has_varargs:
        raise Unsupported(TRACE_EXCEPTION, f"{code.co_name}() takes {npos} positional arguments"
                                   f" but {len(args)} were given")
    for name, value in zip(pos_names, args):
        out[name] = value
    extra_kw = {}
    for key, value in kwargs.items():
        if key in out:
            raise Unsupported(TRACE_EXCEPTION, f"{code.co_name}() got multiple values for {key!r}")
        if key in pos_names[code.co_posonlyargcount:] or key in kw_names:
            out[key] = value
        elif has_varkw:
            extra_kw[key] = value
        else:
            raise Unsupported(TRACE_EXCEPTION,
                              f"{code.co_name}() got an unexpected keyword {key!r}")
    first_default = npos - len(defaults)
    for i, name in enumerate(pos_names):
        if name not in out:
            if i < first_default:
                raise Unsupported(TRACE_EXCEPTION, f"{code.co_name}() missing argument {name!r}")
            out[name] = defaults[i - first_default]
    for name in kw_names:
        if name not in out:
            if name not in kwdefaults:
                raise Unsupported(TRACE_EXCEPTION, f"{code.co_name}() missing argument {name!r}")
            out[name] = kwdefaults[name]
    index = npos + nkw
    if has_varargs:
        out[names[index]] = TupleVar(args[npos:])
        index += 1
    if has_varkw:
        out[names[index]] = DictVar(extra_kw)
    return out
