"""The runtime: a graph of kernels, externs and fallbacks as one small callable.

Owns: `plan_graph` (each top-level node -> a kernel, an extern call, a view or a
torch fallback), `CompiledGraph` (the callable) and the thread split of kernel
launches.  Backend neutral: a backend passes `compile_kernels(kernels) ->
[launcher or None]`.  Must not know: LLVM, the frontend.  Spec: spec/codegen.md,
"LLVM" ("Runtime").

Per-call work is the part every compiled function pays, so the call is one generated
straight-line Python function (`CompiledGraph.source`; what it does: spec/codegen.md,
"LLVM", "Runtime"; the arena: Note [Arena at run time]).

Note [Guarded inputs]: the input checks and copies cost about a third of a
tiny graph's call (two checks and two `.contiguous()` of ~8 in all, ~0.7 us).
A caller that already guarantees an input's static shape, its dtype and a
contiguous layout (refcomp: a TENSOR_MATCH guard pins dtype, sizes and strides,
and the strides it pins are contiguous ones) names the input in `guarded`, and
the call takes it as is.  Anything else is still checked and copied, so direct
use of a backend stays safe: only the caller's word removes a check, and a
wrong word is the caller's bug (a kernel would read the wrong bytes).

A launcher is `fn(*pointers, start, end)` computing rows [start, end) of the
kernel's parallel dimension.  Big kernels go through `_launch_parallel`, which
splits the rows over `torch.get_num_threads()` Python threads (ctypes releases
the GIL) and runs directly when one thread is set.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

import sympy
import torch

from codegen import sizes as sz
from codegen.kernel import Kernel
from codegen.lower import (
    NODE_KERNELS,
    Unsupported,
    drop_inplace_copies,
    lower_node,
    lower_region,
    single_node_body,
    stores_last,
)
from codegen.share import share
from codegen.stats import STAGES, STATS, stage
from codegen.torch_bridge import torch_dtype
from ir.graph import Graph, Value
from ir.ops.registry import EXTERN, POINTWISE, REDUCTION
from ir.plan import (
    ALIGN,
    aligned,
    bytes_root,
    plan_input_writes,
    same_bytes_views,
    views_in,
)
from ir.types import is_symbolic

PARALLEL_MIN_WORK = 1 << 16  # elements; below this a thread hand-off costs more than it saves

_pool: dict = {}


def _launch_parallel(fn, extent: int, args: list) -> None:
    threads = torch.get_num_threads()
    if threads <= 1 or extent < 2:
        fn(*args, 0, extent)
        return
    if _pool.get("size") != threads:
        _pool["pool"] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="refcomp")
        _pool["size"] = threads
    chunk = -(-extent // threads)
    futures = [_pool["pool"].submit(fn, *args, lo, min(lo + chunk, extent))
               for lo in range(chunk, extent, chunk)]
    fn(*args, 0, min(chunk, extent))
    for f in futures:
        f.result()


class _Unit:
    """One planned step: kind is kernel | extern | view | eager."""

    def __init__(self, kind, inputs, outputs, *, kernel=None, fn=None, label="", sized=False):
        self.kind, self.inputs, self.outputs = kind, list(inputs), list(outputs)
        self.kernel, self.fn, self.label = kernel, fn, label
        self.sized = sized  # fn takes the call's size tuple as a last operand
        # a kernel's size arguments: a graph symbol, or an int for a shared body's own
        # symbol (Note [Sizes as arguments], codegen/share.py)
        self.size_args: tuple = ()


def _compile_shared(kernel_units: list, compile_kernels) -> list:
    """Launchers for the units' kernels, kernels equal but for sizes sharing one body
    (codegen/share.py); each unit keeps its own Kernel and gets its `size_args`."""
    shared = share([u.kernel for u in kernel_units])
    for unit, (body, binding) in zip(kernel_units, shared):
        unit.size_args = tuple(binding.get(s, s) for s in body.params)
        if binding:
            STATS.kernels_size_shared += 1
    return compile_kernels([body for body, _ in shared])


def concrete_shape(v: Value, sizes: dict) -> tuple:
    return tuple(int(d.subs(sizes)) if is_symbolic(d) else int(d) for d in v.type.shape)


def shape_of(v: Value) -> tuple:
    """The value's shape as sizes (ints or expanded sympy expressions)."""
    return tuple(sz.norm(d) if is_symbolic(d) else int(d) for d in v.type.shape)


