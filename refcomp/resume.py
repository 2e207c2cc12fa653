"""Graph breaks run by CPython: generated code after the graph, resume functions after that.

Owns: `compile_break` (a frame whose trace stops at a break becomes an entry whose graph
computes the live tensors and whose generated code, refcomp/bytecode_gen.py, runs the
breaking instruction natively and calls resume functions), `run_break` (the call path
of such an entry), `ResumeFunction` (a generated function continuing the frame at one
instruction, compiled lazily through its own cache like any `refcomp.compile`d
function), callees compiled as frames of their own, and `all_entries`.  Tracing to the
break is refcomp/break_trace.py; rebuilding values, refcomp/recipes.py.
Spec: spec/runtime.md.

Note [Resume functions]: a resume function is keyed by (original code, instruction,
stack depth, live locals).  Every break that reaches the same instruction with the same
shape of state calls the same function, so a loop whose body breaks reuses one resume
function (and its entries) per break site.  Its cache is the frame's own kind of
cache: guards, recompiles, automatic dynamic, `cache_size_limit`, plus Note [Opaque
numbers]: a Python number argument is first specialized; when a later call misses only
because such numbers changed, they become opaque (type guarded, value not) and the
specialized entries are dropped.
"""

from __future__ import annotations

import functools
import sys
import time
import types
from typing import Optional

import torch

from codegen.stats import stage
from refcomp import bytecode_gen as bg
from refcomp import distributed
from refcomp.break_trace import build_break, build_return, trace_to_break
from refcomp.cache import COUNTERS, FrameCache
from refcomp.guards import EQUALS_MATCH
from refcomp.reasons import TENSOR_TO_PYTHON
from refcomp.recipes import Refused, make, replay
from refcomp.runtime import Entry
from refcomp.sources import LocalSource
from refcomp.tracer.values import TensorVar


def compile_break(cf, fn, L, first=None, opaque=frozenset(), auto_dims=None,
                  pinned=None) -> Entry:
    """The entry of a frame that breaks, or of a generated frame that traces to its return.

    Raises Refused when the state at the break cannot be handed to generated code, and
    Unsupported when the frame fails before any instruction of its own.  `pinned`: the
    sizes a failed symbolic trace made static (TraceContext), kept static here too.
    """
    start = time.perf_counter()
    with stage("trace"):
        ctx, tx, brk, reason = trace_to_break(cf, fn, L, opaque=opaque, first=first,
                                              auto_dims=auto_dims, pinned=pinned)
    if brk is None:
        entry = build_return(cf, ctx, reason)  # `reason` is the output here
    else:
        entry = build_break(cf, ctx, tx, brk, reason)
        _generate(cf, fn, tx, brk)
    entry.generated = fn.__code__ in bg.GENERATED
    entry.notes[:0] = ctx.notes  # which sizes are symbols and why (explain(), stats())
    entry.compile_time_s = time.perf_counter() - start
    if entry.resume is not None:
        COUNTERS["breaks"] += 1
    if counts_as_graph(entry):  # a graph that ends in a break is a graph too
        COUNTERS["graphs"] += 1
    return entry


def counts_as_graph(entry) -> bool:
    """Whether explain() lists `entry`'s graph and `counters["graphs"]` counts it: it has
    one, with ops, or it is the graph of a frame of the user's (a resume function's graph
    that only hands values back is not counted)."""
    return entry.graph is not None and bool(entry.graph.op_counts() or not entry.generated)


