"""Kernel -> LLVM IR with the llvmlite.ir builder (no string templates).

Owns: `emit_kernel(module, kernel, symbol)`, which adds one function
`void symbol(ptr noalias buf0, ..., i64 start, i64 end)` computing `kernel`.
Must not know: graphs, torch, threads.  Spec: spec/codegen.md, "LLVM".

Shape of the code: loops are plain counted loops over i64 induction variables;
the parallel dimension (the first outer dim, or the only stage's first dim)
runs from `start` to `end`, so the runtime can hand row ranges to threads.
Accumulators live in allocas that mem2reg turns into phis.  Floating sums and
products carry `reassoc nsz` (reassociation is allowed in reductions, so the loop
vectorizer may keep several partial sums); max/min use the NaN-propagating
llvm.maximum/llvm.minimum.  Pointwise arithmetic has no fast-math flags: results
stay those of the op-by-op scalar semantics.  Storage types are converted at the
loads and stores: f16 <-> f32 via fpext/fptrunc, bf16 <-> f32 via the bits (round
to nearest even), bool <-> i1 via i8.
"""

from __future__ import annotations

import llvmlite.ir as lir

from codegen import sizes
from codegen.kernel import DivMod, Index, Kernel, Let, Reduce, Store
from codegen.llvm import jit, vmath
from codegen.llvm.scalar import F32, I32, I64, TV, LLVMScalarOps, llvm_type, to_bf16
from codegen.scalar import compute_dtype
from ir.types import DType, f32, f64
from ir.types import i64 as I64_DTYPE

_REASSOC = ("reassoc", "nsz")


def emit_kernel(module: lir.Module, kernel: Kernel, symbol: str) -> lir.Function:
    ptr = lir.PointerType()
    params = kernel.params
    fnty = lir.FunctionType(lir.VoidType(),
                            [ptr] * len(kernel.buffers) + [I64] * len(params) + [I64, I64])
    fn = lir.Function(module, fnty, symbol)
    fn.attributes.add("nounwind")
    for arg, buf in zip(fn.args, kernel.buffers):
        arg.add_attribute("noalias")
        arg.name = buf.name
    symbols = {}
    for arg, sym in zip(fn.args[len(kernel.buffers):], params):
        arg.name = str(sym)
        symbols[sym] = arg
    start, end = fn.args[-2], fn.args[-1]
    start.name, end.name = "start", "end"
    b = lir.IRBuilder(fn.append_basic_block("entry"))
    emitter = _Emitter(fn, b, kernel, start, end, symbols)
    emitter.run()
    if emitter.streams:
        # Non-temporal stores are weakly ordered: drain them before the kernel returns,
        # so whoever synchronizes with this thread next sees the data.
        sfence = module.globals.get("llvm.x86.sse.sfence") or lir.Function(
            module, lir.FunctionType(lir.VoidType(), []), "llvm.x86.sse.sfence")
        b.call(sfence, [])
    b.ret_void()
    return fn


# Note [In-place kernels]
# Every pointer argument is `noalias`, which two arguments pointing at the same
# bytes would break (and without it the loop vectorizer would add overlap checks
# that fail when the pointers are equal, running the scalar loop).  So an output
# the memory plan writes over a dying input (Kernel.inplace) is stored through
# the input's argument: one pointer, load and store of element i at the same
# address, which LLVM sees as a distance-0 dependence and still vectorizes.  The
# output's own argument is then unused.  The plan only allows this for pointwise
# kernels reading that input elementwise, and for scatter kernels, which then store only
# the window's elements and never load the input (ir.plan.inplace_safe; Note [Scatter
# kernels], codegen/lower.py).


# Outer points per tile when a reduction is tiled (See Note [Outer reductions]), and per
# tile of a kernel with more than TILE_MAX_ACCS accumulators (each lane accumulator is a
# stack slot: 32 KiB per f64 accumulator at 4096).
TILE = 4096
SMALL_TILE = 512
TILE_MAX_ACCS = 8

# Note [Interleaved vector math]
# A vector-math function (vmath.py: exp, tanh, erf, sigmoid, log) is one long chain of
# dependent vector instructions (~20-40, each 4 cycles of latency), and a chain of them
# (the 14-op transcendental row: ~240 instructions a vector) is latency-bound: the
# out-of-order window holds about one iteration, so about one instruction retires a
# cycle.  LLVM's cost model gives such a big loop body no interleaving.  An innermost
# loop whose body has vector math asks the loop vectorizer for INTERLEAVE_MATH
# independent vectors per iteration (`llvm.loop.interleave.count`): their chains run
# side by side.  The same operations on the same elements: results are unchanged.
# A loop of a static trip count asks for fewer, so that each of the interleaved vectors
# still gets two iterations (a row of 128 f32: 4; of 64 or less: LLVM's choice), since
# the elements left over run in narrower vectors and a scalar loop.  A loop of a static
# trip count (a row stage: softmax's exp-and-sum pass) asks for at most INTERLEAVE_ROW:
# its body also stores the row and sums it, and 8 vectors of it spilled registers
# (softmax [4096, 1024], kernel alone, same-process A/B: 1.79 ms with 8, 1.63 with 4;
# [16384, 256] 2.79 -> 2.28 ms).  The count is a power
# of two (LLVM ignores others: 6 ran as 1).  Measured on emeraldrapids, 1 thread, CPU
# time, one process comparing the counts: the 14-op chain on 4M f32 20.5 ms (1, LLVM's
# choice) -> 12.6 (4) -> 12.0 (8); 10 transcendentals (pointwise_transc) 17.3 -> 11.5 ->
# 10.2 ms.
INTERLEAVE_MATH = 8
INTERLEAVE_ROW = 4
MATH_VECTOR = 16  # f32 lanes of an AVX-512 vector: the widest the vectorizer picks

# Note [Vector width of math loops]: with AVX-512, LLVM's cost model picked 8 lanes, not
# 16, for softmax's exp-and-sum pass over rows of 4096 or more f32 (16 for rows of
# 1024: the same loop body, another trip count), and that pass ran at half speed
# (softmax [16, 4096] in cache 0.044 -> 0.030 ms with 16 lanes; [1024, 4096] out of cache
# 4.18 -> 3.68 ms).  So a hinted loop (Note [Interleaved vector math]) on an AVX-512
# host also asks for MATH_VECTOR lanes (`llvm.loop.vectorize.width`).  The same
# operations per element; a sum's partial sums are grouped differently (as any change
# of width or interleaving does: sums carry `reassoc`).


def _interleave_count(lo, hi) -> int:
    """Note [Interleaved vector math]: the count for a loop from `lo` to `hi`."""
    count = INTERLEAVE_MATH
    if isinstance(lo, lir.Constant) and isinstance(hi, lir.Constant):
        trips = int(hi.constant) - int(lo.constant)
        count = min(count, INTERLEAVE_ROW)
        while count > 1 and count * MATH_VECTOR * 2 > trips:
            count //= 2
    return count


def _loop_id(module: lir.Module, interleave: int, width: int = 0):
    """A fresh loop ID (`!N = !{!N, !{"llvm.loop.interleave.count", i32 k}}`, and
    `!{"llvm.loop.vectorize.width", i32 w}` when `width`)."""
    hints = [module.add_metadata([lir.MetaDataString(module, "llvm.loop.interleave.count"),
                                  lir.Constant(I32, interleave)])]
    if width:
        hints.append(module.add_metadata([lir.MetaDataString(module, "llvm.loop.vectorize.width"),
                                          lir.Constant(I32, width)]))
    # made unique by a placeholder operand, then pointed at itself (a loop ID's first
    # operand is the node itself; never hashed again, so the cycle is harmless)
    node = module.add_metadata([lir.MetaDataString(module, f"loop{len(module.metadata)}"),
                                *hints])
    node.operands = (node, *hints)
    return node