def symbol_bindings(graph: Graph) -> list:
    """[(symbol, input index, dim)]: where each size symbol of the graph is read from at
    call time (its first plain occurrence as an input dim).  A symbol that only occurs
    inside expressions cannot be bound: ValueError naming it."""
    from codegen.eager import _symbol_bindings

    bindings = _symbol_bindings(graph)
    bound = {s for s, _, _ in bindings}
    free = set()
    for v in graph.inputs:
        for d in v.type.shape:
            free |= sz.symbols_of(sz.norm(d)) if is_symbolic(d) else set()
    if free - bound:
        raise ValueError(f"size symbol(s) {sorted(map(str, free - bound))} are not a dim of"
                         " any graph input, so a call cannot bind them")
    return bindings


def plan_graph(graph: Graph, symbols=()) -> list[_Unit]:
    """One unit per top-level node; kernels for regions and lone pointwise/reduction nodes.

    Nodes with symbolic attributes (views, externs, fallbacks) get steps that take the
    call's size tuple (values of `symbols`, in that order) as a last operand
    (`_Unit.sized`; codegen/eager.py `_make_step`)."""
    from codegen import eager

    units = []
    for node in graph.nodes:
        name, cat = node.op.name, node.op.category
        if node.body is not None or cat in (POINTWISE, REDUCTION):
            body = node.body if node.body is not None else single_node_body(node)
            label = f"{name}[{node.attrs.get('kind', '')}]" if node.body is not None else name
            try:
                kernel = lower_region(body)
                units.append(_Unit("kernel", node.inputs, node.outputs, kernel=kernel,
                                   fn=body, label=label))
                continue
            except Unsupported as e:
                STATS.fallback(label, str(e))
                units.append(_Unit("eager", node.inputs, node.outputs,
                                   fn=_eager_body(body), label=label))
                continue
        if name in NODE_KERNELS:  # See Note [Scatter kernels] in codegen/lower.py
            try:
                units.append(_Unit("kernel", node.inputs, node.outputs,
                                   kernel=lower_node(node), fn=single_node_body(node),
                                   label=name))
                continue
            except Unsupported:
                pass  # run by torch, counted below
        step = eager._make_step(node, list(symbols), {})
        sized = bool(eager._symbolic_attr_names(node))
        if node.op.aliases:  # a torch view of its operand (Note [Op facts])
            units.append(_Unit("view", node.inputs, node.outputs, fn=step, label=name,
                               sized=sized))
        elif cat == EXTERN:
            STATS.extern_nodes += 1
            units.append(_Unit("extern", node.inputs, node.outputs, fn=step, label=name,
                               sized=sized))
        else:
            STATS.fallback(name, f"{cat} op, run by torch")
            units.append(_Unit("eager", node.inputs, node.outputs,
                               fn=_tuple_result(step, len(node.outputs)), label=name,
                               sized=sized))
    return units


def _tuple_result(fn, n_outputs: int):
    if n_outputs == 1:
        return lambda *xs: (fn(*xs),)
    return fn


def _eager_body(body: Graph):
    """A region run op by op by the eager backend (its own graph; it binds its own sizes)."""
    from codegen import eager

    run = eager.compile_graph(body, {})
    return lambda *xs: run(*xs)


class CompiledGraph:
    """`graph` compiled: call it with the input tensors, get the output tensors."""

    def __init__(self, graph: Graph,
                 compile_kernels: Callable[[list[Kernel]], list[Optional[Callable]]],
                 guarded: frozenset = frozenset()):
        with stage("lower"):  # LLVM's own time, inside, is its stage "llvm"
            self._build(graph, compile_kernels, guarded)

    def _build(self, graph, compile_kernels, guarded) -> None:
        started = time.perf_counter()
        self.graph = graph
        self.bindings = symbol_bindings(graph)
        self.symbols = [s for s, _, _ in self.bindings]
        units = plan_graph(graph, self.symbols)
        self.arena = Arena(graph, units)
        kernel_units = [u for u in units if u.kind == "kernel"]
        plain = [u.kernel for u in kernel_units]
        self.into = input_writes(graph, kernel_units)
        for unit in kernel_units:
            unit.kernel = self.arena.inplace_kernel(unit, self.into)
        launchers = _compile_shared(kernel_units, compile_kernels)
        if None in launchers and self.arena.offset:
            # A fallback changes who writes what: run this graph without the arena.
            self.arena = Arena(graph, [])
            for unit, kernel in zip(kernel_units, plain):
                unit.kernel = kernel
                unit.kernel = self.arena.inplace_kernel(unit, self.into)
            launchers = _compile_shared(kernel_units, compile_kernels)
        for unit, launcher in zip(kernel_units, launchers):
            if launcher is None:
                STATS.fallback(unit.label, "the backend could not emit this kernel")
                unit.kind, unit.fn = "eager", _eager_body(unit.fn)
            else:
                STATS.kernels += 1
                unit.fn = launcher
        self.units = units
        self.kernels = [u.kernel for u in units if u.kind == "kernel"]
        self.source, self.fn = _generate(graph, self.bindings, units, self.arena, guarded,
                                         self.into)
        STATS.graphs_compiled += 1
        STATS.compile_seconds += time.perf_counter() - started

    def __call__(self, *tensors) -> list:
        return self.fn(*tensors)