def _generate(cf, fn, tx, brk) -> None:
    """Fill `brk.code` and `brk.args`: the frame's code entered at the break."""
    code = fn.__code__
    orig, k = bg.original_index(code, brk.index)
    _, s = bg.original_index(code, brk.stop)
    if k is None or s is None:
        raise Refused("the break is inside generated code")
    if "__class__" in orig.co_freevars and "super" in orig.co_names:
        # Zero-argument super() reads the frame's first local slot as `self`; generated
        # code's first slots hold the stack, so CPython would raise a TypeError.
        raise Refused("zero-argument super() needs the frame's own first argument")
    a = bg.analyze(orig)
    names = set(orig.co_varnames)
    bound = frozenset(n for n in brk.locals if n in names)
    if len(a.tags[s] or ()) != len(brk.stack):
        raise Refused(f"stack depth {len(brk.stack)} at the break, {len(a.tags[s] or ())}"
                      " expected")
    bound_at = bg.bound_locals(a, k, bound)
    pass_cells = bool(bg.cell_names(orig))
    kinds = ["null" if r == ("null",) else "arg" for r in brk.stack]
    n_call = a.instrs[k].arg if a.instrs[k].name == "CALL" else 0
    tensor_below = any(isinstance(vt, TensorVar) for vt in tx.stack[:len(tx.stack) - n_call - 2])
    # A call that returns a Python number (RB002) leaves plain Python work behind it.
    maybe_tensor = tensor_below or brk.rid != TENSOR_TO_PYTHON
    if _resume_right_after(a, k, maybe_tensor):
        # Note [Stubs]: the rest of the statement calls again: continue compiled at once.
        n = a.instrs[k].arg
        after = tuple(kinds[:len(kinds) - n - 2]) + ("arg",)
        live = tuple(sorted(a.live[k + 1] & bound))
        target = resume_function(cf, orig, k + 1, after, live, fn.__globals__)
        stubs = [bg.Stub(k + 1, target, after, live, pass_cells)]
    else:
        stubs = []
        for j in bg.stub_points(a, a.succ[k], bound_at):
            live = tuple(sorted(a.live[j] & bound_at[j][0]))
            after = ("arg",) * len(a.tags[j])
            target = resume_function(cf, orig, j, after, live, fn.__globals__)
            stubs.append(bg.Stub(j, target, after, live, pass_cells))
    live_here = tuple(sorted(n for n in bound if n in a.live[s]))
    cells_free = code in bg.GENERATED
    cell_args = () if cells_free else tuple(c for c in orig.co_cellvars if c in brk.cells)
    brk.code = bg.generate(orig, target=s, stack=kinds, local_names=live_here,
                           cell_args=cell_args, cells_free=cells_free, stubs=tuple(stubs))
    brk.args = [r for r in brk.stack if r != ("null",)] + \
        [brk.locals[n] for n in live_here] + [brk.cells[c] for c in cell_args]
    if brk.callee:
        call = tx.instructions[brk.index]
        if call.opname == "CALL_FUNCTION_EX":  # [NULL,] callable, args tuple[, kwargs dict]
            at = len(brk.stack) - 2 - (call.arg & 1)
        else:
            n = call.arg
            at = len(brk.stack) - n - 2 if brk.stack[-n - 2] != ("null",) else \
                len(brk.stack) - n - 1
        brk.callee_slot = at - sum(1 for r in brk.stack[:at] if r == ("null",))


def _resume_right_after(a, k, maybe_tensor) -> bool:
    """Resume right after the breaking CALL when the rest of its line calls again
    (`self.out(self.inner(x))`) or may compute with a tensor (`x * x.sum().item()`,
    `helper(x) * 2`): running it natively to the next line would leave that work eager.
    Otherwise plain Python (`total += t.item()`) runs natively to the line's end
    (Note [Stubs])."""
    if a.instrs[k].name != "CALL" or k + 1 >= len(a.instrs):
        return False
    j = k + 1
    while j < len(a.instrs) and not a.line_start[j] and not a.in_handler[j]:
        name = a.instrs[j].name
        if name == "CALL" or maybe_tensor and name in _TENSOR_WORK:
            return True
        if a.instrs[j].is_uncond_jump() or a.instrs[j].is_final():
            return False
        j += 1
    return False


_TENSOR_WORK = frozenset("BINARY_OP BINARY_SUBSCR COMPARE_OP LOAD_ATTR LOAD_METHOD "
                         "UNARY_NEGATIVE UNARY_INVERT".split())