class _Emitter:
    def __init__(self, fn, b, kernel: Kernel, start, end, symbols=None):
        self.fn, self.b, self.k = fn, b, kernel
        self.symbols = symbols or {}  # size symbol -> its i64 argument (Note [Runtime sizes])
        self.start, self.end = start, end
        self.ops = LLVMScalarOps(b, fn.module)
        self.bufs = {buf.name: (arg, buf.dtype) for arg, buf in zip(fn.args, kernel.buffers)}
        for out, src in kernel.inplace:  # See Note [In-place kernels]
            self.bufs[out] = (self.bufs[src][0], self.bufs[out][1])
        self.tile_var = _tile_var(kernel)
        self.tile = TILE if len(kernel.accs) <= TILE_MAX_ACCS else SMALL_TILE
        self.narrow = set() if self.tile_var else _short_row_sums(kernel, _plan_below_max(kernel))
        # Note [Row max as integer max]: float max/min accumulators kept as ordered keys
        self.keyed = set() if self.tile_var else {
            acc.name for acc in kernel.accs
            if acc.op in ("max", "min") and compute_dtype(acc.dtype).is_float}
        self.accs = {}
        for acc in kernel.accs:
            ty = llvm_type(self.slot_dtype(acc))  # Note [Wide sums]
            if acc.name in self.keyed:
                ty = _key_type(ty)
            slot = b.alloca(lir.ArrayType(ty, self.tile) if self.tile_var else ty, name=acc.name)
            self.accs[acc.name] = (slot, acc)
        self.vars: dict = {}
        self.lane = None  # the tile lane index while emitting a tiled stage
        self.reuse, rows = ({}, []) if self.tile_var else _plan_reuse(kernel)
        # Note [Symbolic rows]: a row scratch of a symbolic row length takes the maximum
        # size; the code using it runs only when the row fits (checked at run time).
        self.row_checks: list = []  # conditions (size expressions) the scratch plans need
        self.scratch = []
        for i, (n, dtype) in enumerate(rows):
            if not isinstance(n, int):
                self.row_checks.append(("le", n, ROW_SCRATCH_MAX))
                n = ROW_SCRATCH_MAX
            row = b.alloca(lir.ArrayType(llvm_type(dtype), n), name=f"row{i}")
            row.align = 64  # Note [Row reuse]: whole-vector accesses split no cache line
            self.scratch.append(row)
        # Note [Streaming stores]: stage -> {buffer: (aligned row scratch, row start, n)}
        self.streams: dict = {}
        if self.tile_var is None and _x86(fn.module):
            for i, buf, row, n, checks in _plan_streams(kernel):
                ty = llvm_type(self.bufs[buf][1], storage=True)
                size = n if isinstance(n, int) else ROW_SCRATCH_MAX
                row_scratch = b.alloca(lir.ArrayType(ty, size), name=f"stream{i}.{buf}")
                row_scratch.align = 64
                self.streams.setdefault(i, {})[buf] = (row_scratch, row, n)
                self.row_checks += checks
        self.redirect: dict = {}  # buffer -> (row scratch, inner var) while a stage streams
        self.prefetch = [] if self.tile_var else _plan_prefetch(kernel)
        self.loop_count = 0  # counted loops emitted so far
        self.below_max = _plan_below_max(kernel)  # Note [exp below the row max]
        # Note [Row max of a softmax]: stage -> (its max accumulator, its load)
        self.vector_max = {} if self.tile_var else _plan_vector_max(kernel, self.below_max)
        self.max_slots = [b.alloca(MAX_VECTOR, name=f"vmax{j}") for j in range(MAX_GROUP)
                          ] if self.vector_max else []
        self.max_tail = b.alloca(F32, name="vmax.tail") if self.vector_max else None
        # Note [Next row's max]: the key of the next row's max, found before the last stage
        self.ahead = b.alloca(I32, name="vmax.next") if _max_ahead(
            kernel, self.vector_max, self.reuse) else None

    def run(self):
        k = self.k
        self.parallel_stage = not k.outer and k.parallel_extent() != 0
        if self.tile_var is None and self.row_checks:
            # Note [Symbolic rows]: the loops twice, with the row scratch plans when this
            # call's rows fit them, and without.
            b = self.b
            fits = None
            for op, expr, bound in self.row_checks:
                value = self.size(expr)
                ok = b.icmp_signed("<=" if op == "le" else ">=", value,
                                   lir.Constant(I64, bound))
                fits = ok if fits is None else b.and_(fits, ok)
            reuse, streams = self.reuse, self.streams
            with b.if_else(fits) as (then, otherwise):
                with then:
                    self.outer_loops()
                with otherwise:
                    self.reuse, self.streams = {}, {}
                    self.outer_loops()
            self.reuse, self.streams = reuse, streams
            return
        if self.tile_var is None:
            self.outer_loops()
            return
        var, size = k.outer[-1]
        parallel_tiles = len(k.outer) == 1

        def tiles():
            lo, hi = (self.start, self.end) if parallel_tiles else (
                lir.Constant(I64, 0), self.size(size))
            self.counted_loop(f"{var}.tile", lo, hi, self.tile, lambda t: self.tile_body(t, hi))
        self.loops(list(k.outer[:-1]), tiles, parallel=not parallel_tiles)

    def outer_loops(self):
        """The outer loops around outer_body; with Note [Next row's max], the first row's
        max before them."""
        k = self.k
        if self.ahead is not None:
            b = self.b
            with b.if_then(b.icmp_signed("<", self.start, self.end)):
                self.vars[k.outer[0][0]] = self.start
                self.vector_max_stage(k.stages[0], *self.vector_max[0], into=self.ahead)
        self.loops(list(k.outer), self.outer_body, parallel=bool(k.outer))

    def counted_loop(self, name, lo, hi, step: int, body_fn, vectors: bool = False):
        """for (iv = lo; iv < hi; iv += step) body_fn(iv).  `vectors`: the body is explicit
        vector code (one vector a step), so the loop gets no vectorizer hints: LLVM
        cannot widen an instruction that already returns a vector, and a hinted loop it
        cannot vectorize printed "remark: loop not vectorized" on the user's stderr."""
        b = self.b
        pre = b.block
        cond = self.fn.append_basic_block(f"{name}.cond")
        body = self.fn.append_basic_block(f"{name}.body")
        done = self.fn.append_basic_block(f"{name}.done")
        b.branch(cond)
        b.position_at_end(cond)
        iv = b.phi(I64, name=name)
        iv.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", iv, hi), body, done)
        b.position_at_end(body)
        loops, math = self.loop_count, self.ops.vector_math
        self.loop_count += 1
        body_fn(iv)
        nxt = b.add(iv, lir.Constant(I64, step), flags=("nsw",))
        iv.add_incoming(nxt, b.block)
        back = b.branch(cond)
        if self.loop_count == loops + 1 and self.ops.vector_math > math and not vectors:
            # an innermost loop with vector math: Note [Interleaved vector math]
            count = _interleave_count(lo, hi)
            if count > 1:  # and Note [Vector width of math loops]
                width = MATH_VECTOR if jit.host_has_avx512() else 0
                back.set_metadata("llvm.loop", _loop_id(self.fn.module, count, width))
        b.position_at_end(done)

    def loops(self, dims, inner, parallel: bool):
        """Nested counted loops over dims [(var, size)]; the first may be the parallel range."""
        if not dims:
            inner()
            return
        (var, size), rest = dims[0], dims[1:]
        lo, hi = (self.start, self.end) if parallel else (lir.Constant(I64, 0),
                                                           self.size(size))

        def body(iv):
            self.vars[var] = iv
            self.loops(rest, inner, False)
        self.counted_loop(var, lo, hi, 1, body)

    def slot_dtype(self, acc) -> DType:
        """The dtype `acc` is kept in (Note [Wide sums], Note [Short row sums])."""
        return compute_dtype(acc.dtype) if acc.name in self.narrow else _slot_dtype(acc)

    def acc_slot(self, name: str):
        slot, _ = self.accs[name]
        if self.tile_var is None:
            return slot
        return self.b.gep(slot, [lir.Constant(I64, 0), self.lane], inbounds=True)

    def init_accs(self):
        for name, (_, acc) in self.accs.items():
            init = self.ops.const(_init(acc.op, acc.dtype), TV(None, self.slot_dtype(acc)))
            if name in self.keyed:  # Note [Row max as integer max]
                init = TV(_float_key(self.b, init.value, acc.op), None)
            self.b.store(init.value, self.acc_slot(name))

    def outer_body(self):
        self.init_accs()
        b = self.b
        last = len(self.k.stages) - 1
        for i, stage in enumerate(self.k.stages):
            if i == last and self.prefetch:
                self.prefetch_next_row()  # Note [Next-row prefetch]
            if i == last and self.ahead is not None:  # Note [Next row's max]
                var = self.k.outer[0][0]
                here = self.vars[var]
                self.vars[var] = b.add(here, lir.Constant(I64, 1), flags=("nsw",))
                with b.if_then(b.icmp_signed("<", self.vars[var], self.end)):
                    self.vector_max_stage(self.k.stages[0], *self.vector_max[0],
                                          into=self.ahead)
                self.vars[var] = here
            if i == 0 and self.ahead is not None:  # this row's max, found ahead
                acc = self.vector_max[0][0]
                b.store(b.load(self.ahead, typ=I32), self.acc_slot(acc))
                continue
            if i in self.vector_max:  # Note [Row max of a softmax]
                self.vector_max_stage(stage, *self.vector_max[i])
                continue
            streams = self.streams.get(i, {})
            if len(streams) == 1 and _vector_stage(self, stage):
                # Note [Vector streamed stage]
                ((buf, (_, row, n)),) = streams.items()
                self.vector_stream_stage(stage, buf, row, n)
                continue
            self.redirect = {buf: (scratch, stage.ranges[-1][0])
                             for buf, (scratch, _, _) in streams.items()}
            self.loops(list(stage.ranges), lambda st=stage: self.stage_body(st),
                       parallel=self.parallel_stage)
            self.redirect = {}
            for buf, (scratch, row, n) in streams.items():
                self.stream_row(buf, scratch, row, n)

    def prefetch_next_row(self):
        """Note [Next-row prefetch]: one prefetch per cache line of the next outer point's
        row of each planned load."""
        b = self.b
        var = self.k.outer[-1][0]
        fn = self.fn.module.declare_intrinsic(
            "llvm.prefetch", [lir.PointerType()],
            lir.FunctionType(lir.VoidType(), [lir.PointerType(), I32, I32, I32]))
        here = self.vars[var]
        self.vars[var] = b.add(here, lir.Constant(I64, 1), flags=("nsw",))
        for buf, row, n in self.prefetch:
            arg, dtype = self.bufs[buf]
            ty = llvm_type(dtype, storage=True)
            # not inbounds: after the last row this points past the buffer (a prefetch
            # of any address is harmless, and nothing reads through it)
            start = b.gep(arg, [self.index(row)], source_etype=ty)

            def line(i, start=start, ty=ty):
                b.call(fn, [b.gep(start, [i], source_etype=ty), lir.Constant(I32, 0),
                            lir.Constant(I32, 3), lir.Constant(I32, 1)])
            self.counted_loop(f"{buf}.prefetch", lir.Constant(I64, 0), lir.Constant(I64, n),
                              CACHE_LINE // dtype.itemsize, line)
        self.vars[var] = here

    def stream_row(self, buf: str, scratch, row: Index, n: int):
        """Copy a finished output row from its scratch with non-temporal vector stores.

        See Note [Streaming stores].  In 64-byte vectors when the row's address is 64-byte
        aligned and the host has AVX-512, else in 32-byte vectors when it is 32-byte
        aligned; otherwise (and for the tail) with plain stores.
        """
        b = self.b
        arg, dtype = self.bufs[buf]
        ty = llvm_type(dtype, storage=True)
        out = b.gep(arg, [self.index(row)], inbounds=True, source_etype=ty)
        address = b.ptrtoint(out, I64)
        end = lir.Constant(I64, n) if isinstance(n, int) else self.size(n)
        done = self.fn.append_basic_block(f"{buf}.streamed")
        nontemporal = self.fn.module.add_metadata([lir.Constant(I32, 1)])

        def copy(i, vec=None):
            src = b.gep(scratch, [lir.Constant(I64, 0), i], inbounds=True)
            dst = b.gep(out, [i], inbounds=True, source_etype=ty)
            if vec is not None:
                nbytes = vec.count * dtype.itemsize
                st = b.store(b.load(src, typ=vec, align=nbytes), dst, align=nbytes)
                st.set_metadata("nontemporal", nontemporal)
            else:
                b.store(b.load(src, typ=ty, align=dtype.itemsize), dst, align=dtype.itemsize)
        for nbytes in _stream_widths():
            width = nbytes // dtype.itemsize
            fast = self.fn.append_basic_block(f"{buf}.stream{nbytes}")
            other = self.fn.append_basic_block(f"{buf}.not{nbytes}")
            misaligned = b.and_(address, lir.Constant(I64, nbytes - 1))
            b.cbranch(b.icmp_unsigned("==", misaligned, lir.Constant(I64, 0)), fast, other)
            b.position_at_end(fast)
            if isinstance(n, int):
                body = lir.Constant(I64, n - n % width)
            else:
                body = b.sub(end, b.srem(end, lir.Constant(I64, width)))
            vec = lir.VectorType(ty, width)
            self.counted_loop(f"{buf}.nt{nbytes}", lir.Constant(I64, 0), body, width,
                              lambda i, vec=vec: copy(i, vec), vectors=True)
            self.counted_loop(f"{buf}.tail{nbytes}", body, end, 1, copy)
            b.branch(done)
            b.position_at_end(other)
        self.counted_loop(f"{buf}.copy", lir.Constant(I64, 0), end, 1, copy)
        b.branch(done)
        b.position_at_end(done)

    def vector_max_stage(self, stage, acc: str, load: Let, into=None):
        """Note [Row max of a softmax]: the row's max by vmaxps over 16-lane vectors, in
        MAX_GROUP independent accumulators, then the last n % 16 elements one by one; a
        NaN element is passed over.  Stores the max's key in the accumulator's slot, or in
        `into` (Note [Next row's max])."""
        b = self.b
        var, n = stage.ranges[0]
        attrs = dict(load.attrs)
        maxps = self.fn.module.declare_intrinsic(
            "llvm.x86.avx512.max.ps.512", (),
            lir.FunctionType(MAX_VECTOR, [MAX_VECTOR, MAX_VECTOR, I32]))
        current = lir.Constant(I32, 4)  # _MM_FROUND_CUR_DIRECTION: no rounding override
        width = MAX_VECTOR.count
        low = lir.Constant(MAX_VECTOR, [float("-inf")] * width)
        for slot in self.max_slots:
            b.store(low, slot)

        def step(iv, slots):
            for j, slot in enumerate(slots):
                self.vars[var] = b.add(iv, lir.Constant(I64, j * width), flags=("nsw",))
                addr, _ = self.address(attrs["buf"], attrs["index"])
                x = b.load(addr, typ=MAX_VECTOR, align=4)
                # vmaxps(x, m) is m where x is NaN (its second operand)
                b.store(b.call(maxps, [x, b.load(slot, typ=MAX_VECTOR), current]), slot)
        group = width * len(self.max_slots)
        grouped, vectors = n - n % group, n - n % width
        self.counted_loop(f"{var}.max", lir.Constant(I64, 0), lir.Constant(I64, grouped),
                          group, lambda iv: step(iv, self.max_slots), vectors=True)
        self.counted_loop(f"{var}.max1", lir.Constant(I64, grouped),
                          lir.Constant(I64, vectors), width,
                          lambda iv: step(iv, self.max_slots[:1]), vectors=True)
        m = b.load(self.max_slots[0], typ=MAX_VECTOR)
        for slot in self.max_slots[1:]:
            m = b.call(maxps, [m, b.load(slot, typ=MAX_VECTOR), current])
        reduce = self.fn.module.declare_intrinsic(
            "llvm.vector.reduce.fmax.v16f32", (), lir.FunctionType(F32, [MAX_VECTOR]))
        m = b.call(reduce, [m])  # no NaN is left in m
        if n % width:
            scalar = self.max_tail
            b.store(m, scalar)

            def one(iv):
                self.vars[var] = iv
                x = self.load(attrs["buf"], attrs["index"]).value
                old = b.load(scalar, typ=F32)
                b.store(b.select(b.fcmp_ordered(">", x, old), x, old), scalar)
            self.counted_loop(f"{var}.max.tail", lir.Constant(I64, vectors),
                              lir.Constant(I64, n), 1, one)
            m = b.load(scalar, typ=F32)
        b.store(_float_key(b, m, "max"), self.acc_slot(acc) if into is None else into)

    def vector_stream_stage(self, stage, buf: str, row: Index, n: int):
        """Note [Vector streamed stage]: the stage in explicit 16-lane vectors, each stored
        straight to the output row with a non-temporal store when the row is 64-byte
        aligned; the tail, and rows that are not aligned, run the scalar stage body with
        plain stores."""
        b = self.b
        var = stage.ranges[0][0]
        arg, dtype = self.bufs[buf]
        ty = llvm_type(dtype, storage=True)
        out = b.gep(arg, [self.index(row)], inbounds=True, source_etype=ty)
        aligned = b.icmp_unsigned("==", b.and_(b.ptrtoint(out, I64),
                                               lir.Constant(I64, FULL_STREAM_BYTES - 1)),
                                  lir.Constant(I64, 0))
        width = FULL_STREAM_BYTES // dtype.itemsize
        body_end = n - n % width

        def scalar(iv):
            self.vars[var] = iv
            self.stage_body(stage)
        with b.if_else(aligned) as (then, otherwise):
            with then:
                self.counted_loop(f"{var}.vec", lir.Constant(I64, 0),
                                  lir.Constant(I64, body_end), width,
                                  lambda iv: self.vector_body(stage, iv, buf, width),
                                  vectors=True)
                self.counted_loop(f"{var}.tail", lir.Constant(I64, body_end),
                                  lir.Constant(I64, n), 1, scalar)
            with otherwise:
                self.counted_loop(var, lir.Constant(I64, 0), lir.Constant(I64, n), 1, scalar)

    def vector_body(self, stage, iv, buf: str, width: int):
        """One vector of a stage _vector_stage accepted: elements iv .. iv + width - 1."""
        b = self.b
        var = stage.ranges[0][0]
        self.vars[var] = iv
        env: dict = {}  # name -> (TV, is_vector)
        nontemporal = self.fn.module.add_metadata([lir.Constant(I32, 1)])

        def vec(name):
            value, is_vector = env[name]
            if is_vector:
                return value
            undef = lir.Constant(lir.VectorType(value.value.type, width), None)
            one = b.insert_element(undef, value.value, lir.Constant(I32, 0))
            zeros = lir.Constant(lir.VectorType(I32, width), [0] * width)
            return TV(b.shuffle_vector(one, undef, zeros), value.dtype)
        for s in stage.body:
            if isinstance(s, Store):
                addr, dtype = self.address(s.buf, s.index)
                st = b.store(vec(s.value).value, addr, align=FULL_STREAM_BYTES)
                st.set_metadata("nontemporal", nontemporal)
                continue
            attrs = dict(s.attrs)
            plan = self.reuse.get(s.name)
            vty = lir.VectorType(llvm_type(s.dtype), width)
            if plan is not None:  # a row value stored by an earlier stage (Note [Row reuse])
                env[s.name] = (TV(b.load(self.row_slot(plan[1], stage), typ=vty,
                                         align=s.dtype.itemsize), s.dtype), True)
            elif s.op == "load" and var in attrs["index"].variables():
                addr, dtype = self.address(attrs["buf"], attrs["index"])
                env[s.name] = (TV(b.load(addr, typ=vty, align=dtype.itemsize), s.dtype), True)
            elif s.op == "truediv" and s.dtype.is_float and not env[s.args[1]][1]:
                # Note [Reciprocal of row values], as stage_body does it (also when x is
                # fixed for the row: a mean's sum / n)
                x, is_vector = env[s.args[0]]
                recip = _reciprocal(b, env[s.args[1]][0].value)
                if is_vector:
                    env["recip"] = (TV(recip, s.dtype), False)
                    recip = vec("recip").value
                env[s.name] = (TV(b.fmul(x.value, recip), s.dtype), is_vector)
            elif s.op == "load" or not any(env[a][1] for a in s.args):
                env[s.name] = (self.let(s, {a: env[a][0] for a in s.args}), False)
            else:
                env[s.name] = (getattr(self.ops, s.op)(*[vec(a) for a in s.args]), True)

    def tile_body(self, tile_start, hi):
        """Note [Outer reductions]: the tiled outer dim becomes every stage's innermost loop.

        A reduction whose reduced dims are not the contiguous ones (sum over dim 0)
        would read memory with a large stride in its inner loop.  Tiling runs each
        stage for TILE consecutive outer points at once, lane `j` keeping its own
        accumulator, so the inner loop walks contiguous memory and vectorizes
        without reassociation.  Per outer point, the statements run in the same order.
        A tile of TILE = 4096 points reads each row of up to 4096 points whole, one
        contiguous stream the hardware prefetchers follow; 512-point tiles read 2 KB
        pieces of each row, and a column sum of a [1024, 1024] f32 tensor not in cache
        took 0.48 ms against 0.27 ms with whole rows (ATen: 0.33 ms).
        """
        b = self.b
        width = b.sub(hi, tile_start)
        tile = lir.Constant(I64, self.tile)
        width = b.select(b.icmp_signed("<", width, tile), width, tile)
        var = self.tile_var

        def lanes(body_fn):
            def lane_body(j):
                self.lane = j
                self.vars[var] = b.add(tile_start, j, flags=("nsw",))
                body_fn()
            self.counted_loop(f"{var}.lane", lir.Constant(I64, 0), width, 1, lane_body)
        lanes(self.init_accs)
        for stage in self.k.stages:
            self.loops(list(stage.ranges), lambda st=stage: lanes(lambda: self.stage_body(st)),
                       parallel=False)

    def stage_body(self, stage):
        env: dict = {}
        invariant: set = set()  # temps that do not change within the stage's loops
        for s in stage.body:
            if isinstance(s, Let):
                if s.op in ("acc", "const") or (s.op != "load" and s.args and
                                                all(a in invariant for a in s.args)):
                    invariant.add(s.name)
                if s.op == "truediv" and s.args[1] in invariant and s.dtype.is_float:
                    # Note [Reciprocal of row values]: x / d with d fixed for the whole
                    # stage is x * (1/d), 1/d hoisted out of the loop.
                    a, d = env[s.args[0]], env[s.args[1]]
                    env[s.name] = TV(self.b.fmul(a.value, _reciprocal(self.b, d.value)),
                                     s.dtype)
                    continue
                plan = self.reuse.get(s.name)
                if plan is not None and plan[0] == "load":
                    env[s.name] = TV(self.b.load(self.row_slot(plan[1], stage),
                                                 typ=llvm_type(s.dtype)), s.dtype)
                    continue
                env[s.name] = self.let(s, env)
                if plan is not None:
                    self.b.store(env[s.name].value, self.row_slot(plan[1], stage))
            elif isinstance(s, Store):
                self.store(s, env[s.value])
            elif isinstance(s, Reduce):
                self.reduce(s, env[s.value])

    def row_slot(self, i: int, stage):
        """The element of row scratch i at the current point of `stage`'s loops."""
        offset, stride = Index.of(0), 1
        for var, size in reversed(stage.ranges):
            offset = offset + Index.var(var).scale(stride)
            stride = sizes.norm(stride * size)
        return self.b.gep(self.scratch[i], [lir.Constant(I64, 0), self.index(offset)],
                          inbounds=True)

    # --- statements ----------------------------------------------------------------------
    def let(self, s: Let, env) -> TV:
        ops, attrs = self.ops, dict(s.attrs)
        if s.op == "load":
            return self.load(attrs["buf"], attrs["index"])
        if s.op == "acc":
            slot = self.acc_slot(attrs["acc"])
            _, acc = self.accs[attrs["acc"]]
            if acc.name in self.keyed:  # Note [Row max as integer max]
                ty = llvm_type(self.slot_dtype(acc))
                return TV(_key_float(self.b, self.b.load(slot, typ=_key_type(ty)), ty), s.dtype)
            value = self.b.load(slot, typ=llvm_type(self.slot_dtype(acc)))
            if self.slot_dtype(acc) != s.dtype:  # a wide sum, narrowed where it is read
                value = self.b.fptrunc(value, llvm_type(s.dtype))
            return TV(value, s.dtype)
        args = [env[a] for a in s.args]
        if s.op == "const":
            return ops.const(attrs["value"], TV(None, s.dtype))
        if s.op == "size":
            n = self.size(attrs["value"])
            if s.dtype.is_float:
                return TV(self.b.sitofp(n, llvm_type(s.dtype)), s.dtype)
            return ops.cast(TV(n, compute_dtype(I64_DTYPE)), s.dtype)
        if s.op == "cast":
            return ops.cast(args[0], attrs["dtype"])
        if s.op == "compare":
            return ops.compare(attrs["name"], *args)
        if s.op == "exp" and s.name in self.below_max:  # Note [exp below the row max]
            ops.vector_math += 1
            return TV(vmath.exp_nonpositive(self.b, ops, args[0].value), s.dtype)
        return getattr(ops, s.op)(*args)

    def address(self, name: str, index: Index):
        arg, dtype = self.bufs[name]
        return self.b.gep(arg, [self.index(index)], inbounds=True,
                          source_etype=llvm_type(dtype, storage=True)), dtype

    def load(self, name: str, index: Index) -> TV:
        b = self.b
        addr, dtype = self.address(name, index)
        raw = b.load(addr, align=dtype.itemsize, typ=llvm_type(dtype, storage=True))
        if dtype.short == "bf16":
            bits = b.shl(b.zext(raw, I32), lir.Constant(I32, 16))
            return TV(b.bitcast(bits, F32), compute_dtype(dtype))
        if dtype.short == "f16":
            return TV(b.fpext(raw, F32), compute_dtype(dtype))
        if dtype.is_bool:
            return TV(b.icmp_unsigned("!=", raw, lir.Constant(raw.type, 0)), dtype)
        return TV(raw, dtype)

    def store(self, s: Store, value: TV):
        b = self.b
        addr, dtype = self.address(s.buf, s.index)
        if s.buf in self.redirect:  # a streamed row: into its scratch first
            scratch, var = self.redirect[s.buf]
            addr = b.gep(scratch, [lir.Constant(I64, 0), self.vars[var]], inbounds=True)
        v = value.value
        if dtype.short == "bf16":
            v = to_bf16(b, v)
        elif dtype.short == "f16":
            v = b.fptrunc(v, llvm_type(dtype, storage=True))
        elif dtype.is_bool:
            v = b.zext(v, llvm_type(dtype, storage=True))
        b.store(v, addr, align=dtype.itemsize)

    def reduce(self, s: Reduce, value: TV):
        b = self.b
        _, acc = self.accs[s.acc]
        slot = self.acc_slot(s.acc)
        wide = self.slot_dtype(acc)
        if s.acc in self.keyed:  # Note [Row max as integer max]
            key = _float_key(b, value.value, acc.op)
            name = "llvm.smax" if acc.op == "max" else "llvm.smin"
            old = b.load(slot, typ=key.type)
            b.store(b.call(_binary_intrinsic(self.ops.m, name, key.type), [old, key]), slot)
            return
        old = b.load(slot, typ=llvm_type(wide))
        new = value.value
        if wide != compute_dtype(acc.dtype):  # Note [Wide sums]
            new = b.fpext(new, llvm_type(wide))
        b.store(_combine(b, self.ops, acc.op, wide, old, new), slot)

    def index(self, idx: Index):
        b = self.b
        total = None
        for atom, c in idx.terms:
            if isinstance(atom, DivMod):  # the inner index is never negative
                v = self.index(atom.inner)
                if atom.div != 1:
                    v = b.sdiv(v, self.size(atom.div))
                if atom.mod is not None:
                    v = b.srem(v, self.size(atom.mod))
            else:
                v = self.vars[atom]
            term = v if c == 1 else b.mul(v, self.size(c), flags=("nsw",))
            total = term if total is None else b.add(total, term, flags=("nsw",))
        if total is None or idx.const != 0:
            const = self.size(idx.const)
            total = const if total is None else b.add(total, const, flags=("nsw",))
        return total

    def size(self, x):
        """An i64 holding the size `x`: a constant, or computed from the kernel's size
        arguments (Note [Runtime sizes]); LLVM hoists and shares what loops repeat."""
        if isinstance(x, int):
            return lir.Constant(I64, x)
        return self._tree(sizes.decompose(x))

    def _tree(self, t):
        b = self.b
        op, arg = t
        if op == "int":
            return lir.Constant(I64, arg)
        if op == "sym":
            return self.symbols[arg]
        vals = [self._tree(a) for a in arg]
        if op in ("add", "mul", "max", "min"):
            out = vals[0]
            for v in vals[1:]:
                if op == "add":
                    out = b.add(out, v, flags=("nsw",))
                elif op == "mul":
                    out = b.mul(out, v, flags=("nsw",))
                else:
                    out = b.select(b.icmp_signed(">" if op == "max" else "<", out, v), out, v)
            return out
        a, d = vals
        q, r = b.sdiv(a, d), b.srem(a, d)
        # Python's floor semantics: adjust when the remainder's sign differs from d's.
        fix = b.and_(b.icmp_signed("!=", r, lir.Constant(I64, 0)),
                     b.icmp_signed("<", b.xor(r, d), lir.Constant(I64, 0)))
        if op == "floordiv":
            return b.sub(q, b.zext(fix, I64))
        return b.select(fix, b.add(r, d), r)


# Ops worth keeping in a row scratch instead of recomputing (Note [Row reuse]).
_EXPENSIVE = frozenset({"exp", "log", "tanh", "sigmoid", "erf", "log1p", "expm1", "sin", "cos",
                        "pow", "atan2"})
ROW_SCRATCH_MAX = 16384  # elements per scratch row (it lives on the stack)


def _plan_reuse(k: Kernel):
    """Note [Row reuse]: an expensive value computed again in a later stage is stored.

    In a row-wise kernel (softmax) a later stage often recomputes exactly what an
    earlier stage over the same loop ranges computed (exp(x - max)): same loads at
    the same indices, same ops, same accumulators (which are final by then).  The
    first stage stores such a value in a per-row scratch array on the stack and
    later stages load it: the same bits, one transcendental per element instead
    of two.  The scratch is 64-byte aligned: the stack gave it 16, and each 16-lane
    vector stored or loaded there split a cache line (softmax [4096, 1024], kernel
    alone: 1.60 -> 1.49 ms).
    Returns ({let name: ("store" | "load", scratch)}, [(size, dtype)]).
    """
    plan, scratch, first = {}, [], {}
    for stage in k.stages:
        n = 1
        for _, size in stage.ranges:
            n = sizes.norm(n * size)
        # A symbolic row length is checked at run time (Note [Symbolic rows]).
        if not stage.ranges or (isinstance(n, int) and n > ROW_SCRATCH_MAX):
            continue
        keys: dict = {}
        for s in stage.body:
            if not isinstance(s, Let):
                continue
            key = (s.op, s.attrs, s.dtype, tuple(keys[a] for a in s.args))
            keys[s.name] = key
            if s.op not in _EXPENSIVE:
                continue
            where = (stage.ranges, key)
            if where not in first:
                first[where] = s.name
            else:
                producer = first[where]
                if producer not in plan:
                    plan[producer] = ("store", len(scratch))
                    scratch.append((n, s.dtype))
                plan[s.name] = ("load", plan[producer][1])
    return plan, scratch


# Note [Symbolic rows]
# Row reuse and streaming stores keep a row in a stack scratch whose size LLVM must
# know.  A kernel whose row length is symbolic (Note [Runtime sizes] in
# codegen/kernel.py) gets scratch rows of the largest size they may have
# (ROW_SCRATCH_MAX elements) and its loops twice: with the scratch plans, run when
# this call's sizes meet every condition the static planner checks at compile time
# (row length <= ROW_SCRATCH_MAX; for streams also output bytes >= STREAM_MIN_BYTES
# and a row of at least 4 vectors), and without them otherwise.  The branch is taken
# once per launch, so a symbolic softmax computes exp once per element and streams its
# big outputs, as the static one does.  These are the only size classes a kernel
# distinguishes, and it does so at run time: nothing is compiled per size.

# Note [Streaming stores]
# A row kernel writing a big output (softmax, layer_norm on [4096,1024]) is bound by
# memory traffic, and a plain store first reads the line it writes (read for
# ownership): 16 MB written cost 32 MB of traffic.  Non-temporal stores write whole
# lines without reading them.  LLVM's vectorizer only keeps the `!nontemporal` mark
# on stores it can prove 32-byte aligned, which a scalar store in a loop never is;
# so the final stage writes the row into an aligned stack scratch (L1, vectorized
# as before) and a copy loop emitted here in vector form streams it out with
# aligned non-temporal stores when the row's address is 32-byte aligned (checked per
# row; the runtime's buffers are 64-byte aligned), plain stores otherwise and for
# the tail.  Only for outputs of at least STREAM_MIN_BYTES, which would not stay in
# cache anyway, and only on x86 (an sfence ends the kernel).
STREAM_BYTES = 32  # one AVX2 vector
# Note [Full-width streaming]: with AVX-512, a row whose address is 64-byte aligned is
# streamed in 64-byte vectors (one load and one store per 16 f32, not two of each):
# layer_norm [4096, 1024] 1.435 -> 1.337 ms (whole call, same-process A/B, each variant
# twice, 1 thread, CPU time, loaded machine); softmax unchanged (2.08 ms: its exp
# pass dominates).  32-byte aligned rows keep 32-byte vectors.
FULL_STREAM_BYTES = 64


def _stream_widths() -> list:
    """The vector sizes in bytes stream_row tries, widest first (Note [Full-width
    streaming])."""
    return [FULL_STREAM_BYTES, STREAM_BYTES] if jit.host_has_avx512() else [STREAM_BYTES]
STREAM_MIN_BYTES = 8 << 20
_STREAM_DTYPES = frozenset({"f32", "f64", "i32", "i64"})


def _x86(module) -> bool:
    return str(module.triple).startswith(("x86_64", "i686", "i386"))


def _plan_streams(k: Kernel) -> list:
    """[(stage index, buffer, row start Index, row length, run-time checks)] to write with
    streaming stores.

    A stage qualifies when it has one range, inside an outer loop, and a buffer it
    stores exactly once, contiguously along that range (index = row start + r) with
    a row start made of outer vars only; the buffer is big (STREAM_MIN_BYTES) and
    its rows fit a stack scratch (ROW_SCRATCH_MAX).  For symbolic sizes the last
    two are conditions checked at run time (Note [Symbolic rows]).
    """
    if not k.outer:
        return []
    outer = {var for var, _ in k.outer}
    dtypes = {b.name: b.dtype for b in k.buffers}
    numel = {b.name: b.numel for b in k.buffers}
    out = []
    for i, stage in enumerate(k.stages):
        if len(stage.ranges) != 1:
            continue
        var, n = stage.ranges[0]
        stores = [s for s in stage.body if isinstance(s, Store)]
        for s in stores:
            dtype = dtypes[s.buf]
            if [t.buf for t in stores].count(s.buf) != 1 or dtype.short not in _STREAM_DTYPES:
                continue
            checks = [("ge", sizes.norm(numel[s.buf] * dtype.itemsize), STREAM_MIN_BYTES),
                      ("le", n, ROW_SCRATCH_MAX),
                      ("ge", sizes.norm(n * dtype.itemsize), 4 * STREAM_BYTES)]
            if any(isinstance(x, int) and not (x <= bound if op == "le" else x >= bound)
                   for op, x, bound in checks):
                continue
            rest = tuple((a, c) for a, c in s.index.terms if a != var)
            if s.index.coeff(var) != 1 or any(a not in outer for a, _ in rest):
                continue
            symbolic = [c for c in checks if not isinstance(c[1], int)]
            out.append((i, s.buf, Index(rest, s.index.const), n, symbolic))
    return out


# Note [Vector streamed stage]
# A streamed stage (Note [Streaming stores]) wrote its row into a stack scratch, and a
# copy loop read it back to store it with non-temporal stores: one more load and store
# per vector.  On an AVX-512 host, a streamed stage whose body is simple enough is
# emitted here in explicit 16-lane vectors instead, storing each vector straight to the
# output (softmax's normalization, layer_norm's affine step): f32 loads contiguous along
# the row or fixed for it, values of a row scratch (Note [Row reuse]), accumulators,
# constants, and add, sub, mul, truediv, neg on f32; one store, the streamed one.  Rows
# whose address is not 64-byte aligned, and the last n % 16 elements, run the scalar
# body with plain stores.  The same operations per element (a division by a value fixed
# for the row is `arcp`, as in the scalar body), so the same results.
_VECTOR_OPS = frozenset({"load", "acc", "const", "add", "sub", "mul", "truediv", "neg"})


def _vector_stage(em: "_Emitter", stage) -> bool:
    """Whether `stage` (streamed, one range) can be emitted by vector_stream_stage."""
    if not jit.host_has_avx512() or len(stage.ranges) != 1:
        return False
    var, n = stage.ranges[0]
    if not isinstance(n, int) or n < FULL_STREAM_BYTES // 4:
        return False
    dtypes = {buf.name: buf.dtype for buf in em.k.buffers}
    stores, varying = 0, set()  # varying: temps that change along the row
    for s in stage.body:
        if isinstance(s, Reduce):
            return False
        if isinstance(s, Store):
            stores += 1
            if dtypes[s.buf].short != "f32" or s.buf in {o for o, _ in em.k.inplace}:
                return False
            continue
        plan = em.reuse.get(s.name)
        if plan is not None:
            if plan[0] != "load" or s.dtype.short != "f32":
                return False
            varying.add(s.name)
        elif s.op == "load":
            index = dict(s.attrs)["index"]
            if var in index.variables():
                if dtypes[dict(s.attrs)["buf"]].short != "f32" or index.coeff(var) != 1 or any(
                        not isinstance(a, str) and var in a.inner.variables()
                        for a, _ in index.terms):
                    return False
                varying.add(s.name)
        elif any(a in varying for a in s.args):
            # a value fixed for the row is computed once, as a scalar, whatever its op
            if s.op not in _VECTOR_OPS or s.dtype.short != "f32":
                return False
            varying.add(s.name)
    return stores == 1


# Note [Next-row prefetch]
# A row kernel of several stages (softmax, log_softmax, layer_norm) reads its row from
# memory in the first stage and works on it in the cache for the rest, so memory sits
# idle while the exp and the normalization run, and each row starts with a wait.  The
# hardware prefetchers do not cover it: they stop at 4 KB page boundaries, and a row
# of 1024 f32 is a page.  So just before the last stage the kernel prefetches the next
# outer point's row (one `llvm.prefetch`, read, into L1, per 64-byte line) of each
# buffer the first stage reads as a contiguous row; its loads then overlap the last
# stage and the row's streamed stores.  Prefetching before the second stage instead, two
# rows ahead, or into L2 only measured slower.  Only for static rows of PREFETCH_MIN_BYTES
# to PREFETCH_MAX_BYTES: shorter rows share pages, which the prefetchers follow, and
# longer ones are mostly inside pages.  Same-process A/B (1 thread, CPU time, loaded
# machine): softmax [4096, 1024] 2.33 -> 2.10 ms, layer_norm 1.50 -> 1.40 ms.
CACHE_LINE = 64
PREFETCH_MIN_BYTES = 1024
PREFETCH_MAX_BYTES = 16384


def _plan_prefetch(k: Kernel) -> list:
    """[(buffer, row start Index, row length)] to prefetch a row ahead: the buffers the
    first stage loads contiguously along its one static range, from a row start made of
    outer vars including the innermost one (See Note [Next-row prefetch])."""
    if not k.outer or len(k.stages) < 2 or len(k.stages[0].ranges) != 1:
        return []
    outer = {var for var, _ in k.outer}
    dtypes = {b.name: b.dtype for b in k.buffers}
    var, n = k.stages[0].ranges[0]
    if not isinstance(n, int):
        return []
    out, seen = [], set()
    for s in k.stages[0].body:
        if not (isinstance(s, Let) and s.op == "load") or s.attr("buf") in seen:
            continue
        buf, idx = s.attr("buf"), s.attr("index")
        rest = tuple((a, c) for a, c in idx.terms if a != var)
        if idx.coeff(var) != 1 or any(a not in outer for a, _ in rest) \
                or k.outer[-1][0] not in dict(rest):
            continue
        if PREFETCH_MIN_BYTES <= n * dtypes[buf].itemsize <= PREFETCH_MAX_BYTES:
            seen.add(buf)
            out.append((buf, Index(rest, idx.const), n))
    return out


# Note [exp below the row max]
# softmax and log_softmax compute exp(x - max) where max is the row's max of the same x:
# the argument is <= 0 or NaN (x - max of a row holding NaN or inf is NaN where it is
# not 0 or below), so exp needs no upper clamp and its 2^n is a normal number or 0:
# `vmath.exp_nonpositive` (the low clamp and flush of exp, 2^n by a shift: two vector
# instructions fewer).  The pattern: `exp(sub(load B[i], acc m))` in a stage, where an
# earlier stage over the same ranges folds `load B[i]` (the same buffer and index) into
# the max accumulator m directly.  Same results as exp.
def _plan_below_max(k: Kernel) -> set:
    """Names of the f32 `exp` temps whose argument is x - (row max of x)."""
    maxed: dict = {}  # (buf, index, ranges) -> {max accs folding that load}
    ops = {a.name: a.op for a in k.accs}
    found = set()
    for stage in k.stages:
        lets = {s.name: s for s in stage.body if isinstance(s, Let)}
        for s in stage.body:
            if isinstance(s, Let) and s.op == "exp" and s.dtype == f32:
                sub = lets.get(s.args[0])
                if sub is None or sub.op != "sub":
                    continue
                x, m = lets.get(sub.args[0]), lets.get(sub.args[1])
                if x is None or m is None or x.op != "load" or m.op != "acc":
                    continue
                key = (x.attr("buf"), x.attr("index"), stage.ranges)
                if m.attr("acc") in maxed.get(key, ()):
                    found.add(s.name)
        for s in stage.body:
            if isinstance(s, Reduce) and ops[s.acc] == "max":
                v = lets.get(s.value)
                if v is not None and v.op == "load" and v.dtype == f32:
                    key = (v.attr("buf"), v.attr("index"), stage.ranges)
                    maxed.setdefault(key, set()).add(s.acc)
    return found


# Note [Row max of a softmax]
# softmax and log_softmax shift a row by its max m (Note [exp below the row max]), and a
# float max propagates NaN (Note [Row max as integer max]: the key, a select for NaN,
# the integer max: about five vector instructions per 16 elements).  Where the row's
# exp(x - m) is summed into an accumulator S, a NaN element makes S NaN whatever m is
# (exp(NaN - m) is NaN, and so is a sum with a NaN term).  So when every output that
# depends on m also depends on S through operations that give NaN for a NaN operand
# (add, sub, mul, truediv, neg, exp, log), m need not propagate NaN: a row holding a NaN
# gives NaN outputs either way, and a row without one gives the same m.  On an AVX-512
# host, such a max over a static row of f32 loads (a stage that only loads and reduces)
# is vmaxps over 16-lane vectors, which passes a NaN element over: one vector
# instruction per 16 elements, in MAX_GROUP independent accumulators (vmaxps's latency
# is 4 cycles: 8 chains of 8 vectors for a row of 1024).  The last n % 16 elements are
# compared one by one.  Where m is +0 or -0 (the row's largest elements are zeros of
# both signs) the results are the same: x - m and exp(x - m) are equal for both, and
# the second zero makes S >= 2, so log(S) is not 0.  Kernel alone
# (bench/MEASUREMENTS.md): softmax [4096, 1024] 1.46 -> 1.35 ms, [1024, 4096] 2.40 ->
# 2.22 ms, log_softmax [1024, 2048] 0.99 -> 0.90 ms.  Other hosts, and rows whose
# outputs do not all go through S (the max is itself an output, or a compare reads
# it), keep the keyed max of Note [Row max as integer max].
MAX_GROUP = 8
MAX_VECTOR = lir.VectorType(F32, 16)
_NAN_STRICT = frozenset({"add", "sub", "mul", "truediv", "neg", "exp", "log"})


def _plan_vector_max(k: Kernel, below_max: set) -> dict:
    """{stage index: (max accumulator, its load)} for the row maxes vector_max_stage emits
    (See Note [Row max of a softmax])."""
    if not jit.host_has_avx512():
        return {}
    ops = {a.name: a for a in k.accs}
    # the sums S of an exp below the row max m: m -> {S}
    sums: dict = {}
    for stage in k.stages:
        lets = {s.name: s for s in stage.body if isinstance(s, Let)}
        for s in stage.body:
            if isinstance(s, Reduce) and s.value in below_max and ops[s.acc].op == "sum":
                m = lets[lets[s.value].args[0]].args[1]
                sums.setdefault(lets[m].attr("acc"), set()).add(s.acc)
    out = {}
    for i, stage in enumerate(k.stages):
        if len(stage.ranges) != 1 or len(stage.body) != 2:
            continue
        var, n = stage.ranges[0]
        load, red = stage.body
        if not (isinstance(n, int) and n >= MAX_VECTOR.count and isinstance(load, Let)
                and load.op == "load" and load.dtype == f32 and isinstance(red, Reduce)
                and red.value == load.name and ops[red.acc].op == "max"
                and ops[red.acc].dtype == f32 and red.acc in sums):
            continue
        index = load.attr("index")
        buf = next(b for b in k.buffers if b.name == load.attr("buf"))
        if buf.dtype != f32 or index.coeff(var) != 1 or any(
                not isinstance(a, str) and var in a.inner.variables() for a, _ in index.terms):
            continue
        if _outputs_strict(k, red.acc, sums[red.acc]):
            out[i] = (red.acc, load)
    return out


# Note [Next row's max]
# A softmax row runs its max pass, its exp-and-sum pass, then its normalization, which
# stores the row with non-temporal stores.  The next row's max pass came right after
# those stores, and its loads (of the input row at the same offsets within a 4 KB page
# when the output's rows start at about the input's page offset) waited on the stores
# still in flight (4K aliasing): measured by the output's page offset, [4096, 1024]
# kernel alone 1.76-1.88 ms where the output started within ~1 KB after the input's
# offset, 1.53-1.64 elsewhere.  So the max of row o + 1 is found before row o's last
# stage, into a slot the next row takes as its max (the first row of a call's range is
# found before the loop; the last row finds none): its loads come before the stores,
# and its latency (the vmaxps chains and the horizontal reduction) overlaps the
# normalization.  Same results (the same max of the same row).  Kernel alone, the same
# buffers for both (bench/MEASUREMENTS.md): 1.62-1.69 ms in that window and 1.50-1.57
# outside it, faster at each of 16 output offsets.  Only where the first stage is a
# vector max (Note [Row max of a softmax]) of a kernel with one outer dim, and the last
# stage does not read the max's buffer: log_softmax's does (x - max - log(sum)), and
# measured slower with it ([1024, 2048] 0.84-0.86 -> 0.87-0.89 ms).
def _max_ahead(k: Kernel, vector_max: dict, reuse: dict) -> bool:
    """Whether the kernel finds each row's max one row ahead (Note [Next row's max]).
    `reuse`: the row reuse plan (a value reloaded from its row scratch needs none of its
    arguments: softmax's last stage reads exp(x - max) from there, not x)."""
    if 0 not in vector_max or len(k.outer) != 1 or len(k.stages) < 2 or k.inplace:
        return False
    buf = vector_max[0][1].attr("buf")
    last = k.stages[-1]
    lets = {s.name: s for s in last.body if isinstance(s, Let)}
    live = [s.value for s in last.body if not isinstance(s, Let)]
    seen = set()
    while live:
        name = live.pop()
        if name in seen or name not in lets:
            continue
        seen.add(name)
        s = lets[name]
        if s.op == "load" and s.attr("buf") == buf:
            return False
        if reuse.get(name, ("",))[0] != "load":
            live.extend(s.args)
    return True


def _outputs_strict(k: Kernel, m: str, strict_accs: set) -> bool:
    """Whether every store and reduction depending on accumulator `m` depends on one of
    `strict_accs` through NaN-propagating operations (Note [Row max of a softmax])."""
    tainted = {m}  # accumulators whose value depends on m
    changed = True
    while changed:  # an accumulator may be read in a stage before the one reducing into it
        changed = False
        for stage in k.stages:
            dep: dict = {}  # let name -> (depends on m, NaN whenever a strict acc is)
            for s in stage.body:
                if isinstance(s, Let):
                    if s.op == "acc":
                        a = s.attr("acc")
                        dep[s.name] = (a in tainted, a in strict_accs)
                    else:
                        args = [dep[a] for a in s.args]
                        dep[s.name] = (any(d for d, _ in args), s.dtype.is_float
                                       and s.op in _NAN_STRICT and any(t for _, t in args))
                elif isinstance(s, Store):
                    tainted_value, strict = dep[s.value]
                    if tainted_value and not strict:
                        return False
                elif isinstance(s, Reduce) and dep[s.value][0] and s.acc not in tainted:
                    tainted.add(s.acc)
                    changed = True
    return True


def _tile_var(k: Kernel):
    """The outer var to tile (Note [Outer reductions]), or None.

    Tile when the kernel reduces, some load is contiguous along the last outer var,
    and no load is contiguous along a stage's innermost var.
    """
    if not k.outer or not k.accs:
        return None
    var = k.outer[-1][0]
    loads = [s.attr("index") for st in k.stages for s in st.body
             if isinstance(s, Let) and s.op == "load"]
    if not any(idx.coeff(var) == 1 for idx in loads):
        return None
    for st in k.stages:
        if st.ranges and any(idx.coeff(st.ranges[-1][0]) == 1 for idx in loads):
            return None
    return var


def _init(op: str, dtype: DType):
    if op in ("sum", "any"):
        return 0
    if op in ("prod", "all"):
        return 1
    if dtype.is_float:
        return float("-inf") if op == "max" else float("inf")
    if dtype.is_bool:
        return op == "min"
    bits = dtype.bits
    if dtype.kind == "uint":
        return 0 if op == "max" else (1 << bits) - 1
    return -(1 << (bits - 1)) if op == "max" else (1 << (bits - 1)) - 1


# Note [Wide sums]
# A float sum accumulator is one scalar per output (per lane of a tile): the loop adds
# up to millions of terms into it one at a time.  In f32 that drifts: issue 11 found
# var over 1M f32 elements off by 4.7e-4 relative, where ATen (cascaded partial sums;
# var accumulated in double) is ~1e-7.  So an f32 (or f16/bf16, computed in f32) sum
# keeps its accumulator in f64: each term is widened (fpext) and added in double, and
# the total is narrowed (fptrunc) where the kernel reads it.  A 16M-term sum is then
# good to ~1e-9 relative, closer to the truth than ATen.  Memory-bound reductions hide
# the widening (bench rows reduce_*, var_dims01, sum_16m, mean_rows, softmax,
# layer_norm; before/after in the commit that made this change).  Products and max/min
# keep their dtype, and so do short row sums (Note [Short row sums]).  The Kernel
# itself is unchanged: this is how the LLVM backend carries out a `sum` accumulator
# (spec/codegen.md, "Numerics"); Triton's reductions are already blocked (a tree over
# RBLOCK per step).

# Note [Short row sums]
# The f64 accumulator of a wide sum makes LLVM's loop vectorizer size the loop by f64:
# 8 lanes where the f32 math around it (softmax's exp, layer_norm's centring) would run
# 16 (Note [Vector width by the narrowest type], jit.py).  A row of a row kernel adds
# few terms, and with `reassoc` LLVM keeps them in several 16-lane partial sums, so
# each partial sum adds a handful of terms: as accurate as ATen's f32 row sums (which
# are vectorized the same way), and drift (Note [Wide sums]) needs millions of terms.
# So an f32 sum accumulator reset per outer point (not tiled) that folds at most
# SHORT_ROW_SUM terms per point, all of static count, stays f32.  The exp-and-sum row
# pass of softmax over [8, 8, 128, 128]: 0.34 -> 0.16 ms.
# A softmax's sum of exp(x - max) (Note [exp below the row max]: every term in [0, 1])
# stays f32 for rows of up to EXP_ROW_SUM terms: ATen's softmax sums its row in f32 in
# one vector of partial sums (16 lanes with AVX-512, 8 with AVX2), and LLVM keeps 4
# interleaved vectors of them (Note [Interleaved vector math]), so each partial sum adds
# a quarter of the terms ATen's do.  Rows of 4096 ran the exp pass 8 f64 lanes wide
# (softmax [1024, 4096], kernel alone: 2.28 -> 1.96 ms, bench/MEASUREMENTS.md).
SHORT_ROW_SUM = 1024  # terms per outer point
EXP_ROW_SUM = 16384  # terms per outer point of a sum of exp below the row max


def _short_row_sums(k: Kernel, below_max: set = frozenset()) -> set:
    """Names of `k`'s f32 sum accumulators kept in f32 (See Note [Short row sums]);
    `below_max`: the exps of Note [exp below the row max]."""
    if not k.outer:
        return set()
    terms: dict = {}
    exp_only: dict = {}  # acc -> whether every term is an exp below the row max
    for stage in k.stages:
        n = 1
        for _, size in stage.ranges:
            n = n * size if isinstance(size, int) and isinstance(n, int) else None
        for st in stage.body:
            if isinstance(st, Reduce):
                terms[st.acc] = None if n is None or terms.get(st.acc, 0) is None \
                    else terms.get(st.acc, 0) + n
                exp_only[st.acc] = exp_only.get(st.acc, True) and st.value in below_max

    def short(a):
        limit = EXP_ROW_SUM if exp_only.get(a.name) else SHORT_ROW_SUM
        return terms.get(a.name) is not None and terms[a.name] <= limit
    return {a.name for a in k.accs if a.op == "sum" and compute_dtype(a.dtype) == f32
            and short(a)}


def _slot_dtype(acc) -> DType:
    """The dtype the accumulator `acc` is kept in."""
    dtype = compute_dtype(acc.dtype)
    if acc.op == "sum" and dtype.is_float and dtype.bits < 64:
        return f64
    return dtype


def _combine(b: lir.IRBuilder, ops, op: str, dtype: DType, old, new):
    dtype = compute_dtype(dtype)
    if op in ("any", "all") or dtype.is_bool:
        return (b.or_ if op in ("any", "max", "sum") else b.and_)(old, new)
    if dtype.is_float:
        if op == "sum":
            return b.fadd(old, new, flags=_REASSOC)
        if op == "prod":
            return b.fmul(old, new, flags=_REASSOC)
        name = "llvm.maximum" if op == "max" else "llvm.minimum"
        return b.call(_binary_intrinsic(ops.m, name, old.type), [old, new])
    if op == "sum":
        return b.add(old, new)
    if op == "prod":
        return b.mul(old, new)
    signed = dtype.kind == "int"
    name = {("max", True): "llvm.smax", ("min", True): "llvm.smin",
            ("max", False): "llvm.umax", ("min", False): "llvm.umin"}[(op, signed)]
    return b.call(_binary_intrinsic(ops.m, name, old.type), [old, new])


# Note [Row max as integer max]
# A float max (min) reduction is NaN-propagating and orders -0 below +0: llvm.maximum
# (llvm.minimum), which LLVM's loop vectorizer turns into a vector recurrence.  But in a
# masked row, `max(where(mask, x, -inf))` (a causal softmax), InstCombine rewrites
# maximum(acc, select(m, x, -inf)) into select(m, maximum(acc, x), acc) (-inf is
# maximum's identity), and the vectorizer does not vectorize that conditional
# recurrence: the row max ran scalar, 8 instructions an element (the masked softmax of
# [8, 8, 128, 128]: 6.5 ms against eager's 1.8 ms).  llvm.maxnum (no NaN propagation,
# so a second "saw a NaN" or-reduction beside it) was not vectorized either (LLVM 22:
# maxnum alone was; with the second reduction, with or without `nnan`, not).
# So the accumulator of a float max/min in a row kernel (not tiled: Note [Outer
# reductions] keeps one accumulator per lane in memory, with no recurrence) holds an
# integer key: the float's bits with the magnitude bits flipped when the sign is set,
# which orders keys as their floats (-inf < ... < -0 < +0 < ... < +inf), and a NaN made
# the largest key for max (the smallest for min), so it wins as llvm.maximum's NaN does.
# The reduction is llvm.smax/smin, an integer recurrence the vectorizer always takes, and
# the -inf of a masked element is not the key's identity, so nothing is rewritten.  The
# key is decoded where the accumulator is read (the same flip): the same value as
# llvm.maximum, a NaN coming back as a quiet NaN.
def _key_type(ty) -> lir.IntType:
    return lir.IntType(64 if ty == lir.DoubleType() else 32)


def _float_key(b: lir.IRBuilder, v, op: str):
    """The ordered integer key of float `v` (Note [Row max as integer max])."""
    ity = _key_type(v.type)
    w = ity.width
    bits = b.bitcast(v, ity)
    sign = b.ashr(bits, lir.Constant(ity, w - 1))
    key = b.xor(bits, b.and_(sign, lir.Constant(ity, (1 << (w - 1)) - 1)))
    nan_key = (1 << (w - 1)) - 1 if op == "max" else -(1 << (w - 1))
    return b.select(b.fcmp_unordered("uno", v, v), lir.Constant(ity, nan_key), key)


def _key_float(b: lir.IRBuilder, key, ty):
    """The float of an ordered key (the inverse of _float_key; NaN keys give NaN)."""
    w = key.type.width
    sign = b.ashr(key, lir.Constant(key.type, w - 1))
    bits = b.xor(key, b.and_(sign, lir.Constant(key.type, (1 << (w - 1)) - 1)))
    return b.bitcast(bits, ty)


def _reciprocal(b: lir.IRBuilder, d):
    """1 / d (Note [Reciprocal of row values])."""
    return b.fdiv(lir.Constant(d.type, 1.0), d)


def _binary_intrinsic(module, name: str, ty):
    return module.declare_intrinsic(name, [ty], lir.FunctionType(ty, [ty, ty]))

