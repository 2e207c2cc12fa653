"""Branches on a tensor's value whose one side only raises: runtime checks, not breaks.

Owns: recognising `if <0-d bool tensor>: raise E("constant")` (and `if not ...`,
`assert <tensor>, "constant"`) at a conditional jump, and turning it into a runtime
check (`TraceContext.add_raise_check`).  Spec: spec/correctness.md, "Exceptions"
(Note [Raising branches]); the entry raises it (Note [Runtime checks], refcomp/runtime.py).

Note [Raising branches]: input validation in library code is a branch on a tensor's value
whose taken side only raises an exception made from constants -- `gaussian_nll_loss`'s
`if torch.any(var < 0): raise ValueError("var has negative entry/entries")`.  Breaking
there (RB003) splits every call.  Instead the graph computes the condition as an extra
0-d bool output, the trace goes on along the side that does not raise, and after the
graph the entry raises `E(*args)` when the condition says eager would have raised.
The raising side must be, instruction for instruction, a load of the exception class
(a global, guarded as any global read, or `LOAD_ASSERTION_ERROR`), constant arguments,
the call, and `RAISE_VARARGS 1`: nothing else runs on it.  The class must be an exception
class whose `__new__`/`__init__` are not Python code (building it has no effect).

Eager raises before anything after the branch happens; the entry raises before it writes
mutated inputs back and before it replays side effects, so what comes after the check
in program order never happens either.  What came *before* it must not need the
graph's completion to be seen, so the branch stays a break (RB003, the reason says why)
when, at the branch: an input has been written in place (eager's write happened, the
entry's write-back would not), a side effect to replay has been recorded, grad mode
differs from the frame's at entry (eager switched it; the entry switches after the
graph), the raise would be caught by a handler of any frame being traced (a `try` or a
`with` block), or the branch is inside a generator.  A random draw after a check would advance the
generator where eager, having raised, drew nothing: such a frame runs eagerly
(`check_no_draw_after`).
"""

from __future__ import annotations

import inspect
import types

import torch

from refcomp.reasons import TENSOR_CONTROL_FLOW, Unsupported
from refcomp.tracer import attributes
from refcomp.tracer.facts import exception_table
from refcomp.tracer.values import ConstVar, TensorVar

# What the raising side may hold (NOPs aside): the class, constant arguments, the call.
_LOADS = ("LOAD_GLOBAL", "LOAD_ASSERTION_ERROR")
_BODY = ("LOAD_CONST", "PRECALL", "CALL")


def _raise_side(tx, start: int):
    """The index of RAISE_VARARGS if the instructions from `start` only build an exception
    from constants and raise it (Note [Raising branches]), else None."""
    insts = tx.instructions
    i = start
    while i < len(insts) and insts[i].opname == "NOP":
        i += 1
    if i >= len(insts) or insts[i].opname not in _LOADS:
        return None
    for j in range(i + 1, len(insts)):
        inst = insts[j]
        if inst.opname == "RAISE_VARARGS":
            return j if inst.arg == 1 else None
        if inst.opname not in _BODY and inst.opname != "NOP":
            return None
    return None


def _plain_exception_class(cls) -> bool:
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        return False
    return not any(isinstance(inspect.getattr_static(cls, name), types.FunctionType)
                   for name in ("__new__", "__init__"))


def _refusal(tx, raise_at: int):
    """Why the check cannot replace the branch here, or None."""
    ctx = tx.ctx
    if ctx.mutated:
        return "an input was written in place before it"
    if ctx.effects:
        return "a side effect to replay was recorded before it"
    if ctx.grad_enabled != ctx.entry_grad_enabled:
        return "grad mode was switched before it"
    for frame in ctx.frames:
        if frame.code.co_flags & inspect.CO_GENERATOR:
            return "it is inside a generator"
        offset = (tx.instructions[raise_at] if frame is tx else frame.current).offset
        if any(e.start <= offset < e.end for e in exception_table(frame.code)):
            return "a try or with block of a traced frame would see the exception"
    return None


def branch(tx, inst, cond, jumps_when: bool) -> bool:
    """A POP_JUMP_*_IF_TRUE/FALSE (`jumps_when`) on the tensor `cond`: if one side only
    raises, record the runtime check, continue along the other side and return True."""
    if not isinstance(cond, TensorVar) or cond.meta.dtype != torch.bool or \
            cond.meta.dim() != 0 or "BACKWARD" in inst.opname:
        return False
    target = tx.index_of[inst.argval]
    fall = tx.ip
    raise_at = _raise_side(tx, fall)
    if raise_at is not None:
        raise_when, go_on = not jumps_when, target
    else:
        raise_at = _raise_side(tx, target)
        if raise_at is None:
            return False
        raise_when, go_on = jumps_when, fall
    why = _refusal(tx, raise_at)
    if why is not None:
        raise Unsupported(TENSOR_CONTROL_FLOW,
                          f"the truth value of a tensor (a branch that raises, but {why})")
    start = fall if go_on == target else target
    insts = [i for i in tx.instructions[start:raise_at] if i.opname != "NOP"]
    if insts[0].opname == "LOAD_ASSERTION_ERROR":
        cls = AssertionError
    else:  # read as any global is: guarded
        cls = getattr(attributes.load_global(tx, insts[0].argval), "value", None)
    args = tuple(i.argval for i in insts if i.opname == "LOAD_CONST")
    calls = [i for i in insts if i.opname == "CALL"]
    call_last = calls[-1] is insts[-1] if calls else not args
    if not _plain_exception_class(cls) or len(calls) > 1 or not call_last \
            or not all(isinstance(a, (str, int, float, bool, type(None))) for a in args):
        raise Unsupported(TENSOR_CONTROL_FLOW, "the truth value of a tensor (a branch that"
                          " raises, but not a plain exception class made from constants)")
    condition = cond.value if raise_when else tx.ctx.builder.op("logical_not", cond.value)
    tx.ctx.add_raise_check(condition, cls, args)
    tx.ip = go_on
    return True


def load_assertion_error() -> ConstVar:
    return ConstVar(AssertionError)
