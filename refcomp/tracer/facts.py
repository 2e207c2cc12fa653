"""Facts about Python values that every call kind asks: is it a constant, hashable, a torch
function; its public name; how to describe it in a reason; a code object's exception
table."""

from __future__ import annotations

import dis
import operator
import types

import sympy
import torch

from refcomp.reasons import TENSOR_TO_PYTHON, Unsupported
from refcomp.tracer.values import VT, TensorVar, as_python


def size_or_tuple(*vts) -> type:
    """What tuple arithmetic gives: torch.Size if an operand is one (torch.Size's `+`
    and `*` return a torch.Size, `(1,) + size` too), else tuple (a structseq's slice)."""
    return torch.Size if any(getattr(v, "cls", None) is torch.Size for v in vts) else tuple


def require_const(tx, v: VT, what: str) -> VT:
    if isinstance(v, TensorVar):
        raise Unsupported(TENSOR_TO_PYTHON, f"{what} needs a tensor's value")
    return v


def has_symbols(x) -> bool:
    if isinstance(x, sympy.Basic):
        return bool(x.free_symbols)
    if isinstance(x, (list, tuple, set, frozenset)):
        return any(has_symbols(i) for i in x)
    if isinstance(x, dict):
        return any(has_symbols(k) or has_symbols(v) for k, v in x.items())
    if isinstance(x, slice):
        return has_symbols([x.start, x.stop, x.step])
    return False


# Note [Sizes inside folded values]: a fold runs the real Python function on the traced
# values, and a dynamic size is a sympy symbol there: Python's `==` on sympy is structural
# (`(s0, 2) == (4, 2)` is False whatever s0 is), `str` prints "s0", `hash` hashes the name.
# So a symbol inside a container argument (a tuple, torch.Size, list, dict, set, slice) is
# specialised to its traced value first, with a guard (`ctx.specialize`), unless the
# function only looks at the container's structure (STRUCTURAL_FOLDS, and concatenating
# or repeating a sequence).  Without a context to guard in, such a fold breaks.
STRUCTURAL_FOLDS = frozenset({len, type, isinstance, issubclass, callable, hasattr, tuple,
                              list, reversed, id})


def nested_symbols(fn, args, kwargs) -> bool:
    if fn in STRUCTURAL_FOLDS or not (has_symbols(list(args)) or has_symbols(kwargs)):
        return False
    if fn in (operator.add, operator.mul) and all(
            isinstance(a, (int, sympy.Basic, tuple, list)) and not isinstance(a, bool)
            for a in args):
        return False  # sizes, or sequence concatenation / repetition: structural
    return any(isinstance(a, (tuple, list, dict, set, frozenset, slice)) and has_symbols(a)
               for a in list(args) + list(kwargs.values()))


def concrete(ctx, value):
    """`value` with each dynamic size in it replaced by its traced value, guarded."""
    if isinstance(value, sympy.Basic):
        return ctx.specialize(value) if value.free_symbols else value
    if isinstance(value, slice):
        return slice(*(concrete(ctx, v) for v in (value.start, value.stop, value.step)))
    if isinstance(value, tuple):
        items = [concrete(ctx, v) for v in value]
        return type(value)(*items) if hasattr(type(value), "_fields") else type(value)(items)
    if isinstance(value, (list, set, frozenset)):
        return type(value)(concrete(ctx, v) for v in value)
    if isinstance(value, dict):
        return type(value)((concrete(ctx, k), concrete(ctx, v)) for k, v in value.items())
    return value


def concrete_vt(ctx, vt: VT) -> VT:
    """concrete() of a traced value, keeping a symbolic torch.Size a torch.Size."""
    from refcomp.tracer.values import ConstVar, ListVar, TupleVar

    if isinstance(vt, TupleVar):
        return TupleVar([concrete_vt(ctx, i) for i in vt.items], cls=vt.cls)
    if isinstance(vt, ListVar) and vt.source is None:
        return ListVar([concrete_vt(ctx, i) for i in vt.items])
    if type(vt) is ConstVar and has_symbols(vt.value):
        return ConstVar(concrete(ctx, vt.value))
    return vt


def is_constant(v: VT) -> bool:
    try:
        as_python(v)
        return True
    except TypeError:
        return False


def hashable(value) -> bool:
    try:
        hash(value)
        return True
    except TypeError:
        return False


def public_name(fn) -> str:
    """module.qualname; a wrapper made inside a function (F.max_pool1d is torch's
    `boolean_dispatch.<locals>.fn`) goes by the __name__ it is published under."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    if "<locals>" in qualname:
        qualname = getattr(fn, "__name__", qualname)
    # A method of a builtin type (`"sdpa".startswith`) has no module: "str.startswith".
    return f"{module}.{qualname}" if module else qualname


def is_torch_function(fn) -> bool:
    module = getattr(fn, "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


def describe_vt(vt: VT) -> str:
    """A value as a user knows it: its source's name or its type, never a VT repr."""
    if vt.source is not None:
        return vt.source.name()
    return f"a {vt.python_type().__name__}"


def class_lookup(cls, name):
    """The raw attribute `name` of cls's MRO (no descriptor called), or None."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


def is_user_code(fn) -> bool:
    """A Python function that is not torch's own: torch's descriptors and properties
    (`torch.backends.cudnn.enabled`) are state queries, read for real and guarded."""
    return isinstance(fn, types.FunctionType) and \
        not (fn.__module__ == "torch" or (fn.__module__ or "").startswith("torch."))


_EXCEPTION_TABLES: dict = {}  # code object -> its parsed exception table


def exception_table(code) -> list:
    """`dis`'s parsed exception table of `code`, parsed once per code object."""
    table = _EXCEPTION_TABLES.get(code)
    if table is None:
        table = _EXCEPTION_TABLES[code] = dis._parse_exception_table(code)
    return table
