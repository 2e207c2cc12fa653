"""The opaque op `aten`: one call of a torch callable the IR has no rule for.

Owns: the `aten` OpDef and the hook through which it is executed (`set_executor`:
codegen/opaque.py registers one that runs the call with ATen).  The IR knows nothing of
torch (tests/test_layering.py), so a node carries what is needed to *name* the call, never
to understand it.  Its attributes and semantics: spec/ops.md, "Extern".
"""

from __future__ import annotations

from typing import Callable, Optional

from ir.ops.registry import EXTERN, defop

_EXECUTOR: Optional[Callable] = None


def set_executor(fn: Callable) -> None:
    """Register `fn(arrays, **attrs) -> array | tuple of arrays`, the numpy-level runner."""
    global _EXECUTOR
    _EXECUTOR = fn


# `results="none"`: an effect-only call; the node's result is this empty token.
NO_RESULTS = "none"


def token_type():
    from ir.types import TensorType, u8

    return TensorType(u8, (0,), "cpu")


def parse_results(text: str) -> tuple:
    """The TensorTypes written in a `results` attribute ("f32[3,4]; i64[3]"; "none": the
    token of an effect-only call)."""
    from ir.parser import Parser

    if text.strip() == NO_RESULTS:
        return (token_type(),)
    types = []
    for part in text.split(";"):
        part = part.strip()
        if not part:
            raise ValueError(f"aten: empty result type in results={text!r}")
        try:
            p = Parser(part)
            t = p.type()
        except Exception as e:  # a ParseError: say which attribute held it
            raise ValueError(f"aten: cannot read result type {part!r}: {e}") from None
        if p.tok.kind != "eof":
            raise ValueError(f"aten: cannot read result type {part!r}")
        types.append(t)
    return tuple(types)


def format_results(types) -> str:
    return "; ".join(str(t) for t in types)


def _infer(types, fn, args, results, mutates, views, rng=False, layouts="", overlaps=()):
    """The declared results; `mutates` names operands (their new values come last)."""
    out = parse_results(results)
    if not fn:
        raise TypeError("aten needs fn= naming the torch callable")
    for i, strides in parse_layouts(layouts).items():
        if not 0 <= i < len(types) or len(strides) != len(types[i].shape) or isinstance(
                strides, DimOrder) and sorted(strides) != list(range(len(strides))):
            raise TypeError(f"aten {fn}: layout {i}:{strides} does not fit its operand")
    for i in overlaps:
        if not 0 <= i < len(types) or i in parse_layouts(layouts):
            raise TypeError(f"aten {fn}: overlapping operand {i} is not an operand without"
                            " a layout")
    if results.strip() == NO_RESULTS and (mutates or views):
        raise TypeError(f"aten {fn}: results=\"none\" writes and views nothing")
    for i in mutates:
        if not 0 <= i < len(types):
            raise TypeError(f"aten {fn}: mutates operand {i}, but it has {len(types)}")
        if out[len(out) - len(mutates) + list(mutates).index(i)].shape != types[i].shape:
            raise TypeError(f"aten {fn}: the new value of operand {i} must keep its shape")
    for j in views:
        if not 0 <= j < len(out) - len(mutates):
            raise TypeError(f"aten {fn}: view result {j} out of range")
    return out if len(out) != 1 else out[0]


class DimOrder(tuple):
    """A dense layout given by its dims from outermost to innermost in memory (an operand
    with symbolic sizes, whose strides are no numbers): printed `order=0,2,1,3`."""


def parse_layouts(text: str) -> dict:
    """{operand index: strides or DimOrder} from a `layouts` attribute
    ("0:1,4; 2:12,1; 3:order=0,2,1")."""
    out = {}
    for part in text.split(";"):
        if not part.strip():
            continue
        try:
            i, strides = part.split(":")
            if strides.strip().startswith("order="):
                out[int(i)] = DimOrder(int(d) for d in strides.split("=")[1].split(","))
            else:
                out[int(i)] = tuple(int(s) for s in strides.split(","))
        except ValueError:
            raise ValueError(f"aten: cannot read layout {part.strip()!r} (want"
                             " 'operand:stride,stride,...' or 'operand:order=d,d,...')") from None
    return out


def _ref(*arrays, fn, args, results, mutates, views, rng=False, layouts="", overlaps=(),
         operand_dtypes=None):
    """`operand_dtypes`: each operand's IR dtype where the interpreter knows it (a bf16
    operand is a float32 array; torch must see it as bf16, as eager does)."""
    if _EXECUTOR is None:
        raise RuntimeError(f"aten {fn}: an opaque torch call needs torch to run; import"
                           " codegen.opaque to register its executor")
    return _EXECUTOR(arrays, fn=fn, args=args, results=results, mutates=mutates, views=views,
                     rng=rng, layouts=layouts, overlaps=overlaps,
                     operand_dtypes=operand_dtypes)


ATEN = defop(
    "aten", EXTERN, operands=("xs",), variadic=True,
    attrs={"fn": "str", "args": ("str", ""), "results": "str", "mutates": ("ints", ()),
           "views": ("ints", ()), "rng": ("bool", False), "layouts": ("str", ""),
           "overlaps": ("ints", ())},
    infer=_infer, ref=_ref, effects=True, complex=True,
    doc="one call of a torch callable with no IR rule, run by ATen (see ir/ops/opaque.py)")
