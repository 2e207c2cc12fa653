"""Concrete execution of CPython 3.11 instructions on real values (the resume machine's hands).

Owns: `Frame` (a real frame state: locals, value stack, instruction index, pending
keyword names), `execute` (one instruction, exactly as CPython would run it), `step`
(run the cheap, graph-free instructions that follow a graph break, so the next
resume point starts where tensor work starts again) and `CONCRETE_OPS` (what
`execute` covers; a frame with any other opcode is never split, see
refcomp/resume.py).  Must not know tracing, guards or graphs.  Spec:
spec/runtime.md, "Executing the breaking instruction".

The stack follows the tracer's conventions, so states move between the two: a
call site holds `[NULL, callable, args...]` (LOAD_METHOD always pushes NULL and a
bound attribute), and NULL is the sentinel `NULL` below.
"""

from __future__ import annotations

import dis
import operator
import types

import torch

NULL = type("NULL", (), {"__repr__": lambda self: "NULL"})()

_CACHE: dict = {}  # code -> (instructions, offset -> index); same order as the tracer's


def instructions(code):
    cached = _CACHE.get(code)
    if cached is None:
        insts = list(dis.get_instructions(code))
        cached = (insts, {inst.offset: i for i, inst in enumerate(insts)})
        _CACHE[code] = cached
    return cached


class Frame:
    """A real frame state; `index` is the next instruction to execute."""

    def __init__(self, code, f_globals, f_builtins, closure, locals_, stack, index,
                 kw_names=()):
        self.code = code
        self.f_globals = f_globals
        self.f_builtins = f_builtins
        self.closure = closure or ()
        self.locals = locals_
        self.stack = stack
        self.index = index
        self.kw_names = kw_names
        self.insts, self.index_of = instructions(code)

    def pop(self):
        return self.stack.pop()

    def popn(self, n):
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def jump(self, inst):
        self.index = self.index_of[inst.argval]


class Returned(Exception):
    def __init__(self, value):
        self.value = value


_NB = []
for _name, _sym in dis._nb_ops:
    _base = _name[3:].replace("INPLACE_", "").lower()
    _base = {"add": "add", "and": "and_", "or": "or_", "floor_divide": "floordiv",
             "lshift": "lshift", "matrix_multiply": "matmul", "multiply": "mul",
             "remainder": "mod", "power": "pow", "rshift": "rshift", "subtract": "sub",
             "true_divide": "truediv", "xor": "xor"}[_base]
    _NB.append(getattr(operator, ("i" + _base.rstrip("_") if "INPLACE" in _name else _base)))
_CMP = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
        ">": operator.gt, ">=": operator.ge}


