"""The symbolic frame: stack, locals, cells, instruction pointer, and the run loop.

Owns: `InstructionTranslator` (one per traced or inlined frame): it walks the
instructions of a code object from `dis`, dispatching each to the handler of the
same name (refcomp/tracer/opcodes.py), and `trace`, the entry point that captures
a function call into a graph.  Calls are resolved by the table of callable kinds
(refcomp/tracer/dispatch.py).  The modules below the translator never import it: they
call back through `child`, `call_function` and `load_attr`.
Must not know guards' code generation or the cache.  Spec: spec/tracer.md.
"""

from __future__ import annotations

import dis
import inspect
import sys
from dataclasses import dataclass
from typing import Optional

from ir.builder import OpDTypeError
from refcomp.reasons import (
    GENERATOR_FRAME,
    INEXPRESSIBLE_OP,
    TOO_DEEP,
    TRACE_EXCEPTION,
    UNSUPPORTED_OPCODE,
    UNSUPPORTED_PYTHON,
    Raised,
    Unsupported,
)
from refcomp.sources import ClosureCellSource, ClosureSource, LocalSource
from refcomp.tracer import attributes, dispatch
from refcomp.tracer.context import TraceContext
from refcomp.tracer.facts import exception_table
from refcomp.tracer.opcodes import OpcodeHandlers
from refcomp.tracer.values import VT, ConstVar

MAX_INLINE_DEPTH = 32
_GENERATOR_FLAGS = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                    | inspect.CO_ITERABLE_COROUTINE)


class _Return(Exception):
    def __init__(self, value: VT):
        self.value = value


class _Yield(Exception):
    """YIELD_VALUE in a generator expression being advanced (Note [Generator expressions])."""

    def __init__(self, value: VT):
        self.value = value


_INSTRUCTIONS: dict = {}  # code object -> (instructions, offset -> index); code is immutable


def _instructions(code):
    cached = _INSTRUCTIONS.get(code)
    if cached is None:
        insts = list(dis.get_instructions(code))
        cached = (insts, {inst.offset: i for i, inst in enumerate(insts)})
        _INSTRUCTIONS[code] = cached
    return cached


def check_code_supported(code, *, generator: bool = False) -> None:
    """Reject frames the tracer cannot capture (version, generators; `generator=True`: a
    generator expression advanced lazily by its consumer is allowed).

    try/except/finally blocks are traced along their normal path: an exception cannot
    happen while tracing (a failing instruction is a graph break, run by CPython inside
    the frame's own handlers: spec/runtime.md).
    """
    if sys.version_info[:2] != (3, 11):
        err = Unsupported(UNSUPPORTED_PYTHON, f"running on Python {sys.version.split()[0]}")
    elif code.co_flags & _GENERATOR_FLAGS and not (
            generator and code.co_flags & _GENERATOR_FLAGS == inspect.CO_GENERATOR):
        err = Unsupported(GENERATOR_FRAME, f"{code.co_name} is a generator or coroutine")
    else:
        err = None
    if err is not None:
        err.locate(code.co_filename, code.co_firstlineno, "<frame>")
        raise err


def _line_of(insts, index) -> Optional[int]:
    for inst in reversed(insts[:index + 1]):
        if inst.starts_line is not None:
            return inst.starts_line
    return None


