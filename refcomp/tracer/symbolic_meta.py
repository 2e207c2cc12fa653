"""Result shapes of an opaque ATen call over symbolic operand sizes.

Owns: `symbolic_result_shapes`, which types an opaque call's results as size expressions
in the trace's symbols by running torch's own meta kernel on fake tensors whose sizes are
torch SymInts (torch's FakeTensorMode and ShapeEnv), one per trace symbol.  Spec:
spec/tracer.md, "Opaque torch calls"; Note [Opaque calls over symbolic sizes].
"""

from __future__ import annotations

import logging

import sympy
import torch

from codegen.opaque import flatten_results
from refcomp.tracer import eager_layout
from refcomp.tracer.values import TensorVar


# Note [Opaque calls over symbolic sizes]: an opaque call is typed by torch's meta kernel,
# which needs numbers; a symbolic size was specialized (guarded) before it, so a KV cache
# that grows by a token per decoding step recompiled, or broke, at every attention.  The
# call is instead run a second time on fake tensors whose sizes are torch SymInts, one per
# trace symbol with the traced value as its hint (torch's FakeTensorMode over a ShapeEnv:
# the meta kernels' own symbolic reasoning, as Dynamo types ATen calls).  Each result's
# sizes, sympy expressions over those SymInts, are rewritten in the trace's symbols; every
# guard the kernel put on the sizes (`Eq(s0, 1)`, `s0 < 64`) becomes a shape guard of the
# graph (ctx.decide).  Where the typing cannot be trusted the caller keeps its old answer
# (specialize, or break for a size automatic dynamic made symbolic): an operand with a
# symbolic size that is not dense in eager (a dense one is recorded by its dims' memory
# order, `layouts` `order=`, which holds at every size), a result not dense in one dim
# order at every size (`linalg.qr`'s column-major Q is: order 1, 0), a size torch cannot
# express in our symbols, or results that disagree with the concrete meta run at the
# traced sizes.  torch's fake-tensor machinery costs a one-time import (seconds) the
# first time a trace needs it.
def symbolic_result_shapes(ctx, fn, margs_of, operands: list[TensorVar], results: list):
    """The results' shapes over the trace's symbols, or None where they cannot be typed.

    margs_of(fakes) -> (args, kwargs): the call's arguments with the operands replaced by
    `fakes` (in operand order).  results: the concrete meta run's result tensors."""
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv()
    ours: dict = {}    # trace symbol -> torch SymInt
    theirs: dict = {}  # ShapeEnv symbol -> trace symbol

    def symint(sym):
        if sym not in ours:
            hint = ctx.concrete(sym)
            s = env.create_symbol(hint, ConstantSource(str(sym)),
                                  dynamic_dim=DimDynamic.DYNAMIC)
            ours[sym] = env.create_symintnode(s, hint=hint)
            theirs[s] = sym
        return ours[sym]

    def size(d):
        if isinstance(d, int):
            return d
        expr = sympy.sympify(d)
        if isinstance(expr, sympy.Symbol):
            return symint(expr)
        syms = sorted(expr.free_symbols, key=str)
        return sympy.lambdify(syms, expr, modules=[{}])(*(symint(s) for s in syms))

    mode = FakeTensorMode(shape_env=env)
    fakes = []
    quiet = logging.getLogger("torch._subclasses.fake_tensor")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # a refused fake run is not the user's error
    try:
        with mode:
            for tv in operands:
                shape = [size(d) for d in tv.value.type.shape]
                order = eager_layout.memory_order(tv.meta)
                if all(isinstance(d, int) for d in shape):
                    fake = torch.empty_strided(tuple(tv.meta.shape), tv.meta.stride(),
                                               dtype=tv.meta.dtype)
                elif eager_layout.operand_strides(tv.meta) is None:
                    fake = torch.empty(shape, dtype=tv.meta.dtype)
                elif order is not None:  # dense in eager's dim order (`layouts`: order=)
                    inverse = sorted(range(len(order)), key=order.__getitem__)
                    fake = torch.empty([shape[d] for d in order],
                                       dtype=tv.meta.dtype).permute(*inverse)
                else:
                    return None  # a symbolic operand neither row-major nor dense
                fakes.append(fake.requires_grad_(tv.meta.requires_grad))
            args, kwargs = margs_of(fakes)
            with torch.set_grad_enabled(ctx.grad_enabled):
                out = fn(*args, **kwargs)
    except Exception:  # the fake run is a second opinion: without it, the old answer
        return None
    finally:
        quiet.setLevel(level)
    outs = flatten_results(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != len(results) or not all(isinstance(o, torch.Tensor) for o in outs):
        return None
    shapes = []
    for o, concrete in zip(outs, results):
        shape = tuple(_ours(d, theirs) for d in o.shape)
        if any(s is None or not _polynomial(s) for s in shape) or \
                not _dense_in(o, _order(o, ctx, theirs)) or \
                [ctx.concrete(s) for s in shape] != list(concrete.shape):
            return None
        shapes.append(tuple(int(s) if not getattr(s, "free_symbols", None) else s
                            for s in shape))
    for guard in env.guards:
        relation = guard.expr.xreplace(theirs)
        if relation.free_symbols - set(ours):
            return None
        ctx.decide(relation)
    return shapes


def _ours(d, theirs):
    """A result size in the trace's symbols (torch's FloorDiv as sympy's floor, which
    codegen/sizes.py evaluates exactly), or None."""
    if isinstance(d, int):
        return d
    expr = _sympy_floor(d.node.expr).xreplace(theirs)
    return None if expr.free_symbols - set(theirs.values()) else expr


def _polynomial(d) -> bool:
    """A size the IR's dim grammar writes (a polynomial with integer coefficients; a
    pool's floor(s/2) is not, and is specialized)."""
    if isinstance(d, int) or not d.free_symbols:
        return True
    try:
        return all(c.is_integer for c in sympy.Poly(d, *sorted(d.free_symbols, key=str)).coeffs())
    except sympy.PolynomialError:
        return False


def _sympy_floor(expr):
    from torch.utils._sympy.functions import FloorDiv

    return expr.replace(lambda e: isinstance(e, FloorDiv),
                        lambda e: sympy.floor(e.args[0] / e.args[1]))


def _at_least_two(expr):
    """expr with each size symbol s written t + 2 (t >= 0): sizes 0 and 1 are always
    specialized, so `Max(1, s // 2)` simplifies to `s // 2`."""
    expr = _sympy_floor(sympy.sympify(expr))
    return sympy.simplify(expr.xreplace({
        s: sympy.Symbol(f"_t_{s}", integer=True, nonnegative=True) + 2
        for s in expr.free_symbols}))


def _order(t, ctx, theirs) -> tuple[int, ...]:
    """The fake result's dims from outermost to innermost in memory at the traced sizes."""
    strides = [ctx.concrete(sympy.sympify(_expr(s)).xreplace(theirs)) for s in t.stride()]
    return tuple(sorted(range(t.dim()), key=lambda d: (-strides[d], d)))


def _dense_in(t, order) -> bool:
    """The fake result's strides are dense in dim `order` at every value of its symbolic
    sizes (size-1 dims free): the layout eager gives it at the traced sizes is the one it
    gives at all (an SDPA output over permuted operands: order 0, 2, 1, 3)."""
    expected = sympy.Integer(1)
    for d in reversed(order):
        size = sympy.sympify(_expr(t.shape[d]))
        if size != 1 and _at_least_two(sympy.sympify(_expr(t.stride()[d])) - expected) != 0:
            return False
        expected = expected * size
    return True


def _expr(v):
    return v.node.expr if isinstance(v, torch.SymInt) else v