def execute(fr: Frame, inst) -> None:
    """Run `inst` (the instruction at fr.index) concretely; raises Returned on return."""
    fr.index += 1
    op, arg = inst.opname, inst.arg
    s = fr.stack
    if op in ("NOP", "RESUME", "CACHE", "EXTENDED_ARG", "PRECALL"):
        pass
    elif op == "POP_TOP":
        s.pop()
    elif op == "PUSH_NULL":
        s.append(NULL)
    elif op == "COPY":
        s.append(s[-arg])
    elif op == "SWAP":
        s[-1], s[-arg] = s[-arg], s[-1]
    elif op == "LOAD_CONST":
        s.append(inst.argval)
    elif op == "LOAD_FAST":
        if inst.argval not in fr.locals:
            raise UnboundLocalError(f"cannot access local variable {inst.argval!r} where it"
                                    " is not associated with a value")
        s.append(fr.locals[inst.argval])
    elif op == "STORE_FAST":
        fr.locals[inst.argval] = s.pop()
    elif op == "DELETE_FAST":
        del fr.locals[inst.argval]
    elif op == "LOAD_GLOBAL":
        if arg & 1:
            s.append(NULL)
        s.append(load_global(fr, inst.argval))
    elif op == "STORE_GLOBAL":
        fr.f_globals[inst.argval] = s.pop()
    elif op in ("LOAD_DEREF", "LOAD_CLOSURE"):
        cell = fr.closure[fr.code.co_freevars.index(inst.argval)]
        s.append(cell if op == "LOAD_CLOSURE" else cell.cell_contents)
    elif op == "COPY_FREE_VARS":
        pass
    elif op == "LOAD_ATTR":
        s.append(getattr(s.pop(), inst.argval))
    elif op == "LOAD_METHOD":
        obj = s.pop()
        s.append(NULL)
        s.append(getattr(obj, inst.argval))
    elif op == "STORE_ATTR":
        obj, value = s.pop(), s.pop()
        setattr(obj, inst.argval, value)
    elif op == "BINARY_SUBSCR":
        index, obj = s.pop(), s.pop()
        s.append(obj[index])
    elif op == "STORE_SUBSCR":
        index, obj, value = s.pop(), s.pop(), s.pop()
        obj[index] = value
    elif op == "DELETE_SUBSCR":
        index, obj = s.pop(), s.pop()
        del obj[index]
    elif op == "BINARY_OP":
        b, a = s.pop(), s.pop()
        s.append(_NB[arg](a, b))
    elif op == "COMPARE_OP":
        b, a = s.pop(), s.pop()
        s.append(_CMP[inst.argval](a, b))
    elif op == "IS_OP":
        b, a = s.pop(), s.pop()
        s.append((a is b) != bool(arg))
    elif op == "CONTAINS_OP":
        container, item = s.pop(), s.pop()
        s.append((item in container) != bool(arg))
    elif op == "UNARY_NEGATIVE":
        s.append(-s.pop())
    elif op == "UNARY_POSITIVE":
        s.append(+s.pop())
    elif op == "UNARY_INVERT":
        s.append(~s.pop())
    elif op == "UNARY_NOT":
        s.append(not s.pop())
    elif op == "BUILD_TUPLE":
        s.append(tuple(fr.popn(arg)))
    elif op == "BUILD_LIST":
        s.append(fr.popn(arg))
    elif op == "BUILD_MAP":
        items = fr.popn(2 * arg)
        s.append({items[i]: items[i + 1] for i in range(0, len(items), 2)})
    elif op == "BUILD_CONST_KEY_MAP":
        keys = s.pop()
        s.append(dict(zip(keys, fr.popn(arg))))
    elif op == "BUILD_SLICE":
        s.append(slice(*fr.popn(arg)))
    elif op == "BUILD_STRING":
        s.append("".join(fr.popn(arg)))
    elif op == "FORMAT_VALUE":
        spec = s.pop() if arg & 0x04 else ""
        value = s.pop()
        conv = {1: str, 2: repr, 3: ascii}.get(arg & 0x03)
        s.append(format(conv(value) if conv else value, spec))
    elif op == "LIST_APPEND":
        item = s.pop()
        s[-arg].append(item)
    elif op == "LIST_EXTEND":
        items = s.pop()
        s[-arg].extend(items)
    elif op == "LIST_TO_TUPLE":
        s.append(tuple(s.pop()))
    elif op == "MAP_ADD":
        value, key = s.pop(), s.pop()
        s[-arg][key] = value
    elif op in ("DICT_UPDATE", "DICT_MERGE"):
        other = s.pop()
        s[-arg].update(other)
    elif op == "UNPACK_SEQUENCE":
        items = list(s.pop())
        if len(items) != arg:
            raise ValueError(f"cannot unpack {len(items)} values into {arg}")
        s.extend(reversed(items))
    elif op == "UNPACK_EX":
        items = list(s.pop())
        before, after = arg & 0xFF, arg >> 8
        if len(items) < before + after:
            raise ValueError("not enough values to unpack")
        s.extend(reversed(items[len(items) - after:]))
        s.append(items[before:len(items) - after])
        s.extend(reversed(items[:before]))
    elif op == "KW_NAMES":
        fr.kw_names = fr.code.co_consts[arg]
    elif op == "CALL":
        args = fr.popn(arg)
        fn, first = s.pop(), s.pop()
        if first is not NULL:
            fn, args = first, [fn] + args
        kw, fr.kw_names = fr.kw_names, ()
        kwargs = {}
        if kw:
            kwargs = dict(zip(kw, args[len(args) - len(kw):]))
            args = args[:len(args) - len(kw)]
        s.append(fn(*args, **kwargs))
    elif op == "CALL_FUNCTION_EX":
        kwargs = s.pop() if arg & 1 else {}
        args, fn = s.pop(), s.pop()
        if s and s[-1] is NULL:
            s.pop()
        s.append(fn(*args, **kwargs))
    elif op == "MAKE_FUNCTION":
        code = s.pop()
        closure = s.pop() if arg & 0x08 else None
        annotations = s.pop() if arg & 0x04 else None
        kwdefaults = s.pop() if arg & 0x02 else None
        defaults = s.pop() if arg & 0x01 else None
        fn = types.FunctionType(code, fr.f_globals, code.co_name, defaults, closure)
        fn.__kwdefaults__, fn.__qualname__ = kwdefaults, code.co_qualname
        if annotations is not None:
            fn.__annotations__ = dict(zip(annotations[::2], annotations[1::2])) \
                if isinstance(annotations, tuple) else annotations
        s.append(fn)
    elif op == "RETURN_VALUE":
        raise Returned(s.pop())
    elif op in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"):
        fr.jump(inst)
    elif op.startswith("POP_JUMP_"):
        value = s.pop()
        if op.endswith("_IF_TRUE"):
            taken = bool(value)
        elif op.endswith("_IF_FALSE"):
            taken = not value
        elif op.endswith("_IF_NOT_NONE"):
            taken = value is not None
        else:
            taken = value is None
        if taken:
            fr.jump(inst)
    elif op in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
        if bool(s[-1]) == (op == "JUMP_IF_TRUE_OR_POP"):
            fr.jump(inst)
        else:
            s.pop()
    elif op == "BEFORE_WITH":
        cm = s.pop()
        if type(cm) not in GRAD_CONTEXTS:  # refcomp.resume.resumable admits no other `with`
            raise RuntimeError(f"refcomp: `with` on {type(cm).__name__} in a split frame")
        s.append(cm.__exit__)
        s.append(cm.__enter__())
    elif op == "GET_ITER":
        s.append(iter(s.pop()))
    elif op == "FOR_ITER":
        try:
            s.append(next(s[-1]))
        except StopIteration:
            s.pop()
            fr.jump(inst)
    else:
        raise NotImplementedError(f"refcomp.concrete cannot execute {op}")