def run_break(entry, inputs, L, G, C, B, cf):
    """Run the graph, rebuild the state, and hand it to the generated code."""
    brk = entry.resume
    if entry.graph is None:
        outs = ()
    else:
        with torch.set_grad_enabled(brk.run_with_grad or torch.is_grad_enabled()):
            outs = entry.run(inputs)  # See Note [Leaving no_grad inside a segment]
    if brk.grad_mode is not None:  # the graph entered or left a no_grad block
        torch.set_grad_enabled(brk.grad_mode)
    if brk.picked:  # Note [Replayed side effects]: (return value, values of the effects)
        outs, picked = outs
        memo: dict = {}
        replay(brk.effects, lambda r: picked[r[1]] if r[0] == "pick" else
               make(r, (), L, G, C, B, memo), G)
    if brk.result is not None:  # Note [Returned objects] (refcomp/break_trace.py)
        memo = {}
        result = make(brk.result, outs, L, G, C, B, memo)
        replay(brk.effects, lambda r: make(r, outs, L, G, C, B, memo), G)
        return result
    if brk.code is None:  # a traced return (with effects, or leaving a no_grad block)
        return outs
    memo = {}
    # The arguments are read before the effects are replayed: a source names the value
    # the trace read, before the frame changed it (`kwargs.pop("return_dict")` replayed
    # first would leave nothing to read).  Containers keep their identity either way.
    args = [make(r, outs, L, G, C, B, memo) for r in brk.args]
    if brk.effects:
        replay(brk.effects, lambda r: make(r, outs, L, G, C, B, memo), G)
    if brk.callee_slot is not None:
        args[brk.callee_slot] = _compiled_callee(cf, args[brk.callee_slot])
    closure, fn = brk.last
    if closure is not C or fn is None or fn.__globals__ is not G:
        fn = types.FunctionType(brk.code, G, brk.code.co_name, None, C)
        brk.last = (C, fn)
    return fn(*args)


class ResumeFunction:
    """A generated function that continues a frame at one instruction (Note [Resume
    functions]); calling it dispatches through its cache like a compiled function."""

    def __init__(self, parent, orig, index, kinds, live, f_globals):
        from refcomp.api import CompiledFunction

        self.orig, self.index, self.live = orig, index, live
        self.nstack = sum(1 for k in kinds if k == "arg")
        self.pass_cells = bool(bg.cell_names(orig))
        self.code = bg.generate(orig, target=index, stack=list(kinds),
                                local_names=live, cells_free=True)
        self.globals = f_globals
        self.root = parent.root_cache
        closure = tuple(types.CellType() for _ in self.code.co_freevars) or None
        fn = types.FunctionType(self.code, f_globals, self.code.co_name, None, closure)
        self.compiled = CompiledFunction(fn, parent.backend, parent.fullgraph, parent.options,
                                         private_cache=parent.private is not None,
                                         dynamic=parent.dynamic)
        self.compiled._root_cache = self.root
        self.compiled.resume_of = self
        self.line = a_line(orig, index)

    def __call__(self, *args):
        if self.pass_cells:
            n = self.nstack
            closure = args[n]
            args = args[:n] + args[n + 1:]
            fn = types.FunctionType(self.code, self.globals, self.code.co_name, None, closure)
        else:
            closure, fn = None, self.compiled.fn
        return self.compiled.dispatch(fn, args, {}, self.compiled.binder(*args), closure)

    def __repr__(self):
        return f"<resume {self.orig.co_name} at line {self.line}>"

    @property
    def cache(self) -> FrameCache:
        return self.compiled.cache


def a_line(code, index) -> Optional[int]:
    a = bg.analyze(code)
    for ins in reversed(a.instrs[:index + 1]):
        if ins.lineno is not None:
            return ins.lineno
    return None


def resume_function(cf, orig, index, kinds, live, f_globals) -> ResumeFunction:
    functions = resume_functions(cf.root_cache)
    key = (orig, index, kinds, live)
    rf = functions.get(key)
    if rf is None:
        with cf.root_cache.lock:
            rf = functions.get(key)
            if rf is None:
                rf = functions[key] = ResumeFunction(cf, orig, index, kinds, live, f_globals)
    return rf


def widen(cf, cache, L) -> frozenset:
    """Note [Opaque numbers]: numbers guarded by value that changed become opaque."""
    changed = set()
    for entry in cache.entries:
        for g in entry.guards.guards:
            if g.kind == EQUALS_MATCH and isinstance(g.source, LocalSource) and \
                    type(g.expected) in (int, float) and \
                    type(L.get(g.source.local)) is type(g.expected) and \
                    L[g.source.local] != g.expected:
                changed.add(g.source.local)
    if changed - cf.opaque:
        cf.opaque = cf.opaque | changed
        cache.entries = []  # superseded: the widened entries cover what they covered
    return cf.opaque


