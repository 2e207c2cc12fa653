"""Torch's default random generator in the graph: seeding, saving and restoring its state.

Owns: the tracer's treatment of `torch.manual_seed(s)`, `torch.get_rng_state()`,
`torch.set_rng_state(t)` and the context manager `torch.testing._utils.freeze_rng_state`
(what OpInfo's `wrapper_set_seed` wraps every random op in).  Random *draws* are in
opaque.py (an `aten` node tagged `rng`).  Spec: spec/tracer.md, "Random draws".

Note [Random stream in program order]: every call that draws from, seeds or restores the
default CPU generator becomes an `aten` node with `rng=true`, effectful, so every pass
keeps them in program order and a compiled call draws what eager draws; what breaks and
what is not modelled: spec/tracer.md, "Random draws".
"""

from __future__ import annotations

import torch

from ir.ops.opaque import ATEN, NO_RESULTS, format_results
from ir.types import TensorType, u8
from refcomp.reasons import TRACE_EXCEPTION, UNSUPPORTED_CALL, Unsupported
from refcomp.tracer.values import VT, ConstVar, TensorVar, as_python


def _state_type() -> TensorType:
    return TensorType(u8, (torch.get_rng_state().numel(),), "cpu")


def get_rng_state(ctx) -> TensorVar:
    """`torch.get_rng_state()`: a fresh u8 tensor holding the generator's state now."""
    t = _state_type()
    value = ctx.builder.insert(ATEN, [], {"fn": "torch.get_rng_state", "args": "",
                                          "results": format_results([t]), "rng": True}, [t])
    meta = torch.empty(t.shape, dtype=torch.uint8, device="meta")
    return TensorVar(value, meta)


def set_rng_state(ctx, state: VT) -> ConstVar:
    """`torch.set_rng_state(state)`: an effect-only node (its result is a token)."""
    if not isinstance(state, TensorVar) or state.meta.dtype != torch.uint8 or \
            state.value.type.device != "cpu" or state.meta.dim() != 1:
        raise Unsupported(UNSUPPORTED_CALL, f"torch.set_rng_state of {state!r}: the graph restores"
                                   " only a CPU uint8 state tensor")
    _effect(ctx, "torch.set_rng_state", [state.value], "T[0]")
    return ConstVar(None)


def manual_seed(ctx, seed: VT) -> ConstVar:
    """`torch.manual_seed(s)` with a constant int seed (all devices' generators, as
    eager: the node calls torch.manual_seed itself)."""
    try:
        s = as_python(seed)
    except TypeError:
        s = None
    if type(s) is not int:
        raise Unsupported(UNSUPPORTED_CALL, f"torch.manual_seed of {seed!r}: the graph seeds only"
                                   " with a constant int")
    _effect(ctx, "torch.manual_seed", [], repr(s))
    return ConstVar(torch.random.default_generator)


def _effect(ctx, fn: str, operands: list, args: str) -> None:
    from ir.ops.opaque import token_type

    ctx.builder.insert(ATEN, operands, {"fn": fn, "args": args, "results": NO_RESULTS,
                                        "rng": True}, [token_type()])


class RngFreezeVar(VT):
    """`freeze_rng_state()` before its `with`: entering saves the state, leaving restores it."""

    def enter(self, ctx) -> VT:
        if torch.accelerator.is_available():
            raise Unsupported(UNSUPPORTED_CALL, "freeze_rng_state with an accelerator available: it"
                                       " also saves that device's generator")
        return RngRestoreVar(get_rng_state(ctx))


class RngRestoreVar(VT):
    """The `__exit__` of a `freeze_rng_state()` block: restores the saved state."""

    def __init__(self, state: TensorVar):
        self.state = state

    def exit(self, ctx) -> ConstVar:
        return set_rng_state(ctx, self.state)


def _call_manual_seed(tx, args, kwargs):
    if len(args) + len(kwargs) != 1 or kwargs and "seed" not in kwargs:
        raise Unsupported(TRACE_EXCEPTION, "manual_seed() takes one argument, seed")
    return manual_seed(tx.ctx, args[0] if args else kwargs["seed"])


def _call_get_rng_state(tx, args, kwargs):
    if args or kwargs:
        raise Unsupported(TRACE_EXCEPTION, "get_rng_state() takes no arguments")
    return get_rng_state(tx.ctx)


def _call_set_rng_state(tx, args, kwargs):
    if len(args) + len(kwargs) != 1 or kwargs and "new_state" not in kwargs:
        raise Unsupported(TRACE_EXCEPTION, "set_rng_state() takes one argument, new_state")
    return set_rng_state(tx.ctx, args[0] if args else kwargs["new_state"])


def _call_freeze(tx, args, kwargs):
    if args or kwargs:
        raise Unsupported(TRACE_EXCEPTION, "freeze_rng_state() takes no arguments")
    return RngFreezeVar()


# (module, qualname) of the Python functions -> handler(tx, args, kwargs).
HANDLERS = {
    ("torch.random", "manual_seed"): _call_manual_seed,
    ("torch.random", "get_rng_state"): _call_get_rng_state,
    ("torch.random", "set_rng_state"): _call_set_rng_state,
    ("torch.testing._utils", "freeze_rng_state"): _call_freeze,
}
