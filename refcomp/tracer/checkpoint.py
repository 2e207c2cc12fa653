"""`torch.utils.checkpoint.checkpoint` inside a traced frame (spec/autograd.md).

Owns: the tracer's handler for a checkpoint call.  Must not know: the partitioner's rule
(ir/autodiff.py, Note [Checkpointed values]) beyond naming the values it computes.

Note [Checkpoint traced inline]: non-reentrant checkpointing (`use_reentrant=False`)
changes what autograd keeps, never what it computes: the region's forward runs once,
its backward recomputes the region under the same random state and differentiates
that.  So the region is traced inline, as a call of `function(*args, **kwargs)`, and
the values it computes go to `ctx.checkpointed`, which the partitioner recomputes in
the compiled backward instead of saving (random draws excepted: those are saved, the
same numbers eager's preserved RNG state redraws).  Gradients equal eager's.  What
breaks instead (everything whose eager semantics differ from "call the function", so
CPython runs checkpoint itself): spec/autograd.md, Note [Checkpointed values].
"""

from __future__ import annotations

import torch.utils.checkpoint as ckpt

from refcomp.reasons import UNSUPPORTED_CALL, Unsupported
from refcomp.tracer.values import ConstVar

CHECKPOINT = ckpt.checkpoint
# checkpoint's own keyword arguments; any other keyword goes to the function.
_OPTIONS = ("use_reentrant", "context_fn", "determinism_check", "debug", "early_stop",
            "preserve_rng_state")


def call_checkpoint(tx, args: list, kwargs: dict, call_function):
    """The traced value of `checkpoint(function, *args, **kwargs)` (Note [Checkpoint
    traced inline]); `call_function(tx, fn, args, kwargs)` traces the region."""
    if not args:
        raise Unsupported(UNSUPPORTED_CALL,
                          "torch.utils.checkpoint.checkpoint() without a function")
    kwargs = dict(kwargs)
    options = {k: kwargs.pop(k) for k in _OPTIONS if k in kwargs}
    values = {}
    for name, v in options.items():
        if not isinstance(v, ConstVar):
            raise Unsupported(UNSUPPORTED_CALL, f"torch.utils.checkpoint with a traced {name}=")
        values[name] = v.value
    why = _eager_only(values)
    if why:
        raise Unsupported(UNSUPPORTED_CALL, f"torch.utils.checkpoint with {why} runs eagerly (its"
                                   " autograd semantics are not those of an inline call)")
    ctx = tx.ctx
    before = len(ctx.builder.nodes)
    out = call_function(tx, args[0], list(args[1:]), kwargs)
    for node in ctx.builder.nodes[before:]:
        ctx.checkpointed.update(node.outputs)
    return out


def _eager_only(values: dict) -> str:
    """Why this call must run as eager checkpointing, or ''."""
    reentrant = values.get("use_reentrant")
    if reentrant is not False:
        return f"use_reentrant={reentrant!r}"
    if values.get("preserve_rng_state", True) is not True:
        return f"preserve_rng_state={values['preserve_rng_state']!r}"
    if values.get("context_fn", ckpt.noop_context_fn) is not ckpt.noop_context_fn:
        return "a context_fn"
    if values.get("debug", False) is not False:
        return f"debug={values['debug']!r}"
    if values.get("determinism_check", "default") not in ("default", "none"):
        return f"determinism_check={values['determinism_check']!r}"
    return ""
