"""Generated code objects for graph breaks: the frame's code re-entered at an instruction.

Owns: `analyze` (static facts about a CPython 3.11 code object: the stack depth and
which stack slots may hold NULL before each instruction, which locals are live, which
instructions run while an exception is being handled) and `generate` (a new code
object built with the `bytecode` library).  Must not know tracing, guards or graphs:
what to call at a resume stub is handed in.  Spec: spec/runtime.md, "Generated code".

Every generated code object is a copy of one *original* code object with a prologue:

    [COPY_FREE_VARS, MAKE_CELL..., RESUME]      the original's prefix (cells adjusted)
    LOAD_FAST ___stack0 ... (or PUSH_NULL)     the value stack at the target, from args
    LOAD_FAST ___cell_x; STORE_DEREF x         cell contents, where passed
    JUMP_FORWARD target
    ... the original's instructions, exception table included ...
    [stubs]                                    each: call a resume function, return

Its parameters are the stack values (`___stack{i}`), then the live locals under their own
names, then cell contents (`___cell_<name>`).  Because the original's instructions and
exception table are all there, jumping to an instruction inside a `try` or `with` block
re-enters that block: a raise is caught by the user's own handler, a `with` block's
`__exit__` (a value on the stack) runs on the way out.

Note [Stubs]: a stub replaces an instruction `j` reached natively after a break: the
code jumps to a block at the end (outside every exception-table range, so an
exception raised by the resume function is not handled twice) that packs the stack and
the live locals into a tuple and calls `resume(*values)`, returning its result.  Stubs
sit only where the state is plain: the first instruction of a source line, outside
exception handlers, where no stack slot may be NULL, where every live local is bound on
every path, and not at a FOR_ITER or bare jump (the loop step runs natively, so a loop
whose body breaks re-enters one resume function per iteration, never a new one).
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass, field

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

_NULL_PUSHERS = {"PUSH_NULL"}
_NO_STUB = {"FOR_ITER", "NOP", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
            "RESUME", "RETURN_VALUE", "POP_EXCEPT", "PUSH_EXC_INFO"}
_ANALYSES: dict = {}  # original code -> Analysis
GENERATED: dict = {}  # generated code -> (original code, {generated instr index: original})
LINES: dict = {}  # generated code -> the line it enters at


@dataclass
class Analysis:
    """Per-instruction facts of one code object (indices count `Instr`s in order)."""

    bytecode: Bytecode
    instrs: list  # Instr objects
    positions: list  # index in `bytecode` of each Instr
    succ: list  # normal successors (instruction indices)
    handler: list  # exception-handler target instruction index, or None
    handler_depth: list  # (stack depth kept, values pushed) at that handler's entry
    tags: list = field(default_factory=list)  # per instr: tuple of "N"/"V", or None
    live: list = field(default_factory=list)  # per instr: frozenset of live local names
    line_start: list = field(default_factory=list)
    in_handler: list = field(default_factory=list)  # runs with an exception being handled


def analyze(code: types.CodeType) -> Analysis:
    cached = _ANALYSES.get(code)
    if cached is not None:
        return cached
    bc = Bytecode.from_code(code)
    instrs, positions, label_at, try_of = [], [], {}, []
    pending_labels, current = [], None
    for pos, item in enumerate(bc):
        if isinstance(item, Label):
            pending_labels.append(item)
        elif isinstance(item, TryBegin):
            current = item
        elif isinstance(item, TryEnd):
            current = None
        elif isinstance(item, Instr):
            for lab in pending_labels:
                label_at[lab] = len(instrs)
            pending_labels = []
            instrs.append(item)
            positions.append(pos)
            try_of.append(current)
    for lab in pending_labels:
        label_at[lab] = len(instrs)
    n = len(instrs)
    # `bytecode` leaves TryBegin.stack_depth unset until to_code(): read CPython's table.
    table = dis._parse_exception_table(code)
    logical = [ins for ins in dis.get_instructions(code) if ins.opname != "EXTENDED_ARG"]
    assert len(logical) == n, (len(logical), n)
    depth_of = []
    for ins in logical:
        e = next((e for e in table if e.start <= ins.offset < e.end), None)
        depth_of.append((e.depth, int(e.lasti) + 1) if e is not None else (0, 0))
    succ, handler, handler_depth = [], [], []
    for i, ins in enumerate(instrs):
        s = []
        if ins.has_jump():
            s.append(label_at[ins.arg])
        if not (ins.is_uncond_jump() or ins.is_final()) and i + 1 < n:
            s.append(i + 1)
        succ.append(s)
        tb = try_of[i]
        if tb is None:
            handler.append(None)
            handler_depth.append((0, 0))
        else:
            handler.append(label_at[tb.target])
            handler_depth.append(depth_of[i])
    a = Analysis(bc, instrs, positions, succ, handler, handler_depth)
    a.tags = _stack_tags(a)
    a.live = _liveness(a)
    prev = None
    for ins in instrs:
        line = ins.lineno
        a.line_start.append(line is not None and line != prev)
        if line is not None:
            prev = line
    a.in_handler = _handler_regions(a)
    _ANALYSES[code] = a
    return a


def _apply(tags: tuple, ins: Instr, jump: bool) -> tuple:
    name = ins.name
    if name == "COPY":
        return tags + (tags[-ins.arg],)
    if name == "SWAP":
        t = list(tags)
        t[-1], t[-ins.arg] = t[-ins.arg], t[-1]
        return tuple(t)
    if name == "PUSH_NULL":
        return tags + ("N",)
    if name == "LOAD_GLOBAL" and ins.arg[0]:
        return tags + ("N", "V")
    if name == "LOAD_METHOD":
        return tags[:-1] + ("N", "V")
    if name in ("PRECALL", "KW_NAMES"):
        return tags  # 3.11's stack_effect books CALL's pops on PRECALL: see CALL
    if name == "CALL":
        return tags[:len(tags) - ins.arg - 2] + ("V",)
    if name == "CALL_FUNCTION_EX":
        return tags[:len(tags) - 3 - (ins.arg & 1)] + ("V",)
    net = ins.stack_effect(jump=jump)
    if net < 0:
        return tags[:len(tags) + net]
    return tags + ("V",) * net


def _stack_tags(a: Analysis) -> list:
    """Per instruction, the stack before it: "N" where a slot may hold NULL, else "V"."""
    tags: list = [None] * len(a.instrs)
    if not a.instrs:
        return tags
    tags[0] = ()
    todo = [0]
    while todo:
        i = todo.pop()
        before = tags[i]
        ins = a.instrs[i]
        for j in a.succ[i]:
            after = _apply(before, ins, jump=ins.has_jump() and j != i + 1)
            if tags[j] is None:
                tags[j] = after
                todo.append(j)
            elif tags[j] != after and len(tags[j]) == len(after):
                merged = tuple("N" if "N" in (x, y) else "V" for x, y in zip(tags[j], after))
                if merged != tags[j]:
                    tags[j] = merged
                    todo.append(j)
        h = a.handler[i]
        if h is not None:
            keep, pushed = a.handler_depth[i]
            entry = tuple(before[:keep]) + ("V",) * pushed
            if tags[h] is None:
                tags[h] = entry
                todo.append(h)
    return tags


def _uses_defs(ins: Instr):
    if ins.name == "LOAD_FAST":
        return ins.arg, None
    if ins.name in ("STORE_FAST", "DELETE_FAST"):
        return None, ins.arg
    return None, None


def _liveness(a: Analysis) -> list:
    n = len(a.instrs)
    live_in = [frozenset()] * n
    preds: list = [[] for _ in range(n)]
    for i in range(n):
        for j in a.succ[i] + ([a.handler[i]] if a.handler[i] is not None else []):
            preds[j].append(i)
    todo = list(range(n))
    while todo:
        i = todo.pop()
        out = set()
        for j in a.succ[i] + ([a.handler[i]] if a.handler[i] is not None else []):
            out |= live_in[j]
        use, kill = _uses_defs(a.instrs[i])
        if kill is not None:
            out.discard(kill)
        if use is not None:
            out.add(use)
        new = frozenset(out)
        if new != live_in[i]:
            live_in[i] = new
            todo.extend(preds[i])
    return live_in


def _handler_regions(a: Analysis) -> list:
    """Instructions that run while an exception is handled (handler entry to POP_EXCEPT)."""
    inside = [False] * len(a.instrs)
    todo = sorted({h for h in a.handler if h is not None})
    while todo:
        i = todo.pop()
        if inside[i]:
            continue
        inside[i] = True
        if a.instrs[i].name in ("POP_EXCEPT", "RERAISE"):
            continue
        todo.extend(a.succ[i])
    return inside


def bound_locals(a: Analysis, start: int, bound: frozenset) -> dict:
    """Per instruction reached from `start` (entered with `bound`): (locals bound on every
    path, locals bound on some path)."""
    state: dict = {start: (frozenset(bound), frozenset(bound))}
    todo = [start]
    while todo:
        i = todo.pop()
        must, may = state[i]
        ins = a.instrs[i]
        if ins.name == "STORE_FAST":
            after = (must | {ins.arg}, may | {ins.arg})
        elif ins.name == "DELETE_FAST":
            after = (must - {ins.arg}, may - {ins.arg})
        else:
            after = (must, may)
        nexts = [(j, after) for j in a.succ[i]]
        if a.handler[i] is not None:
            # An exception may leave before the store: the handler sees the state before.
            nexts.append((a.handler[i], (must, may)))
        for j, (m, y) in nexts:
            old = state.get(j)
            new = (m, y) if old is None else (old[0] & m, old[1] | y)
            if new != old:
                state[j] = new
                todo.append(j)
    return state


def stub_points(a: Analysis, start_succ: list, bound_at: dict) -> list:
    """Instructions reached natively from `start_succ` where a stub may sit (Note [Stubs]).

    A live local must be bound on every path there, or on none (then the resume function
    has it unbound too); one bound on some paths only keeps the code running natively.
    """
    points, seen, todo = [], set(), list(start_succ)
    while todo:
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        ins = a.instrs[j]
        tags = a.tags[j]
        must, may = bound_at.get(j, (frozenset(), frozenset()))
        if (a.line_start[j] and ins.name not in _NO_STUB and not a.in_handler[j]
                and tags is not None and "N" not in tags
                and not (a.live[j] & (may - must))):
            points.append(j)
            continue
        todo.extend(a.succ[j])
    return sorted(points)


@dataclass
class Stub:
    """At instruction `index`: return `target(*stack, [cells], *locals)` (Note [Stubs])."""

    index: int
    target: object  # a callable (refcomp.resume.ResumeFunction)
    kinds: tuple  # per stack slot: "arg", or "null" (a NULL, dropped: the callee re-pushes it)
    local_names: tuple
    pass_cells: bool  # the frame has cells: pass them all, as one tuple, after the stack


def cell_names(code) -> tuple:
    return tuple(code.co_cellvars) + tuple(code.co_freevars)


def generate(orig: types.CodeType, *, target: int, stack: list, local_names: tuple,
             cell_args: tuple = (), cells_free: bool, stubs: tuple = (),
             name: str = "") -> types.CodeType:
    """A copy of `orig` entered at instruction `target` (See the module docstring).

    stack: per slot "arg" (a parameter) or "null" (PUSH_NULL); cells_free: the original's
    cell variables become free variables, so the function is made with the cells of the
    frame it continues (a resume function) instead of fresh ones (the frame's own code).
    """
    a = analyze(orig)
    # A fresh copy (instructions are mutated below) that keeps each try block's stack depth
    # from the original's exception table: entered at `target`, a block whose start the
    # prologue jumps over is unreachable by normal flow, so `bytecode` could not compute
    # its depth and would write 32768 (a segfault when that handler runs).
    bc = Bytecode.from_code(orig, conserve_exception_block_stackdepth=True)
    items = list(bc)
    first_line = orig.co_firstlineno
    free = cell_names(orig) if cells_free else tuple(orig.co_freevars)

    def fix(ins):
        if cells_free and isinstance(ins.arg, CellVar):
            ins.arg = FreeVar(ins.arg.name)
        return ins

    # The prefix of the original (COPY_FREE_VARS, MAKE_CELL, RESUME), cells adjusted.
    prefix_end = next(i for i, ins in enumerate(a.instrs) if ins.name == "RESUME")
    prologue = []
    if free:
        prologue.append(Instr("COPY_FREE_VARS", len(free), lineno=first_line))
    if not cells_free:
        prologue += [Instr("MAKE_CELL", CellVar(c), lineno=first_line)
                     for c in orig.co_cellvars]
    prologue.append(Instr("RESUME", 0, lineno=first_line))
    for i, kind in enumerate(stack):
        prologue.append(Instr("PUSH_NULL", lineno=first_line) if kind == "null" else
                        Instr("LOAD_FAST", f"___stack{i}", lineno=first_line))
    for c in cell_args:
        prologue += [Instr("LOAD_FAST", f"___cell_{c}", lineno=first_line),
                     Instr("STORE_DEREF", CellVar(c), lineno=first_line)]
    enter = Label()
    prologue.append(Instr("JUMP_FORWARD", enter, lineno=first_line))

    by_index = {s.index: s for s in stubs}
    cell_refs = [FreeVar(c) if cells_free or c in orig.co_freevars else CellVar(c)
                 for c in cell_names(orig)]
    body, origin, tail = [], {}, []
    count = len(prologue)
    k = 0
    for p, item in enumerate(items):
        if not isinstance(item, Instr):
            body.append(item)
            continue
        i = k
        k += 1
        if i <= prefix_end:
            continue  # replaced by the prologue's prefix
        stub = by_index.get(i)
        if stub is not None:
            go = Label()
            body.append(Instr("JUMP_FORWARD", go, lineno=item.lineno))
            count += 1
            tail.append(go)
            tail += _stub_code(stub, item.lineno, cell_refs)
        if i == target:
            body.append(enter)
        origin[count] = i
        count += 1
        body.append(fix(item))
    new = Bytecode(prologue + body + tail)
    new.first_lineno = orig.co_firstlineno
    new.name = name or orig.co_name
    new.qualname = orig.co_qualname
    new.filename = orig.co_filename
    new.docstring = None
    params = [f"___stack{i}" for i, kind in enumerate(stack) if kind == "arg"] + \
        list(local_names) + \
        [f"___cell_{c}" for c in cell_args]
    new.argnames = params
    new.argcount = len(params)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.cellvars = [] if cells_free else list(orig.co_cellvars)
    new.freevars = list(free)
    new.flags = orig.co_flags & ~(0x04 | 0x08)  # no *args / **kwargs: all positional
    code = new.to_code(compute_exception_stack_depths=False)
    # `bytecode` sizes the stack along the paths from the entry; code reached only
    # through an exception handler (after a `with` block whose exception a resumed
    # instruction raised and the block suppressed) can need more (Note [Stack size]).
    code = code.replace(co_stacksize=max(code.co_stacksize, max_stack_depth(code)))
    check_code(code)
    GENERATED[code] = (orig, origin)
    LINES[code] = next((ins.lineno for ins in reversed(a.instrs[:target + 1])
                        if ins.lineno is not None), None)
    return code


class BadCode(AssertionError):
    """A generated code object CPython must not run (it would crash the interpreter)."""


# Note [Stack size]: CPython trusts co_stacksize; a frame that pushes past it writes over
# whatever follows its stack (found by the Python-level fuzzer: a generated resume function
# whose `with contextlib.suppress(KeyError)` swallowed the resumed instruction's KeyError
# went on in code only its exception handler reaches; `bytecode` had sized the stack for
# the other paths, 4 where 5 were needed, and a call there got a function for its
# argument).  `max_stack_depth` walks every path, exception edges included.
_UNCONDITIONAL = frozenset({"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"})
_ENDS = frozenset({"RETURN_VALUE", "RERAISE", "RAISE_VARARGS"})


def max_stack_depth(code: types.CodeType) -> int:
    """The deepest the value stack of `code` gets on any path from its entry, following
    jumps and exception-table edges."""
    instrs = list(dis.get_instructions(code))
    index = {ins.offset: i for i, ins in enumerate(instrs)}
    table = dis._parse_exception_table(code)
    seen: dict = {}
    work = [(0, 0)]
    deepest = 0
    while work:
        offset, depth = work.pop()
        i = index[offset]
        while i < len(instrs):
            ins = instrs[i]
            if seen.get(ins.offset, -1) >= depth:
                break
            seen[ins.offset] = depth
            for e in table:  # an exception here unwinds to e.depth, then lasti, then exc
                if e.start <= ins.offset < e.end:
                    work.append((e.target, e.depth + int(e.lasti) + 1))
            if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
                work.append((ins.argval, depth + dis.stack_effect(ins.opcode, ins.arg,
                                                                  jump=True)))
                if ins.opname in _UNCONDITIONAL:
                    break
                depth += dis.stack_effect(ins.opcode, ins.arg, jump=False)
            elif ins.opname in _ENDS:
                break
            else:
                depth += dis.stack_effect(ins.opcode, ins.arg)
            deepest = max(deepest, depth)
            i += 1
    return max([deepest] + [e.depth + int(e.lasti) + 1 for e in table])


def check_code(code: types.CodeType) -> None:
    """Raise BadCode unless every exception-table entry of `code` is one CPython can unwind
    to (a handler inside the code, a stack depth that is set and within `co_stacksize`)
    and no path pushes past `co_stacksize`.  Run on every generated code object before it
    can run (cheap: once per compile)."""
    size = len(code.co_code)
    for e in dis._parse_exception_table(code):
        if not (0 <= e.start < e.end <= size and 0 <= e.target < size):
            raise BadCode(f"{code.co_name}: exception-table entry {e} outside the code")
        if not 0 <= e.depth <= code.co_stacksize:
            raise BadCode(f"{code.co_name}: exception-table entry {e} has stack depth"
                          f" {e.depth}, outside 0..{code.co_stacksize}")
    needed = max_stack_depth(code)
    if needed > code.co_stacksize:
        raise BadCode(f"{code.co_name}: a path needs a stack of {needed}, co_stacksize is"
                      f" {code.co_stacksize}")


def resume_line(code):
    """The source line a generated code object continues at, or None if not generated."""
    return LINES.get(code)


def _stub_code(stub: Stub, lineno, cell_refs) -> list:
    """Pack the stack, cells and live locals into one tuple; call `stub.target` with it."""
    out = []
    kinds = list(stub.kinds)
    while "null" in kinds:  # POP_TOP cannot drop a NULL: a call of a no-op consumes it
        depth = len(kinds) - max(i for i, k in enumerate(kinds) if k == "null")
        out += [Instr("SWAP", d, lineno=lineno) for d in range(2, depth + 1)]
        kinds.pop(len(kinds) - depth)
        out += [Instr("LOAD_CONST", _drop_null, lineno=lineno),
                Instr("PRECALL", 0, lineno=lineno), Instr("CALL", 0, lineno=lineno),
                Instr("POP_TOP", lineno=lineno)]
    out += [Instr("BUILD_TUPLE", len(kinds), lineno=lineno),
           Instr("PUSH_NULL", lineno=lineno), Instr("SWAP", 2, lineno=lineno),
           Instr("LOAD_CONST", stub.target, lineno=lineno), Instr("SWAP", 2, lineno=lineno)]
    # [NULL, target, stack tuple]
    count = len(stub.local_names)
    if stub.pass_cells:
        out += [Instr("LOAD_CLOSURE", c, lineno=lineno) for c in cell_refs]
        out.append(Instr("BUILD_TUPLE", len(cell_refs), lineno=lineno))
        count += 1
    out += [Instr("LOAD_FAST", name, lineno=lineno) for name in stub.local_names]
    if count:
        out.append(Instr("BUILD_TUPLE", count, lineno=lineno))
        out.append(Instr("BINARY_OP", 0, lineno=lineno))  # stack tuple + the rest
    return out + [Instr("CALL_FUNCTION_EX", 0, lineno=lineno),
                  Instr("RETURN_VALUE", lineno=lineno)]


def _drop_null():
    """Called with the NULL below it as a stub's way to drop that NULL (Note [Stubs])."""


def original_index(code, index: int):
    """(original code, instruction index in it) of instruction `index` of `code`.

    `index` counts dis instructions (EXTENDED_ARG included), as the tracer does.
    """
    logical = sum(1 for ins in list(dis.get_instructions(code))[:index]
                  if ins.opname != "EXTENDED_ARG")
    if code in GENERATED:
        orig, origin = GENERATED[code]
        return orig, origin.get(logical)
    return code, logical