def prepare(graph: Graph, options: dict) -> Graph:
    """The graph both kernel backends run: the kernel passes of ir/passes/pipelines.py
    (composites decomposed, regions fused, memory planned; options `fuse`, `plan`), each
    through the pass manager and timed as its compile stage; with option `writes_back`
    ((input, output) pairs the caller copies), the plan's `into` (Note [Inputs written
    in place])."""
    from ir.passes.manager import run_pipeline
    from ir.passes.pipelines import kernel_passes

    graph = run_pipeline(graph, kernel_passes(graph, options),
                         around=lambda name: stage(name if name in STAGES else "passes"))
    if options.get("writes_back") and graph.plan is not None:
        graph = plan_input_writes(graph, options["writes_back"])
    return graph


class Arena:
    """Which intermediates live in the call's arena, at which byte offset.

    Note [Arena at run time]: the graph's MemoryPlan (spec/memory.md) gives every
    intermediate an offset; the runtime honours it for the values it writes itself
    (kernel outputs, and matmul results through `out=`), so a call allocates one
    uint8 arena tensor for all of them.  A planned value stays a fresh tensor
    instead (always safe: fresh bytes overlap nothing) when its producer is a
    fallback (torch allocates), or when an eager fallback reads it or a view of it
    (its result may be a torch view whose reads the plan does not count).  Values a
    graph output views are never planned (ir/plan.py `intermediates`).  A `reuses`
    pair is honoured as an in-place kernel (Note [In-place kernels],
    codegen/llvm/emit.py) only when both values are in the arena and the kernel
    reads the operand through one buffer.
    """

    def __init__(self, graph: Graph, units: list):
        self.offset: dict = {}  # Value -> byte offset (a size: int or symbolic formula)
        self.reuses: dict = {}  # in-place result -> the operand whose bytes it takes
        self.nbytes = 0
        self.same_bytes = same_bytes_views(graph)  # a kernel may read a reused slot so
        plan = graph.plan
        if plan is None or not units:
            return
        offsets = {s.value: sz.norm(s.offset) if is_symbolic(s.offset) else int(s.offset)
                   for s in plan.slots}
        view_of = views_in(graph)
        unsafe = set()
        writers = set()
        for unit in units:
            if unit.kind == "eager":
                for v in unit.inputs:  # and the value a read view shows, and its base...
                    while v is not None and v not in unsafe:
                        unsafe.add(v)
                        v = view_of.get(v)
            if unit.kind == "kernel" or (unit.kind == "extern" and unit.label == "matmul"
                                         and _matmul_writes_out(unit)):
                writers.update(unit.outputs)
        for slot in plan.slots:
            v = slot.value
            if v in writers and v not in unsafe:
                self.offset[v] = offsets[v]
                self.reuses[v] = slot.reuses
        self._settle()

    def _settle(self):
        self.reuses = {v: r for v, r in self.reuses.items() if r in self.offset}
        ends = [sz.norm(off + _nbytes(v)) for v, off in self.offset.items()]
        if all(isinstance(e, int) for e in ends):
            self.nbytes = max(ends, default=0)
        else:  # a formula, evaluated per call (Note [Arena at run time])
            self.nbytes = sz.norm(sympy.Max(*ends))

    def inplace_kernel(self, unit, into=None) -> Kernel:
        """The unit's kernel, marked to write outputs over the operands they reuse, and
        over the graph inputs `into` (input_writes) stores them in."""
        pairs, moved = list(_into_pairs(unit, into or {}, self.same_bytes)), False
        for j, v in enumerate(unit.outputs):
            operand = self.reuses.get(v)
            if operand is None:
                continue
            reads = [k for k, x in enumerate(unit.inputs)
                     if bytes_root(x, self.same_bytes) is operand]
            if len(reads) != 1:
                del self.reuses[v]  # read through two buffers: keep the bytes apart
                self.offset.pop(v)
                moved = True
                continue
            pairs.append((f"out{j}", f"in{reads[0]}"))
        if moved:  # (settling costs a pass over every buffer: only when one moved)
            self._settle()
        if not pairs:
            return unit.kernel
        return drop_inplace_copies(stores_last(dataclasses.replace(unit.kernel,
                                                                   inplace=tuple(pairs))))

    def separate_reuses(self) -> None:
        """Give each in-place result bytes of its own, past the end of everything else,
        for a backend whose kernels do not store over an input (Triton's).  Safe: the
        moved result overlaps nothing; its operand's bytes merely stay unused."""
        for v in self.reuses:
            self.offset[v] = _aligned(self.nbytes)
            self.nbytes = sz.norm(self.offset[v] + _nbytes(v))
        self.reuses = {}


