"""Python floats traced as graph values: automatic dynamic floats.

Owns: the float-with-number arithmetic and the binary tensor ops with such a float as
their scalar operand.  The value kinds -- `DynamicFloatVar` (a Python float whose value is
a 0-d float64 graph value), `FloatArg` (what a torch call's builder receives for one),
`PinFloat` (the request to trace again with the float static) -- are in
refcomp/tracer/values.py, where refcomp/tracer/context.py makes them without an import
circle.  Spec: spec/guards.md
("Python float values"), spec/tracer.md Note [Optimizer steps].

Note [Dynamic floats]: with dynamic=None, a miss whose failing guard is the value of a
`float` (an argument, `opt.param_groups[0]['lr']`, an attribute: any source a guard
reads) makes that source dynamic in the frame's later compiles (`FrameCache.grow_dynamic`).
It is then read as a graph input, a 0-d float64 tensor the guard check makes from the
float (`NumberAsTensor`), guarded by `type(...) is float` instead of its value.  To
Python code it is a float (`type`, `isinstance`); its value is a graph value:
  - with a number or another such float, `+ - * /` and `**` (a number exponent that is a
    non-negative int, or a positive number base) are float64 0-d ops: IEEE doubles, as
    Python computes them;
  - as the scalar operand of a tensor's `add sub mul div pow` (their in-place forms and
    `alpha=`, so `x * lr`, `p.mul_(s)`, `p.add_(g, alpha=-lr)`, addcdiv's `value=` and the
    foreach forms, which are these per tensor) it is a 0-d operand in the dtype eager
    computes a Python scalar in: the op's result dtype with a float in its place (an int
    tensor's `* 0.5` is float32, a 0-d float32 tensor stays float32), and float32 for a
    half/bfloat16 `mul`/`div` (Note [Half scalars], refcomp/tracer/torch_ops.py).
Anything else that needs its value (a comparison, `bool`, `int()`, formatting, `math.*`,
a write into a container or attribute, a result, a size, a call the tracer does not
model) reads `.value`, which raises `PinFloat`: the frame is traced again with that float
static (its value guarded, as before), and the entry's notes say why; its later compiles
keep it static (FLOAT_STATIC in the cache's `auto_dims`), one trace per value.  A trace that
fails for any other reason than a break while floats are dynamic is also traced again
with them static.  A break hands a float still at its source over as that source (the
resumed code reads it again) and needs the value of a computed one (PinFloat: the
frame's split is traced again with its floats static, `_pinning_floats` in
refcomp/api.py).  So a dynamic float never turns a graph into a break or a wrong answer.
"""

from __future__ import annotations

import operator

import torch

from refcomp.tracer.values import ConstVar, DynamicFloatVar, FloatArg, PinFloat, TensorVar


def is_dynamic(v) -> bool:
    return isinstance(v, DynamicFloatVar)


def pin(vs, why: str):
    roots = [r for v in vs if isinstance(v, (DynamicFloatVar, FloatArg))
             for r in (v.var.roots if isinstance(v, FloatArg) else v.roots)]
    return PinFloat(roots, why)


# --- float arithmetic: `1 - lr * wd`, `-lr` ----------------------------------------------
_PYTHON = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "**": operator.pow}


def _number(v) -> bool:
    return isinstance(v, ConstVar) and not is_dynamic(v) and type(v.value) in (int, float)


def binary(tx, sym: str, a, b):
    """`a <sym> b` of a dynamic float and a number (or two dynamic floats), no tensor."""
    if sym not in _PYTHON or not all(is_dynamic(v) or _number(v) for v in (a, b)):
        raise pin((a, b), f"`{a!r} {sym} {b!r}` needs its value")
    if sym == "/" and (is_dynamic(b) or b.value == 0):
        raise pin((a, b), f"a division by {b!r} (Python raises ZeroDivisionError at 0)")
    if sym == "**" and not (is_dynamic(a) and _number(b) and type(b.value) is int and
                            b.value >= 0 or _number(a) and a.value > 0 and is_dynamic(b)):
        raise pin((a, b), f"{a!r} ** {b!r} (Python's result may be complex or raise)")
    traced = _PYTHON[sym](*(v.traced if is_dynamic(v) else v.value for v in (a, b)))
    if type(traced) is not float:
        raise pin((a, b), f"operator {sym} on {a!r}, {b!r} is not a float")
    from refcomp.tracer import torch_table

    out = torch_table.call_torch(tx.ctx, _PYTHON[sym], [
        v.tensor if is_dynamic(v) else ConstVar(float(v.value)) for v in (a, b)], {})
    return _result(out, traced, (a, b))


