"""One handler per CPython 3.11 opcode, named as `dis` names it.

Owns: the stack effect of each supported instruction.  What a call, attribute
read or operator *means* is decided in refcomp/tracer/dispatch.py (calls),
attributes.py, containers.py and operators.py; this module only
moves values between the stack, locals, cells and the instruction pointer.
An opcode without a handler raises Unsupported(UNSUPPORTED_OPCODE).  Spec: spec/tracer.md,
"Supported opcodes" (rendered from FAMILIES below).
"""

from __future__ import annotations

import dis

import torch

from refcomp.reasons import (
    INEXPRESSIBLE_OP,
    TRACE_EXCEPTION,
    UNREPLAYABLE_SIDE_EFFECT,
    UNSUPPORTED_OPCODE,
    Raised,
    Unsupported,
)
from refcomp.sources import ConstSource, ItemSource
from refcomp.tracer import (
    attributes,
    classes,
    constructors,
    containers,
    copies,
    effects,
    facts,
    objects,
    operators,
    raise_checks,
    rng,
)
from refcomp.tracer.values import (
    NULL,
    CellVar,
    ConstVar,
    DictVar,
    ExitVar,
    FunctionVar,
    GradModeVar,
    ListVar,
    MadeObjectVar,
    ModelOutputVar,
    ObjectVar,
    TupleVar,
    as_python,
)

# BINARY_OP's oparg indexes this table (CPython's NB_* order); 13.. are the `x op= y` forms.
NB_OPS = [sym for _, sym in dis._nb_ops]