# Note [Inputs written in place]
# A graph output the caller copies into a graph input (a mutated input's new value:
# backend option `writes_back`) is stored by its kernel straight into the input's bytes
# where the plan allows it (`MemoryPlan.into`, ir.plan.input_write_safe; spec/memory.md,
# "Graph inputs written in place"): the call binds the output to the input's tensor
# (made contiguous first where the caller does not vouch for it: a copy then takes the
# write, and the caller, seeing another tensor, copies as before), and a kernel that
# reads the input stores through the input's pointer (Note [In-place kernels],
# codegen/llvm/emit.py).  The caller skips the copy of an output that is its input.
# Only kernels do this: an extern's or fallback's result is torch's tensor.
def input_writes(graph: Graph, kernel_units: list) -> dict:
    """Kernel outputs stored into a graph input: value -> the input's value."""
    plan = graph.plan
    if plan is None or not plan.into:
        return {}
    made = {v for u in kernel_units for v in u.outputs}
    return {item.value: item.input for item in plan.into if not item.why and item.value in made}


def _into_pairs(unit, into: dict, same_bytes: dict):
    """(output, input) buffer pairs of a kernel storing outputs over the graph inputs it
    reads (Note [Inputs written in place]); an output that reads its input through two
    buffers is dropped from `into` (its result then gets its own tensor, copied)."""
    for j, v in enumerate(unit.outputs):
        if v not in into:
            continue
        target = into[v]
        reads = [k for k, x in enumerate(unit.inputs) if bytes_root(x, same_bytes) is target]
        if len(reads) > 1:
            del into[v]
        elif reads:
            yield f"out{j}", f"in{reads[0]}"


def _aligned(n):
    if isinstance(n, int):
        return aligned(n)
    return sz.norm(ALIGN * sympy.ceiling(sympy.sympify(n) / ALIGN))


def _nbytes(v: Value) -> sz.Size:
    n = v.type.dtype.itemsize
    for d in shape_of(v):
        n = n * d if isinstance(n, int) and isinstance(d, int) else sz.norm(n * d)
    return n


