"""Calls of bound methods: of tensors, containers, autograd ctx objects, loggers, context variables.

Spec: spec/tracer.md, "Python features".
"""

from __future__ import annotations

import contextvars
import types

import torch

from refcomp.reasons import (
    INEXPRESSIBLE_OP,
    UNSUPPORTED_CALL,
    UNSUPPORTED_TENSOR_METHOD,
    Unsupported,
)
from refcomp.tracer import (
    classes,
    effects,
    opaque,
    torch_table,
)
from refcomp.tracer.attributes import class_attr
from refcomp.tracer.containers import container_method
from refcomp.tracer.inlining import check_inlinable, inline_function
from refcomp.tracer.values import (
    VT,
    ConstVar,
    ContextTokenVar,
    DictVar,
    ListVar,
    MethodVar,
    OpaqueVar,
    TensorVar,
    TupleVar,
)

# Tensor methods that act on the real tensor's autograd node: a break at the call, which
# CPython runs on the tensor the graph before it returned (spec/autograd.md, "Tensor hooks").
_AT_A_BREAK = {
    "register_hook": "Tensor.register_hook: the hook is registered on the real tensor at a"
                     " break (the graphs before and after it are compiled)",
    "register_post_accumulate_grad_hook": "Tensor.register_post_accumulate_grad_hook: the"
                                          " hook is registered on the real tensor at a break",
}


def call_method(tx, m: MethodVar, args, kwargs) -> VT:
    self_vt = m.self_vt
    if isinstance(self_vt, TensorVar):
        if m.name in ("addcdiv_", "addcmul_", "addcdiv", "addcmul", "lerp_", "lerp"):
            from refcomp.tracer.foreach import composite_method

            out = composite_method(tx, m.name, [self_vt] + list(args), kwargs)
            if out is not None:
                return out
        method = getattr(torch.Tensor, m.name, None)
        if method is not None and torch_table.has_entry(method):
            return call_torch_or_opaque(tx, method, [self_vt] + list(args), kwargs)
        if method is not None and opaque.opaque_name(method) is not None:
            return opaque.call_opaque(tx.ctx, method, [self_vt] + list(args), kwargs)
        if m.name in _AT_A_BREAK:
            raise Unsupported(UNSUPPORTED_CALL, _AT_A_BREAK[m.name])
        if isinstance(method, types.FunctionType):  # Python-level (torch/_tensor.py)
            return tx.call_function(ConstVar(method), [self_vt] + list(args), kwargs)
        raise Unsupported(UNSUPPORTED_TENSOR_METHOD, f"Tensor.{m.name}")
    if isinstance(self_vt, (TupleVar, ListVar, DictVar)):
        return container_method(tx, self_vt, m.name, args, kwargs)
    if isinstance(self_vt, classes.FunctionCtxVar):  # ctx.save_for_backward(...): no grad
        return self_vt.call(m.name, args)
    if isinstance(self_vt, OpaqueVar):  # a list/dict the code only mutates
        effects.record(tx, "method", self_vt, m.name, args, kwargs,
                       what=f"{self_vt.source.name()}.{m.name}(...)")
        return ConstVar(None)
    if effects.is_logger_method(self_vt, m.name):  # logger.warning(...): after the graph
        effects.record(tx, "method", self_vt, m.name, [effects.snapshot(a) for a in args],
                       {k: effects.snapshot(v) for k, v in kwargs.items()},
                       what=f"{self_vt.source.name() if self_vt.source else 'logger'}"
                            f".{m.name}(...)")
        return ConstVar(None)
    if isinstance(self_vt, ConstVar) and isinstance(self_vt.value, contextvars.ContextVar):
        return _context_var_method(tx, self_vt, m.name, args, kwargs)
    if isinstance(m.fn, types.FunctionType):
        return tx.call_function(class_attr(tx, self_vt, m.name, m.fn),
                             [self_vt] + list(args), kwargs)
    raise Unsupported(UNSUPPORTED_CALL, f"method {m.name} of {self_vt!r}")


# Note [Context variables]: transformers' `capture_outputs` wraps every model forward in
# `token = var.set(collected); try: forward finally: var.reset(token)` (a ContextVar, via
# CompileableContextVar, when not under Dynamo).  `set` is a side effect: it is recorded
# for replay after the graph and returns a token the trace holds; `get` then reads the
# value set; `reset` of the newest token of that variable undoes the set, so the recorded
# set is dropped and neither runs (the pair leaves the context as it found it, and no
# replayed effect reads a context variable).  A token that is never reset leaves the set
# to be replayed (eager's state after the call); a token live at a graph break cannot be
# rebuilt (Refused: the frame runs as the break machinery decides for any such value);
# `get` with no traced set, or `reset` of any other token, is RB004.
def _context_var_method(tx, var: ConstVar, name: str, args, kwargs) -> VT:
    tx.ctx.guard_identity(var)
    pending = [t for t in tx.ctx.context_tokens if t.var.value is var.value and not t.reset]
    if id(var.value) in tx.ctx.context_reset_real and name != "set":
        raise Unsupported(UNSUPPORTED_CALL, f"ContextVar.{name} after a replayed reset")
    if name == "set" and len(args) == 1 and not kwargs:
        effects.record(tx, "method", var, "set", args, what=f"{var.source.name()}.set(...)"
                       if var.source is not None else "ContextVar.set(...)")
        token = ContextTokenVar(var, args[0], tx.ctx.effects[-1])
        tx.ctx.context_tokens.append(token)
        return token
    if name == "reset" and len(args) == 1 and not kwargs and pending and \
            args[0] is pending[-1] and any(e is args[0].effect for e in tx.ctx.effects):
        token = args[0]
        tx.ctx.effects[:] = [e for e in tx.ctx.effects if e is not token.effect]
        token.reset = True
        return ConstVar(None)
    if name == "get" and len(args) <= 1 and not kwargs and pending:
        return pending[-1].value
    if name == "reset" and len(args) == 1 and not kwargs and not pending and \
            isinstance(args[0], ConstVar) and args[0].source is not None and \
            isinstance(args[0].value, contextvars.Token):
        # A real token (its set ran before this frame, or at a break): replayed after the
        # graph like any other effect; nothing traced reads the variable afterwards.
        effects.record(tx, "method", var, "reset", args, what="ContextVar.reset(...)")
        tx.ctx.context_reset_real.add(id(var.value))
        return ConstVar(None)
    raise Unsupported(UNSUPPORTED_CALL, f"ContextVar.{name} of a context variable the trace did not"
                               " set (or of another token)")


def call_torch_or_opaque(tx, fn, args, kwargs) -> VT:
    """A table entry, or -- where the entry cannot express these arguments (RB013) -- the
    same call as one opaque node (spec/tracer.md, "Opaque torch calls")."""
    try:
        return torch_table.call_torch(tx.ctx, fn, args, kwargs)
    except Unsupported as e:
        if e.rid != INEXPRESSIBLE_OP or torch_table.TABLE[fn].host:
            raise
        if isinstance(fn, types.FunctionType):  # F.adaptive_avg_pool2d: trace its Python
            try:
                check_inlinable(fn)
            except Unsupported:
                raise e from None
            return inline_function(tx, fn, None, args, kwargs)
        if opaque.opaque_name(fn) is None:
            raise
    return opaque.call_opaque(tx.ctx, fn, args, kwargs)