CONCRETE_OPS = frozenset(
    "NOP RESUME CACHE EXTENDED_ARG PRECALL POP_TOP PUSH_NULL COPY SWAP LOAD_CONST LOAD_FAST "
    "STORE_FAST DELETE_FAST LOAD_GLOBAL STORE_GLOBAL LOAD_DEREF LOAD_CLOSURE COPY_FREE_VARS "
    "LOAD_ATTR LOAD_METHOD STORE_ATTR BINARY_SUBSCR STORE_SUBSCR DELETE_SUBSCR BINARY_OP "
    "COMPARE_OP IS_OP CONTAINS_OP UNARY_NEGATIVE UNARY_POSITIVE UNARY_INVERT UNARY_NOT "
    "BUILD_TUPLE BUILD_LIST BUILD_MAP BUILD_CONST_KEY_MAP BUILD_SLICE BUILD_STRING "
    "FORMAT_VALUE LIST_APPEND LIST_EXTEND LIST_TO_TUPLE MAP_ADD DICT_UPDATE DICT_MERGE "
    "UNPACK_SEQUENCE UNPACK_EX KW_NAMES CALL CALL_FUNCTION_EX MAKE_FUNCTION RETURN_VALUE "
    "JUMP_FORWARD JUMP_BACKWARD JUMP_BACKWARD_NO_INTERRUPT POP_JUMP_FORWARD_IF_TRUE "
    "POP_JUMP_FORWARD_IF_FALSE POP_JUMP_FORWARD_IF_NONE POP_JUMP_FORWARD_IF_NOT_NONE "
    "POP_JUMP_BACKWARD_IF_TRUE POP_JUMP_BACKWARD_IF_FALSE POP_JUMP_BACKWARD_IF_NONE "
    "POP_JUMP_BACKWARD_IF_NOT_NONE JUMP_IF_TRUE_OR_POP JUMP_IF_FALSE_OR_POP GET_ITER "
    "FOR_ITER BEFORE_WITH".split())
# A `with` block's exception handler: never executed here (an exception leaves the
# machine; refcomp.resume.run restores the grad mode, as the handler's __exit__ would).
HANDLER_OPS = frozenset("PUSH_EXC_INFO WITH_EXCEPT_START RERAISE POP_EXCEPT".split())
GRAD_CONTEXTS = (torch.no_grad, torch.enable_grad)


def load_global(fr: Frame, name: str):
    if name in fr.f_globals:
        return fr.f_globals[name]
    if name in fr.f_builtins:
        return fr.f_builtins[name]
    raise NameError(f"name {name!r} is not defined")


# Note [Cheap steps]: after the breaking instruction, instructions that only move
# values, jump, advance a loop iterator or compute on plain Python numbers run here,
# concretely.  A resume point then starts where tensor work starts again, so a loop
# whose body breaks reuses one resume entry (its counter and iterator are never
# guarded), and a number read from `.item()` is never baked into a guard.
_MOVES = frozenset(
    "NOP RESUME CACHE EXTENDED_ARG POP_TOP LOAD_FAST LOAD_CONST STORE_FAST DELETE_FAST COPY "
    "SWAP JUMP_FORWARD JUMP_BACKWARD JUMP_BACKWARD_NO_INTERRUPT FOR_ITER RETURN_VALUE "
    "STORE_GLOBAL STORE_ATTR BUILD_TUPLE BUILD_LIST BUILD_CONST_KEY_MAP".split())
_PLAIN = (int, float, bool, str, type(None), complex)


def _plain(*values) -> bool:
    return all(isinstance(v, _PLAIN) for v in values)


def is_cheap(fr: Frame, inst, stored_globals, stored_attrs) -> bool:
    op, s = inst.opname, fr.stack
    if op in _MOVES:
        return True
    if op == "LOAD_GLOBAL":
        return inst.argval in stored_globals
    if op == "LOAD_ATTR":
        return inst.argval in stored_attrs and not isinstance(s[-1], torch.Tensor)
    if op in ("BINARY_OP", "COMPARE_OP"):
        return _plain(s[-1], s[-2])
    if op.startswith("POP_JUMP_") or op == "UNARY_NOT":
        return _plain(s[-1])
    return False


def step(fr: Frame, stored_globals=frozenset(), stored_attrs=frozenset()) -> None:
    """Execute cheap instructions (Note [Cheap steps]); raises Returned on return."""
    while is_cheap(fr, fr.insts[fr.index], stored_globals, stored_attrs):
        execute(fr, fr.insts[fr.index])