def _generate(graph: Graph, bindings: list, units: list[_Unit], arena: Arena,
              guarded: frozenset = frozenset(), into=None):
    """Python source for the call, and the function compiled from it.

    `bindings`: [(symbol, input, dim)] (symbol_bindings): a symbolic graph's call
    first reads its symbols from the inputs' shapes (`s0 = x0.shape[0]`), then
    every size it needs (shapes, arena offsets, kernel extents) is a Python
    expression in them (Note [Runtime sizes], codegen/kernel.py).  `guarded`:
    indices of inputs the caller vouches for (See Note [Guarded inputs]); the call
    neither checks nor copies those whose shape is static.  `into`: kernel outputs
    stored into a graph input (Note [Inputs written in place]).
    """
    into = into or {}
    names: dict = {}
    env: dict = {"torch": torch, "empty_like": torch.empty_like, "STATS": STATS,
                 "_launch_parallel": _launch_parallel, "_bad_input": _bad_input,
                 "PARALLEL_MIN_WORK": PARALLEL_MIN_WORK}
    symbolic = bool(bindings)
    var_of = {s: f"_{s}" for s, _, _ in bindings}

    def code(x) -> str:  # a size as Python source
        return sz.py_source(x, lambda sym: var_of[sym])

    def shape_code(v) -> str:
        dims = [code(d) for d in shape_of(v)]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    contiguous: set = set()  # values known to be contiguous
    materialized: set = set()  # arena values that have a tensor in this call
    params = []
    lines = []
    for i, v in enumerate(graph.inputs):
        names[v] = f"x{i}"
        params.append(f"x{i}")
    for sym, i, d in bindings:
        lines.append(f"{var_of[sym]} = x{i}.shape[{d}]")
    if any(u.sized for u in units):
        lines.append(f"sizes = ({''.join(var_of[s] + ', ' for s, _, _ in bindings)})")
    for i, v in enumerate(graph.inputs):
        if i in guarded and v.type.is_static:
            contiguous.add(v)
            continue
        env[f"D{i}"] = torch_dtype(v.type.dtype)
        if v.type.is_static:
            env[f"S{i}"] = torch.Size(shape_of(v))
            lines.append(f"if x{i}.shape != S{i} or x{i}.dtype != D{i}: _bad_input({i}, x{i})")
        else:
            lines.append(f"if x{i}.shape != {shape_code(v)} or x{i}.dtype != D{i}:"
                         f" _bad_input({i}, x{i})")
    view_specs: list = []  # (offset, bytes, dtype, shape) of each arena value's tensor
    if arena.offset and not symbolic:
        env["_arena"] = ThreadArena(arena.nbytes, view_specs)
        lines.append("A, V = _arena.get()")
    elif arena.offset:
        env["_arena"] = GrowingArena()
        lines.append(f"B = _arena.get({code(arena.nbytes)})")
        lines.append("A = B.data_ptr()")

    def pointer(v) -> str:
        if v in arena.offset:
            off = arena.offset[v]
            return "A" if off == 0 else f"A + {code(off)}"
        return f"{names[v]}.data_ptr()"

    def tensor(v) -> str:
        """The value as a tensor: arena values get a view of their bytes on first use."""
        name = names[v]
        if v in arena.offset and v not in materialized:
            if symbolic:
                off, n = code(arena.offset[v]), code(_nbytes(v))
                env[f"D_{name}"] = torch_dtype(v.type.dtype)
                lines.append(f"{name} = B[{off}:{off} + {n}].view(D_{name}).view({shape_code(v)})")
            else:
                view_specs.append((arena.offset[v], _nbytes(v), torch_dtype(v.type.dtype),
                                   torch.Size(shape_of(v))))
                lines.append(f"{name} = V[{len(view_specs) - 1}]")
            materialized.add(v)
        return name

    for u_index, unit in enumerate(units):
        for v in unit.outputs:
            names[v] = f"v{len(names)}"
        outs = [names[v] for v in unit.outputs]
        fn = f"f{u_index}"
        env[fn] = unit.fn
        if unit.kind == "kernel":
            for v in unit.inputs:
                if v not in contiguous and v not in arena.offset:
                    lines.append(f"{names[v]} = {names[v]}.contiguous()")
                    contiguous.add(v)
            for v, out in zip(unit.outputs, outs):
                if v in into:  # See Note [Inputs written in place]
                    src = names[into[v]]
                    if into[v] not in contiguous:
                        lines.append(f"{src} = {src}.contiguous()")
                        contiguous.add(into[v])
                    lines.append(f"{out} = {src}")
                elif v not in arena.offset:
                    if v.type.is_static:
                        env[f"P_{out}"] = _prototype(shape_of(v), v.type.dtype)
                        lines.append(f"{out} = empty_like(P_{out})")
                    else:
                        env[f"D_{out}"] = torch_dtype(v.type.dtype)
                        lines.append(f"{out} = torch.empty({shape_code(v)}, dtype=D_{out})")
                contiguous.add(v)
            args = [pointer(v) for v in unit.inputs + unit.outputs]
            args += [str(s) if isinstance(s, int) else var_of[s] for s in unit.size_args]
            ptrs = ", ".join(args)
            extent = unit.kernel.parallel_extent()
            work = max((b.numel for b in unit.kernel.buffers), default=0, key=_work_key)
            if isinstance(extent, int) and isinstance(work, int):
                if extent > 1 and work >= PARALLEL_MIN_WORK:
                    lines.append(f"_launch_parallel({fn}, {extent}, [{ptrs}])")
                else:
                    lines.append(f"{fn}({ptrs}{', ' if ptrs else ''}0, {extent})")
            else:  # decided per call from this call's sizes
                counts = dict.fromkeys(code(b.numel) for b in unit.kernel.buffers)
                works = " or ".join(f"{c} >= PARALLEL_MIN_WORK" for c in counts) or "False"
                lines.append(f"_e = {code(extent)}")
                lines.append(f"if _e > 1 and ({works}): _launch_parallel({fn}, _e, [{ptrs}])")
                lines.append(f"else: {fn}({ptrs}{', ' if ptrs else ''}0, _e)")
            continue
        ins = [tensor(v) for v in unit.inputs]
        call = f"{fn}({', '.join(ins + (['sizes'] if unit.sized else []))})"
        if unit.kind == "extern":
            lines.append("STATS.extern_calls += 1")
            if unit.outputs[0] in arena.offset:  # matmul into its planned bytes
                lines.append(f"{fn}({', '.join(ins)}, out={tensor(unit.outputs[0])})")
                contiguous.add(unit.outputs[0])
                continue
        if unit.kind == "eager":
            lines.append("STATS.fallback_calls += 1")
        if unit.kind in ("extern", "view") and len(outs) == 1:
            lines.append(f"{outs[0]} = {call}")
        else:
            lines.append(f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {call}")
    result = ", ".join(tensor(v) for v in graph.outputs)
    lines.append(f"return [{result}]")
    source = f"def call({', '.join(params)}):\n" + "".join(f"    {ln}\n" for ln in lines)
    exec(compile(source, f"<refcomp {graph.name}>", "exec"), env)
    return source, env["call"]


def _matmul_writes_out(unit) -> bool:
    """Whether torch.matmul(a, b, out=buf) fills `buf` as it is: a vector times a matrix
    (or a batch of them) computes a [1, n] result and resizes `out`, with a UserWarning
    eager never shows, so that product gets a tensor of its own
    (tests/frontend/test_no_extra_warnings.py)."""
    a, b = unit.inputs[:2]
    return not (a.type.rank == 1 and b.type.rank >= 2)


def _work_key(n) -> int:
    return n if isinstance(n, int) else 0


class GrowingArena:
    """A symbolic graph's arena: one uint8 tensor per thread, grown when a call needs more
    bytes than it has (Note [Arena reuse]; its size is a formula of the call's sizes)."""

    def __init__(self, device=None):
        self.device = device
        self.local = threading.local()

    def get(self, nbytes: int) -> torch.Tensor:
        arena = getattr(self.local, "arena", None)
        if arena is None or arena.numel() < nbytes:
            arena = self.local.arena = torch.empty(max(nbytes, 1), dtype=torch.uint8,
                                                   device=self.device)
        return arena


class ThreadArena:
    """The arena of one compiled graph: allocated on a thread's first call, then reused.

    Note [Arena reuse]: nothing the caller receives lies in the arena (outputs and
    the values they view are never planned there, ir/plan.py `intermediates`), and a
    call runs no user code, so one call's intermediates are dead when the next call
    on the same thread starts.  Keeping the arena (and its typed views, built once)
    per thread takes the allocation and about two `view`s per intermediate off every
    call; the cost is that the arena's bytes stay allocated between calls, once per
    thread that calls the graph (threads never share one: calls may be concurrent).
    The arena is allocated on `device` (the Triton backend's: its inputs' device).
    """

    def __init__(self, nbytes: int, view_specs: list, device=None):
        self.nbytes = nbytes
        self.view_specs = view_specs  # filled while the call function is generated
        self.device = device
        self.local = threading.local()

    def get(self) -> tuple:
        """(base address, typed views of the planned values) for this thread."""
        state = getattr(self.local, "state", None)
        if state is None:
            arena = torch.empty(self.nbytes, dtype=torch.uint8, device=self.device)
            views = tuple(arena[off:off + n].view(dtype).view(shape)
                          for off, n, dtype, shape in self.view_specs)
            self.local.arena = arena  # keeps the bytes alive when no view is made
            state = self.local.state = (arena.data_ptr(), views)
        return state


def _prototype(shape: tuple, dtype) -> torch.Tensor:
    """A one-element tensor expanded to `shape`: empty_like of it allocates a contiguous
    tensor of that shape and dtype about twice as fast as torch.empty(shape, dtype=...).
    An empty shape gets a real empty tensor: empty_like of the expanded one is not
    row-major (strides (1, 0, 0, 1) for (1, 0, 4, 1), where eager's are (4, 4, 1, 1))."""
    if 0 in shape:
        return torch.empty(shape, dtype=torch_dtype(dtype))
    return torch.empty([1] * len(shape), dtype=torch_dtype(dtype)).expand(shape)


def _bad_input(i: int, t) -> None:
    raise TypeError(f"compiled graph input {i}: got {t.dtype}{list(t.shape)}, which is not"
                    " what it was compiled for")