class OpcodeHandlers:
    # --- no-ops -----------------------------------------------------------------------------
    def NOP(self, inst):
        pass

    RESUME = NOP
    CACHE = NOP
    EXTENDED_ARG = NOP

    # --- stack shuffles ---------------------------------------------------------------------
    def POP_TOP(self, inst):
        self.pop()

    def PUSH_NULL(self, inst):
        self.push(NULL)

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        i = inst.arg
        self.stack[-1], self.stack[-i] = self.stack[-i], self.stack[-1]

    # --- locals, constants, globals, cells --------------------------------------------------
    def LOAD_CONST(self, inst):
        self.push(ConstVar(inst.argval))

    def LOAD_FAST(self, inst):
        if inst.argval not in self.locals:
            raise Unsupported(TRACE_EXCEPTION, f"local {inst.argval!r} read before assignment")
        self.push(self.locals[inst.argval])

    def STORE_FAST(self, inst):
        self.locals[inst.argval] = self.pop()

    def DELETE_FAST(self, inst):
        self.locals.pop(inst.argval, None)

    def LOAD_GLOBAL(self, inst):
        if inst.arg & 1:
            self.push(NULL)
        self.push(attributes.load_global(self, inst.argval))

    def STORE_GLOBAL(self, inst):
        # Replayed after the graph; this trace reads the value back (Note [Replayed side
        # effects], refcomp/tracer/effects.py).
        value = self.stack[-1]
        effects.record(self, "setglobal", self.globals_source, inst.argval, [value],
                       what=f"global {inst.argval} = ...")
        self.ctx.global_writes[(id(self.f_globals), inst.argval)] = self.pop()

    def MAKE_CELL(self, inst):
        name = inst.argval
        self.cells[name] = CellVar(self.locals.pop(name, None))

    def COPY_FREE_VARS(self, inst):
        pass  # the closure cells were bound when the frame was created

    # --- class bodies (Note [Classes made in the frame], classes.py) -----------------------
    def LOAD_BUILD_CLASS(self, inst):
        self.push(ConstVar(classes.BUILD_CLASS))

    def LOAD_NAME(self, inst):
        if not getattr(self, "class_body", False):
            raise Unsupported(UNSUPPORTED_OPCODE, "opcode LOAD_NAME outside a class body")
        if inst.argval in self.locals:
            self.push(self.locals[inst.argval])
        else:
            self.push(attributes.load_global(self, inst.argval))

    def STORE_NAME(self, inst):
        if not getattr(self, "class_body", False):
            raise Unsupported(UNSUPPORTED_OPCODE, "opcode STORE_NAME outside a class body")
        self.locals[inst.argval] = self.pop()

    def LOAD_CLOSURE(self, inst):
        self.push(self.cells[inst.argval])

    def LOAD_DEREF(self, inst):
        cell = self.cells[inst.argval]
        if cell.contents is None:
            raise Unsupported(TRACE_EXCEPTION,
                              f"free variable {inst.argval!r} read before assignment")
        self.push(cell.contents)

    def STORE_DEREF(self, inst):
        cell = self.cells[inst.argval]
        if cell.real:  # a real cell: the store is replayed after the graph
            if cell.cell_source is None:
                raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                                  f"assignment to closure variable {inst.argval!r}")
            target = ConstVar(cell.cell, cell.cell_source)
            effects.record(self, "setattr", target, "cell_contents", [self.stack[-1]],
                           what=f"assignment to closure variable {inst.argval!r}")
        cell.contents = self.pop()

    # --- attributes and items ---------------------------------------------------------------
    def LOAD_ATTR(self, inst):
        self.push(attributes.load_attr(self, self.pop(), inst.argval))

    def LOAD_METHOD(self, inst):
        # Always the [NULL, bound callable] form: CALL treats both forms alike.
        obj = self.pop()
        self.push(NULL)
        self.push(attributes.load_attr(self, obj, inst.argval))

    def IMPORT_NAME(self, inst):
        # `import m` / `from m import x` inside library code: a module already imported is
        # only looked up (no side effect); importing a new one would run its code.
        import sys

        fromlist = as_python(self.pop())
        level = as_python(self.pop())
        name = inst.argval
        if level != 0 or name not in sys.modules:
            raise Unsupported(UNSUPPORTED_OPCODE, f"IMPORT_NAME {name!r} (relative, or not yet"
                                       " imported)")
        top = name if fromlist else name.split(".")[0]
        # Read from sys.modules under a guard, like a module reached through a global: its
        # attributes the code reads are guarded too (`import cfg; cfg.SCALE`).
        source = ItemSource(ConstSource(sys.modules, "sys.modules"), top)
        self.push(self.ctx.wrap(sys.modules[top], source))

    def IMPORT_FROM(self, inst):
        module = self.stack[-1]
        self.push(attributes.load_attr(self, module, inst.argval))

    def STORE_ATTR(self, inst):
        obj, value = self.stack[-1], self.stack[-2]
        name = inst.argval
        if isinstance(obj, classes.FunctionCtxVar):  # ctx.k = v in a custom Function
            self.popn(2)
            obj.attrs[name] = value
            return
        if isinstance(obj, ModelOutputVar):  # made by the trace: changed symbolically
            constructors.set_model_output_attr(obj, name, value)
            self.popn(2)
            return
        if isinstance(obj, ObjectVar):  # Note [Objects made in the frame]
            objects.store_attr(obj, name, value)
            self.popn(2)
            return
        if type(obj) is MadeObjectVar and not isinstance(obj.value, torch.nn.Module):
            copies.set_attr(self, obj, name, value)  # Note [Deep copies]
            self.popn(2)
            return
        if attributes.traced_store(self, obj, name, value):  # runs the class's own code
            self.popn(2)
            return
        if effects.stores_itself(obj, name, value):
            self.popn(2)
            return
        if not isinstance(obj, ConstVar) or obj.source is None or \
                effects.is_tensor_module_attr(obj.value, name) or \
                isinstance(getattr(type(obj.value), name, None), property):
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                              f"assignment to attribute {name!r} of {obj!r}")
        # Replayed after the graph (setattr runs nn.Module.__setattr__ as eager does);
        # this trace reads the value back (Note [Replayed side effects]).
        effects.record(self, "setattr", obj, name, [value],
                       what=f"{obj.source.name()}.{name} = ...")
        self.ctx.attr_writes[(id(obj.value), name)] = value
        self.popn(2)

    def DELETE_ATTR(self, inst):
        obj = self.pop()
        self.call_function(ConstVar(delattr), [obj, ConstVar(inst.argval)], {})

    def BINARY_SUBSCR(self, inst):
        index = self.pop()
        obj = self.pop()
        self.push(containers.getitem(self, obj, index))

    def STORE_SUBSCR(self, inst):
        index, obj, value = self.pop(), self.pop(), self.pop()
        containers.setitem(self, obj, index, value)

    def DELETE_SUBSCR(self, inst):
        index, obj = self.pop(), self.pop()
        containers.delitem(self, obj, index)

    # --- operators --------------------------------------------------------------------------
    def BINARY_OP(self, inst):
        b, a = self.pop(), self.pop()
        sym = NB_OPS[inst.arg]
        if sym.endswith("=") and sym not in ("==",):
            self.push(operators.inplace_binary(self, sym[:-1], a, b))
        else:
            self.push(operators.binary(self, sym, a, b))

    def COMPARE_OP(self, inst):
        b, a = self.pop(), self.pop()
        self.push(operators.binary(self, inst.argval, a, b))

    def IS_OP(self, inst):
        b, a = self.pop(), self.pop()
        result = operators.is_same(a, b, self.ctx)
        self.push(ConstVar(result != bool(inst.arg)))

    def CONTAINS_OP(self, inst):
        container, item = self.pop(), self.pop()
        result = containers.contains(self, container, item)
        self.push(ConstVar(result != bool(inst.arg)))

    def UNARY_NEGATIVE(self, inst):
        self.push(operators.unary(self, "neg", self.pop()))

    def UNARY_POSITIVE(self, inst):
        self.push(operators.unary(self, "pos", self.pop()))

    def UNARY_INVERT(self, inst):
        self.push(operators.unary(self, "invert", self.pop()))

    def UNARY_NOT(self, inst):
        self.push(ConstVar(not operators.truth(self, self.pop())))

    # --- building containers ----------------------------------------------------------------
    def BUILD_TUPLE(self, inst):
        self.push(TupleVar(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(ListVar(self.popn(inst.arg)))

    def BUILD_SET(self, inst):
        # A set of constants (`dtype in {torch.half, torch.bfloat16}`): a real set.  Items
        # that are tensors or other traced values have no hashable value here: RB013.
        items = self.popn(inst.arg)
        try:
            values = [as_python(i) for i in items]
            if any(getattr(v, "free_symbols", None) for v in values):
                raise TypeError  # {s0, 3}: whether they collapse depends on s0's value
            self.push(ConstVar(set(values)))
        except TypeError:
            raise Unsupported(INEXPRESSIBLE_OP, "a set of values that are not constants") from None

    def BUILD_MAP(self, inst):
        items = self.popn(2 * inst.arg)
        self.push(DictVar({operators.key_of(self, items[i]): items[i + 1]
                           for i in range(0, len(items), 2)}))

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = as_python(self.pop())
        values = self.popn(inst.arg)
        self.push(DictVar(dict(zip(keys, values))))

    def BUILD_SLICE(self, inst):
        parts = [as_python(facts.require_const(self, v, "slice bound"))
                 for v in self.popn(inst.arg)]
        self.push(ConstVar(slice(*parts)))

    def BUILD_STRING(self, inst):
        parts = [as_python(v) for v in self.popn(inst.arg)]
        self.push(ConstVar("".join(parts)))

    def FORMAT_VALUE(self, inst):
        spec = as_python(self.pop()) if (inst.arg & 0x04) else ""
        value = facts.require_const(self, self.pop(), "f-string value")
        value = operators.plain(self, value)  # "s0" is no size's text
        conv = {1: str, 2: repr, 3: ascii}.get(inst.arg & 0x03)
        self.push(ConstVar(format(conv(value) if conv else value, spec)))

    def LIST_APPEND(self, inst):
        item = self.pop()
        self.stack[-inst.arg].items.append(item)

    def LIST_EXTEND(self, inst):
        items = containers.iterate(self, self.pop())
        self.stack[-inst.arg].items.extend(items)

    def LIST_TO_TUPLE(self, inst):
        self.push(TupleVar(self.pop().items))

    def MAP_ADD(self, inst):
        value, key = self.pop(), self.pop()
        self.stack[-inst.arg].items[operators.key_of(self, key)] = value

    def DICT_UPDATE(self, inst):
        other = self.pop()
        if not isinstance(other, DictVar):
            raise Unsupported(INEXPRESSIBLE_OP, f"dict update with {other!r}")
        self.stack[-inst.arg].items.update(other.items)

    def DICT_MERGE(self, inst):
        # `f(k=1, **kw)`: a key given twice (or not a string) is CPython's TypeError naming
        # the callee (below the positional tuple and the dict on the stack).  Raised here
        # as eager raises it: a break at this instruction would lose the callee's place
        # and raise CPython's inner KeyError instead.
        other, target = self.stack[-1], self.stack[-inst.arg - 1]
        if isinstance(other, DictVar) and isinstance(target, DictVar):
            twice = [k for k in other.items if k in target.items]
            bad = [k for k in other.items if not isinstance(k, str)]
            if twice or bad:
                fn = self.stack[-inst.arg - 3]
                if isinstance(fn, FunctionVar):
                    module, qualname = fn.f_globals.get("__name__"), fn.code.co_qualname
                elif isinstance(fn, ConstVar) and hasattr(fn.value, "__qualname__"):
                    module = getattr(fn.value, "__module__", None)
                    qualname = fn.value.__qualname__
                else:
                    raise Unsupported(TRACE_EXCEPTION, "keyword argument given twice")
                name = f"{module}.{qualname}()" if isinstance(module, str) and \
                    module != "builtins" else f"{qualname}()"
                text = f"{name} keywords must be strings" if bad else \
                    f"{name} got multiple values for keyword argument '{twice[0]}'"
                raise Raised(TypeError(text), f"TypeError: {text}")
        self.DICT_UPDATE(inst)

    def UNPACK_SEQUENCE(self, inst):
        items = containers.iterate(self, self.pop())
        if len(items) != inst.arg:
            raise Unsupported(TRACE_EXCEPTION, f"cannot unpack {len(items)} values into {inst.arg}")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst):
        items = containers.iterate(self, self.pop())
        before, after = inst.arg & 0xFF, inst.arg >> 8
        if len(items) < before + after:
            raise Unsupported(TRACE_EXCEPTION, "not enough values to unpack")
        middle = ListVar(items[before:len(items) - after])
        for item in reversed(items[len(items) - after:]):
            self.push(item)
        self.push(middle)
        for item in reversed(items[:before]):
            self.push(item)

    # --- calls ------------------------------------------------------------------------------
    def KW_NAMES(self, inst):
        self.kw_names = self.code.co_consts[inst.arg]

    def PRECALL(self, inst):
        pass

    def CALL(self, inst):
        args = self.popn(inst.arg)
        fn, first = self.pop(), self.pop()
        if first is not NULL:  # [method, self, args] form
            fn, args = first, [fn] + args
        kw_names, self.kw_names = self.kw_names, ()
        kwargs = {}
        if kw_names:
            kwargs = dict(zip(kw_names, args[len(args) - len(kw_names):]))
            args = args[:len(args) - len(kw_names)]
        self.push(self.call_function(fn, args, kwargs))

    def CALL_FUNCTION_EX(self, inst):
        kwargs = self.pop() if inst.arg & 1 else DictVar({})
        args = self.pop()
        fn = self.pop()
        if self.stack and self.stack[-1] is NULL:
            self.pop()
        if not isinstance(kwargs, DictVar):
            raise Unsupported(INEXPRESSIBLE_OP, "**kwargs that is not a dict")
        self.push(self.call_function(fn, containers.iterate(self, args), dict(kwargs.items)))

    def MAKE_FUNCTION(self, inst):
        code = self.pop().value
        closure = self.pop().items if inst.arg & 0x08 else ()
        if inst.arg & 0x04:
            self.pop()  # annotations: not needed to run the function
        kwdefaults = _dict_items(self.pop()) if inst.arg & 0x02 else {}
        defaults = tuple(_seq_items(self.pop())) if inst.arg & 0x01 else ()
        self.push(FunctionVar(code, self.f_globals, defaults, kwdefaults, tuple(closure),
                              code.co_name, self.globals_source))

    def RETURN_VALUE(self, inst):
        self.return_(self.pop())

    # --- jumps and loops --------------------------------------------------------------------
    def JUMP_FORWARD(self, inst):
        self.jump(inst)

    JUMP_BACKWARD = JUMP_FORWARD
    JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD

    def _jump_if(self, inst, predicate):
        if predicate(self.pop()):
            self.jump(inst)

    def _jump_on_truth(self, inst, jumps_when: bool):
        value = self.pop()
        if raise_checks.branch(self, inst, value, jumps_when):  # Note [Raising branches]
            return
        if bool(operators.truth(self, value)) == jumps_when:
            self.jump(inst)

    def POP_JUMP_FORWARD_IF_TRUE(self, inst):
        self._jump_on_truth(inst, True)

    def POP_JUMP_FORWARD_IF_FALSE(self, inst):
        self._jump_on_truth(inst, False)

    def POP_JUMP_FORWARD_IF_NONE(self, inst):
        self._jump_if(inst, lambda v: operators.is_same(v, ConstVar(None)))

    def POP_JUMP_FORWARD_IF_NOT_NONE(self, inst):
        self._jump_if(inst, lambda v: not operators.is_same(v, ConstVar(None)))

    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE
    POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE
    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_FORWARD_IF_NONE
    POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE

    def JUMP_IF_TRUE_OR_POP(self, inst):
        if operators.truth(self, self.stack[-1]):
            self.jump(inst)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst):
        if not operators.truth(self, self.stack[-1]):
            self.jump(inst)
        else:
            self.pop()

    def GET_ITER(self, inst):
        self.push(containers.iterator_of(self, self.pop()))

    # --- generator expressions (Note [Generator expressions], values.py) -----------------
    def RETURN_GENERATOR(self, inst):
        self.push(ConstVar(None))  # popped by the POP_TOP that follows

    def YIELD_VALUE(self, inst):
        value = self.pop()
        self.push(ConstVar(None))  # what `send` delivers: next() sends None
        self.yield_(value)

    def FOR_ITER(self, inst):
        item = self.stack[-1].next()
        if item is None:
            self.pop()
            self.jump(inst)
        else:
            self.push(item)

    # --- exceptions (Note [Exceptions inside inlined frames], frame.py) -------------------
    def RAISE_VARARGS(self, inst):
        if inst.arg == 0:
            raise Unsupported(UNSUPPORTED_OPCODE, "bare `raise` outside an exception handler")
        cause = self.pop() if inst.arg == 2 else None
        exc = self.pop()
        value = exc.value if isinstance(exc, ConstVar) else None
        if isinstance(value, type) and issubclass(value, BaseException):
            value = constructors.new_exception(self, exc, [], {}).value
        if not isinstance(value, BaseException):
            raise Unsupported(TRACE_EXCEPTION, f"raise of {exc!r}")
        if cause is not None:
            cause_value = as_python(cause)
            value.__cause__ = cause_value  # `from None` also suppresses the context
            value.__suppress_context__ = True
        raise Raised(value, f"{type(value).__name__}: {value}")

    def LOAD_ASSERTION_ERROR(self, inst):
        self.push(raise_checks.load_assertion_error())

    def RERAISE(self, inst):
        exc = self.pop()
        if inst.arg:
            self.pop()  # the saved f_lasti
        if not (isinstance(exc, ConstVar) and isinstance(exc.value, BaseException)):
            raise Unsupported(UNSUPPORTED_OPCODE, "RERAISE of an exception the trace did not raise")
        raise Raised(exc.value, f"{type(exc.value).__name__}: {exc.value}")

    def PUSH_EXC_INFO(self, inst):
        exc = self.pop()
        self.push(ConstVar(None))  # the exception being handled before: none while tracing
        self.push(exc)

    def POP_EXCEPT(self, inst):
        self.pop()

    def CHECK_EXC_MATCH(self, inst):
        match = as_python(self.pop())
        exc = self.stack[-1]
        self.push(ConstVar(isinstance(exc.value, match)))

    # --- with blocks (grad mode, freeze_rng_state) ----------------------------------------
    def BEFORE_WITH(self, inst):
        ctx_vt = self.pop()
        if isinstance(ctx_vt, rng.RngFreezeVar):  # Note [Random stream in program order]
            self.push(ctx_vt.enter(self.ctx))
            self.push(ConstVar(None))
            return
        if not isinstance(ctx_vt, GradModeVar):
            raise Unsupported(INEXPRESSIBLE_OP, f"`with` on {ctx_vt!r}: only grad-mode contexts and"
                                       " freeze_rng_state")
        previous = ctx_vt.previous if ctx_vt.applied else self.ctx.grad_enabled
        self.ctx.set_grad_enabled(ctx_vt.enabled)
        self.push(ExitVar(previous))
        self.push(ConstVar(None))