def _compiled_callee(cf, target):
    """The callable of a CALL whose inlined callee broke, as a frame compiled on its own.

    The break was inside a user function the tracer had inlined: rather than run all of
    it eagerly, the function is compiled as a frame of its own (with its own graphs and
    breaks), kept on the caller's cache under its function.
    """
    bound = None
    if isinstance(target, types.MethodType) and isinstance(target.__func__,
                                                           types.FunctionType):
        bound, fn = target.__self__, target.__func__
    elif isinstance(target, types.FunctionType):
        fn = target
    elif isinstance(target, torch.nn.Module) and distributed.has_distributed_hooks(target) \
            and isinstance(type(target).forward, types.FunctionType) and \
            "forward" not in target.__dict__:
        # FSDP2's hooks run eagerly around the forward, compiled (torch.nn's included)
        forward = functools.partial(_callee(cf, type(target).forward), target)
        return lambda *args, **kwargs: distributed.call_with_forward(target, forward, args,
                                                                     kwargs)
    elif isinstance(target, torch.nn.Module) and not _has_hooks(target) and \
            isinstance(type(target).forward, types.FunctionType) and \
            not type(target).__module__.startswith("torch."):
        bound, fn = target, type(target).forward
    else:
        return target
    package = (getattr(fn, "__module__", None) or "").split(".")[0]
    if package in sys.stdlib_module_names or package == "torch":
        return target  # library code (logging, ...) runs eagerly, as torch.compile's skipfiles
    compiled = _callee(cf, fn)
    return compiled if bound is None else functools.partial(compiled, bound)


def _callee(cf, fn):
    """`fn`'s CompiledFunction, kept on the caller's root cache."""
    callees = callee_functions(cf.root_cache)
    compiled = callees.get(fn)
    if compiled is None:
        from refcomp.api import CompiledFunction

        with cf.root_cache.lock:
            own = bool(fn.__closure__) and sum(
                1 for f, c in callees.items() if f.__code__ is fn.__code__ and c.per_function
            ) < cf.options["cache_size_limit"]
            compiled = callees.setdefault(fn, CompiledFunction(
                fn, cf.backend, False, cf.options, private_cache=cf.private is not None,
                dynamic=cf.dynamic, per_function=own))
    return compiled


# Note [One cache per decorated function]: a decorator makes many functions of one code
# object (transformers 5.24 wraps every forward of a model in `deprecate_kwarg`'s
# `wrapped_func`, a closure over each `func`).  When a break inside each forward compiles
# the wrapper as a frame of its own, one cache per code object would hold the entries of
# all of them: each call of another forward counted as a recompile of the wrapper (7 in
# GPT-2 greedy decoding, toward cache_size_limit, with a model of more decorated classes
# past it), and automatic dynamic compared one forward's shapes with another's.  A callee
# compiled at a break whose function has a closure gets a cache of its own (keyed by the
# function), as Dynamo does not count entries of other identity-guarded objects toward
# its limit.  Up to cache_size_limit such functions per code and root frame: past that
# (closures made afresh per call), they share the code's cache again, whose limit holds.


def _has_hooks(m) -> bool:
    from torch.nn.modules import module as mm

    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or m._backward_pre_hooks or mm._global_forward_hooks
                or mm._global_forward_pre_hooks or mm._global_backward_hooks)


def _registry(cache: FrameCache, name: str) -> dict:
    table = cache.__dict__.get(name)
    if table is None:
        with cache.lock:
            table = cache.__dict__.setdefault(name, {})
    return table


def callee_functions(cache: FrameCache) -> dict:
    """function -> its CompiledFunction, for breaks inside inlined callees."""
    return _registry(cache, "callees")


def resume_functions(cache: FrameCache) -> dict:
    """(code, index, stack depth, live locals) -> ResumeFunction (Note [Resume functions])."""
    return _registry(cache, "resume_functions")


def all_entries(cache: FrameCache, _seen=None) -> list:
    """The frame's entries, every resume function's, and callees compiled at breaks."""
    return [entry for entry, _ in located_entries(cache, None, _seen)]


def located_entries(cache: FrameCache, where, _seen=None) -> list:
    """(entry, "file:line") for `all_entries`: where the entry's frame is in the user's
    source (a resume function: the line it resumes at), for reasons located nowhere."""
    seen = _seen if _seen is not None else set()
    seen.add(id(cache))
    out = [(e, where) for e in cache.entries]
    for rf in list(resume_functions(cache).values()):
        out.extend((e, f"{rf.orig.co_filename}:{rf.line}") for e in rf.cache.entries)
    for compiled in list(callee_functions(cache).values()):
        if id(compiled.cache) not in seen:  # (mutual) recursion shares caches
            code = compiled.code
            out.extend(located_entries(compiled.cache,
                                       f"{code.co_filename}:{code.co_firstlineno}", seen))
    return out

