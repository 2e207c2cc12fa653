"""Facts about Python values that every call kind asks: is it a constant, hashable, a torch
function; its public name; how to describe it in a reason; a code object's exception
table."""

from __future__ import annotations

import dis
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
    return False


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