class InstructionTranslator(OpcodeHandlers):
    """Symbolically executes one code object; inlined calls get a child translator."""

    def __init__(self, ctx: TraceContext, code, f_globals, f_builtins, locals_: dict,
                 cells: dict, *, parent=None, globals_source=None, generator=False):
        check_code_supported(code, generator=generator)
        self.ctx = ctx
        self.code = code
        self.f_globals = f_globals
        self.f_builtins = f_builtins
        self.locals: dict = locals_  # name -> VT
        self.cells: dict = cells  # name -> CellVar (cellvars and freevars)
        self.stack: list = []
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.globals_source = globals_source  # None: the root function's globals (G)
        self.kw_names: tuple = ()
        self.instructions, self.index_of = _instructions(code)
        self.ip = 0
        self.current = None
        if self.depth > MAX_INLINE_DEPTH:
            raise Unsupported(TOO_DEEP, f"inlining {code.co_name} at depth {self.depth}")

    # --- what the modules below call back through ---------------------------------------
    def child(self, code, f_globals, locals_: dict, cells: dict, globals_source, *,
              generator=False) -> InstructionTranslator:
        """A translator for code this frame calls (an inlined function, a generator)."""
        return InstructionTranslator(self.ctx, code, f_globals, self.f_builtins, locals_, cells,
                                     parent=self, globals_source=globals_source,
                                     generator=generator)

    def call_function(self, fn: VT, args: list, kwargs: dict) -> VT:
        """`fn(*args, **kwargs)` as the table of callable kinds treats it."""
        return dispatch.call_function(self, fn, args, kwargs)

    def load_attr(self, obj: VT, name: str) -> VT:
        """`obj.name`, guarded where it is read."""
        return attributes.load_attr(self, obj, name)

    # --- the loop ---------------------------------------------------------------------------
    def run(self) -> VT:
        self.ctx.frames.append(self)
        try:
            while True:
                try:
                    self.step()
                except Raised as r:
                    if not self._enter_handler(r):
                        raise
        except _Return as r:
            return r.value
        except Unsupported as e:
            line = _line_of(self.instructions, self.ip - 1)
            e.locate(self.code.co_filename, line,
                     f"{self.current.opname} {self.current.argrepr}".strip())
            e.add_frame(self.code.co_name, self.code.co_filename, line)
            raise
        finally:
            self.ctx.frames.pop()

    def advance(self) -> Optional[VT]:
        """Run a generator frame to its next YIELD_VALUE: the value yielded, or None once
        it returned (Note [Generator expressions], refcomp/tracer/values.py)."""
        self.ctx.frames.append(self)
        try:
            while True:
                self.step()
        except _Yield as y:
            return y.value
        except _Return:
            return None
        except Unsupported as e:
            e.locate(self.code.co_filename, _line_of(self.instructions, self.ip - 1),
                     f"{self.current.opname} {self.current.argrepr}".strip())
            raise
        finally:
            self.ctx.frames.pop()

    # Note [Exceptions inside inlined frames]: library code asks "does this exist?" with
    # try/except -- `os.environ.get` is Mapping.get's `try: return self[key] except
    # KeyError: return default`, transformers' `is_cuda_stream_capturing` wraps a query
    # that raises on a CPU build in `except Exception: return False`.  When the traced code
    # raises as eager would (a `Raised`: the fact behind it is guarded, e.g. the key's
    # absence), an *inlined* frame whose exception table covers the instruction continues
    # at its handler exactly as CPython would: the stack cut to the entry's depth, the
    # exception pushed, and PUSH_EXC_INFO / CHECK_EXC_MATCH / POP_EXCEPT / RERAISE /
    # RAISE_VARARGS traced like other opcodes; without a handler it propagates to the
    # caller's CALL.  The compiled frame itself never enters a handler: there the
    # exception is a graph break and CPython runs the frame's own handlers (spec/runtime.md).
    def _enter_handler(self, r: Raised) -> bool:
        if self.parent is None or self.current is None:
            return False
        offset = self.current.offset
        for entry in exception_table(self.code):
            if entry.start <= offset < entry.end:
                del self.stack[entry.depth:]
                if entry.lasti:
                    self.push(ConstVar(offset))
                self.push(ConstVar(r.exc))
                self.ip = self.index_of[entry.target]
                return True
        return False

    def yield_(self, value: VT):
        raise _Yield(value)

    def step(self) -> None:
        """Execute the instruction at `ip` (subclasses wrap this, not the loop)."""
        inst = self.instructions[self.ip]
        self.current = inst
        self.ip += 1
        handler = getattr(self, inst.opname, None)
        if handler is None:
            raise Unsupported(UNSUPPORTED_OPCODE, f"opcode {inst.opname}")
        try:
            handler(inst)
        except OpDTypeError as e:  # a complex value for an op without the `complex` fact,
            # a u16/u32/u64 one for an op other than `aten` (ir/builder.py)
            raise Unsupported(INEXPRESSIBLE_OP, str(e)) from None

    def live_values(self):
        """Every symbolic value this frame can still reach (locals, cells, stack)."""
        yield from self.locals.values()
        yield from (c.contents for c in self.cells.values() if c.contents is not None)
        yield from self.stack

    def jump(self, inst) -> None:
        self.ip = self.index_of[inst.argval]

    def push(self, vt: VT) -> None:
        self.stack.append(vt)

    def pop(self) -> VT:
        return self.stack.pop()

    def popn(self, n: int) -> list:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def return_(self, value: VT):
        raise _Return(value)

    def location(self) -> str:
        line = _line_of(self.instructions, max(self.ip - 1, 0))
        return f"{self.code.co_filename}:{line}"


@dataclass
class TraceResult:
    ctx: TraceContext
    output: VT  # the frame's return value, symbolically


def trace(fn, bound_locals: dict, ctx: TraceContext) -> TraceResult:
    """Capture a call of the Python function `fn` with real argument values."""
    code = fn.__code__
    from refcomp.side_effects import mutated_containers
    from refcomp.tracer.effects import opaque_container

    mutated = mutated_containers(code)
    # An argument list/dict the code mutates: only its type is guarded (Note [Mutated
    # containers], refcomp/side_effects.py); its mutations are replayed.
    locals_ = {name: opaque_container(ctx, value, LocalSource(name))
               if name in mutated and type(value) in (list, dict)
               else ctx.wrap(value, LocalSource(name)) for name, value in bound_locals.items()}
    cells = {}
    for i, (name, cell) in enumerate(zip(code.co_freevars, fn.__closure__ or ())):
        try:
            cell.cell_contents
        except ValueError:  # an empty cell: reading it raises NameError in eager too
            raise Unsupported(TRACE_EXCEPTION, f"closure variable {name!r} is unbound") from None
        # a store into it is a replayed side effect
        cells[name] = ctx.real_cell(cell, ClosureSource(i, name), ClosureCellSource(i, name))
    builtins = fn.__globals__.get("__builtins__", __builtins__)
    if not isinstance(builtins, dict):
        builtins = builtins.__dict__
    tx = InstructionTranslator(ctx, code, fn.__globals__, builtins, locals_, cells)
    output = tx.run()
    return TraceResult(ctx, output)


def const(value) -> ConstVar:
    return ConstVar(value)