def _seq_items(vt) -> list:
    # A constant tuple (LOAD_CONST (2, 3)) or a built one (BUILD_TUPLE).
    return [ConstVar(v) for v in vt.value] if isinstance(vt, ConstVar) else list(vt.items)


def _dict_items(vt) -> dict:
    return {k: ConstVar(v) for k, v in vt.value.items()} if isinstance(vt, ConstVar) \
        else dict(vt.items)


# The supported opcodes by family, with what a reader must know beyond "traced"; rendered
# into spec/tracer.md, "Supported opcodes" and checked against the handlers above by
# tests/test_spec_tables.py (a handler missing here, or a name here without one, fails).
FAMILIES = (
    ("no-ops", "NOP RESUME CACHE EXTENDED_ARG PRECALL COPY_FREE_VARS", ""),
    ("stack", "POP_TOP PUSH_NULL COPY SWAP", ""),
    ("names", "LOAD_CONST LOAD_FAST STORE_FAST DELETE_FAST LOAD_GLOBAL STORE_GLOBAL",
     "`STORE_GLOBAL` is replayed after the graph"),
    ("cells", "MAKE_CELL LOAD_CLOSURE LOAD_DEREF STORE_DEREF",
     "`STORE_DEREF` into a real closure cell: replayed after the graph"),
    ("imports", "IMPORT_NAME IMPORT_FROM",
     "absolute imports of a module already in `sys.modules`, read from there under an"
     " identity guard (its attributes are guarded like a global module's); else RB001"),
    ("attributes, items", "LOAD_ATTR LOAD_METHOD STORE_ATTR DELETE_ATTR BINARY_SUBSCR"
     " STORE_SUBSCR DELETE_SUBSCR",
     "stores into outliving objects are replayed; `DELETE_ATTR` only on objects the frame"
     " made or copied"),
    ("operators", "BINARY_OP COMPARE_OP IS_OP CONTAINS_OP UNARY_NEGATIVE UNARY_POSITIVE"
     " UNARY_INVERT UNARY_NOT",
     "`BINARY_OP`: all 26 forms; `x op= y` on a tensor is the in-place method"),
    ("containers", "BUILD_TUPLE BUILD_LIST BUILD_SET BUILD_MAP BUILD_CONST_KEY_MAP BUILD_SLICE"
     " BUILD_STRING FORMAT_VALUE LIST_APPEND LIST_EXTEND LIST_TO_TUPLE MAP_ADD DICT_UPDATE"
     " DICT_MERGE UNPACK_SEQUENCE UNPACK_EX",
     "`BUILD_SET` of constants only (a tensor or a dynamic size: RB013)"),
    ("calls", "KW_NAMES CALL CALL_FUNCTION_EX MAKE_FUNCTION RETURN_VALUE", ""),
    ("classes", "LOAD_BUILD_CLASS LOAD_NAME STORE_NAME",
     "`LOAD_NAME` and `STORE_NAME` only in a class body (Note [Classes made in the frame])"),
    ("jumps", "JUMP_FORWARD JUMP_BACKWARD JUMP_BACKWARD_NO_INTERRUPT POP_JUMP_FORWARD_IF_TRUE"
     " POP_JUMP_FORWARD_IF_FALSE POP_JUMP_FORWARD_IF_NONE POP_JUMP_FORWARD_IF_NOT_NONE"
     " POP_JUMP_BACKWARD_IF_TRUE POP_JUMP_BACKWARD_IF_FALSE POP_JUMP_BACKWARD_IF_NONE"
     " POP_JUMP_BACKWARD_IF_NOT_NONE JUMP_IF_TRUE_OR_POP JUMP_IF_FALSE_OR_POP",
     "a jump on a tensor's value: RB003, except a branch whose one side only raises (a"
     " runtime check: Note [Raising branches], spec/correctness.md)"),
    ("loops", "GET_ITER FOR_ITER", ""),
    ("generator expressions", "RETURN_GENERATOR YIELD_VALUE",
     "only in a `(e for x in it)` frame (Note [Generator expressions])"),
    ("with", "BEFORE_WITH",
     "grad-mode contexts and `freeze_rng_state` (others: RB013); the exit call is an"
     " ordinary `CALL`"),
    ("exceptions", "LOAD_ASSERTION_ERROR RAISE_VARARGS RERAISE PUSH_EXC_INFO POP_EXCEPT"
     " CHECK_EXC_MATCH",
     "handlers of inlined frames (Note [Exceptions inside inlined frames])"),
)
