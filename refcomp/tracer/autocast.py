"""Autocast inside a trace: torch's per-op casting rules, applied to a traced call's operands.

Owns `cast_operands(ctx, fn, name, pargs, pkwargs, new_tensor)`: while a CPU
`torch.autocast` is active, the tensor operands of a traced torch call are cast as
torch's autocast kernel for that op would cast them, so the graph computes in the
dtypes eager computes in.  The graph then runs with autocast switched off
(`refcomp.global_state.autocast_off`): its casts are explicit IR `cast` nodes, and a
backend that calls ATen must not cast a second time.
Spec: spec/guards.md, "Global torch state".

Note [Autocast policy]: torch keeps its casting lists (lower_precision_fp, fp32, promote)
in C++ (aten/src/ATen/autocast_mode.cpp), per device type, and they change between
versions.  Rather than copy them, refcomp asks torch: it runs the op on fake CPU tensors
under the active autocast twice, once with every eligible operand (floating point, not
float64: autocast's own rule) as float32, once with each as the autocast dtype.
- The first returns the autocast dtype: the op is in lower_precision_fp; eligible
  operands are cast to the autocast dtype (matmul, linear, conv, bmm, baddbmm, sdpa...).
- The second returns float32: the op is in the fp32 list; eligible operands are cast to
  float32 (mse_loss, cross_entropy, prod, cdist...).
- Otherwise autocast does not cast for this op.  (Promote ops cast to the widest operand
  type, which type promotion already gives or which the meta run refuses: a break, and
  eager runs the op under autocast.)
A probe that raises cannot tell, so the call is a break (RB021) and eager runs it: never
a guess.  A third run, first, has the operands' own dtypes: autocast can refuse what the
plain op takes (a stack of float16 tensors under bfloat16 autocast raises), and eager must
raise there too.  An operand of the other half type (float16 under bfloat16 autocast)
is a break at once: autocast's promotion raises on it inside composite kernels too (roll
calls cat), which no fake run shows.  Answers are cached per (op, autocast dtype, operand
dtypes and ranks, other arguments): the lists depend on the op, not on sizes.
"""

from __future__ import annotations

import torch

from refcomp.reasons import UNMODELLED_TORCH_STATE, Unsupported
from refcomp.tracer.context import ir_dtype
from refcomp.tracer.values import TensorVar

LOWER, FP32 = "lower_precision_fp", "fp32"
_POLICY: dict = {}  # cache key -> LOWER, FP32 or None


def active_dtype():
    """The CPU autocast dtype while CPU autocast is on, else None."""
    if not torch.is_autocast_enabled("cpu"):
        return None
    return torch.get_autocast_dtype("cpu")


def _eligible(tv) -> bool:
    return isinstance(tv, TensorVar) and tv.meta.is_floating_point() and \
        tv.meta.dtype != torch.float64


def _map(x, f):
    if isinstance(x, TensorVar):
        return f(x)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_map(i, f) for i in x)
    if isinstance(x, dict):
        return {k: _map(v, f) for k, v in x.items()}
    return x


def _key(fn, dtype, pargs, pkwargs):
    sig = _map((pargs, pkwargs), lambda tv: ("T", tv.meta.dtype, tv.meta.dim()))
    try:
        key = (fn, dtype, repr(sig))
        hash(fn)
        return key
    except TypeError:
        return None


def _probe(fn, name, pargs, pkwargs, as_dtype, dtype):
    """The dtype of fn's first tensor result on fake CPU tensors, eligible ones as_dtype."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    def fake(tv):
        m = tv.meta
        dtype = as_dtype if as_dtype is not None and _eligible(tv) else m.dtype
        return torch.empty_strided(tuple(m.shape), m.stride(), dtype=dtype, device="cpu")
    try:
        with FakeTensorMode(), torch.no_grad(), torch.autocast("cpu", dtype=dtype):
            out = fn(*_map(pargs, fake), **_map(pkwargs, fake))
    except Exception as err:
        raise Unsupported(UNMODELLED_TORCH_STATE,
                          f"torch.autocast('cpu', dtype={dtype}) is active and"
                                   f" {name}'s casting rule could not be read off a fake"
                                   f" run ({type(err).__name__}): it runs eagerly") from None
    while isinstance(out, (tuple, list)) and out:
        out = out[0]
    return out.dtype if isinstance(out, torch.Tensor) else None


def policy(fn, name, pargs, pkwargs, dtype):
    """LOWER, FP32 or None: how autocast casts this call's operands (Note [Autocast policy])."""
    key = _key(fn, dtype, pargs, pkwargs)
    if key is not None and key in _POLICY:
        return _POLICY[key]
    # First the call itself: autocast can refuse operands the plain op takes (stack of
    # float16 tensors under bfloat16 autocast raises in at::autocast::prioritize); the
    # probe then raises, and eager runs the call and raises the same.
    _probe(fn, name, pargs, pkwargs, None, dtype)
    if _probe(fn, name, pargs, pkwargs, torch.float32, dtype) == dtype:
        answer = LOWER
    elif _probe(fn, name, pargs, pkwargs, dtype, dtype) == torch.float32:
        answer = FP32
    else:
        answer = None
    if key is not None:
        _POLICY[key] = answer
    return answer


def cast_operands(ctx, fn, name, pargs, pkwargs, new_tensor):
    """(pargs, pkwargs) with operands cast as active CPU autocast casts them for fn;
    `new_tensor(ctx, value, meta, operands, view)` makes each cast's TensorVar."""
    dtype = active_dtype()
    if dtype is None:
        return pargs, pkwargs
    operands = []
    _map((pargs, pkwargs), operands.append)
    if not any(_eligible(tv) for tv in operands):
        return pargs, pkwargs
    other_half = {tv.meta.dtype for tv in operands if _eligible(tv)} & \
        ({torch.float16, torch.bfloat16} - {dtype})
    if other_half:
        # autocast's promote rule raises on a half type other than its own ("Unexpected
        # floating ScalarType in at::autocast::prioritize"), also inside composite ops
        # whose fake run does not show it (roll: its CPU kernel calls cat): eager decides.
        raise Unsupported(UNMODELLED_TORCH_STATE,
                          f"torch.autocast('cpu', dtype={dtype}) is active and"
                                   f" {name} has a {other_half.pop()} operand: it runs"
                                   " eagerly")
    rule = policy(fn, name, pargs, pkwargs, dtype)
    if rule is None:
        return pargs, pkwargs
    target = dtype if rule == LOWER else torch.float32
    casts: dict = {}

    def cast(tv):
        if not _eligible(tv) or tv.meta.dtype == target:
            return tv
        if id(tv) not in casts:
            with torch.set_grad_enabled(ctx.grad_enabled):
                meta = tv.meta.to(target)
            value = ctx.builder.cast(tv.value, dtype=ir_dtype(target))
            casts[id(tv)] = new_tensor(ctx, value, meta, [tv], False)
        return casts[id(tv)]
    return _map(pargs, cast), _map(pkwargs, cast)