def unary(tx, name: str, a):
    if name not in ("neg", "pos"):
        raise pin((a,), f"{name} of {a!r}")
    if name == "pos":
        return a
    from refcomp.tracer import torch_table

    out = torch_table.call_torch(tx.ctx, operator.neg, [a.tensor], {})
    return _result(out, -a.traced, (a,))


def _result(out, traced, operands) -> DynamicFloatVar:
    assert isinstance(out, TensorVar) and out.meta.dtype == torch.float64 and \
        out.meta.dim() == 0, "float arithmetic must stay a 0-d float64 value"
    roots = []
    for v in operands:
        for r in getattr(v, "roots", ()):
            if r not in roots:
                roots.append(r)
    return DynamicFloatVar(out, traced, roots=roots)


# --- a dynamic float as a tensor op's scalar operand --------------------------------------
_HALF = (torch.float16, torch.bfloat16)
_SCALAR_OPS = ("add", "sub", "mul", "div", "pow")


def has_float_arg(xs) -> bool:
    return any(isinstance(x, FloatArg) or isinstance(x, (list, tuple)) and has_float_arg(x)
               for x in xs)


def binary_operands(ctx, op, a, b, alpha, rounding_mode):
    """A binary builder's operands with each FloatArg a 0-d graph value in the dtype eager
    computes the Python float in: (x, y, dtype, compute dtype or None); `alpha` folded
    into y.  PinFloat where the op or operands are not one modelled (Note [Dynamic
    floats])."""
    from refcomp.tracer.context import ir_dtype
    from refcomp.tracer.torch_table import cast, result_dtype

    if op not in _SCALAR_OPS or rounding_mode is not None or \
            not any(isinstance(v, TensorVar) for v in (a, b)) or \
            not all(isinstance(v, (TensorVar, FloatArg)) or type(v) in (int, float)
                    for v in (a, b)) or \
            not (isinstance(alpha, FloatArg) or type(alpha) in (int, float)) or \
            any(isinstance(v, TensorVar) and str(v.value.type.device) != "cpu"
                for v in (a, b)):  # (the float's input is a CPU tensor)
        raise pin((a, b, alpha), f"torch {op} with a dynamic float operand")
    dt = result_dtype(*(v.traced if isinstance(v, FloatArg) else v for v in (a, b)))
    if not dt.is_floating_point:
        raise pin((a, b, alpha), f"torch {op} with a dynamic float giving {dt}")
    half = dt in _HALF
    opmath = half and (op == "mul" or op == "div" and isinstance(a, TensorVar) and
                       isinstance(b, FloatArg) and alpha == 1)
    if half and not opmath and (op not in ("add", "sub") or isinstance(alpha, FloatArg)):
        # the static path's rounding of a number to half here is the IR's: not modelled
        raise pin((a, b, alpha), f"torch {op} of a {dt} tensor with a dynamic float")
    carrier_dt = torch.float32 if opmath else dt
    b_ = ctx.builder

    def operand(v):
        if isinstance(v, FloatArg):
            return b_.cast(v.var.tensor.value, dtype=ir_dtype(carrier_dt)) \
                if carrier_dt != torch.float64 else v.var.tensor.value
        if isinstance(v, TensorVar):
            return cast(ctx, v, carrier_dt if opmath else dt)
        return v

    x, y = operand(a), operand(b)
    if op in ("add", "sub") and (isinstance(alpha, FloatArg) or alpha != 1):
        y = b_.mul(y, operand(alpha) if isinstance(alpha, FloatArg) else alpha)
    return x, y, dt, carrier_dt if opmath else None


def is_same(a, b) -> bool:
    """`a is b` with a dynamic float: the same traced value is itself; a float is never
    None, a bool or any object that is not a float; anything else needs its value."""
    if a is b:
        return True
    other = b if is_dynamic(a) else a
    if isinstance(other, ConstVar) and not is_dynamic(other) and \
            not isinstance(other.value, float):
        return False
    raise pin((a, b), f"{a!r} is {b!r}")
