"""Kernel -> Triton source: one `@triton.jit` function per Kernel, in a module of its own.

Owns: `emit_kernel(kernel, name, max_rblock) -> TritonKernel` (the module source
and how to launch it: argument order, sizes, block sizes, grid), the block-size
heuristic and the index-expression printer.  Must not know: graphs, torch,
loading or launching (codegen/triton/launch.py).  Spec: spec/codegen.md, "Triton".

The tiling (Note [Triton tiling]), the reuse of values across stages (Note [Reuse across
stages]), block sizes and sizes: spec/codegen.md, "Triton".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from codegen import sizes as sz
from codegen.kernel import DivMod, Index, Kernel, Let, Reduce, Store
from codegen.kernel_numpy import reduce_init
from codegen.scalar import compute_dtype
from codegen.triton.scalar import (
    HELPERS,
    TV,
    TritonScalarOps,
    combiner,
    helper_name,
    literal,
    tl_dtype,
)
from ir.types import bf16, f32

MAX_XBLOCK = 1024  # elements per program of a pointwise kernel
MAX_RBLOCK = 1024  # the longest stage run as one persistent tile
TILE = 1024  # elements per [XBLOCK, RBLOCK] tile of a rows kernel
INDEX_LIMIT = 2 ** 31  # int32 index arithmetic


@dataclass(frozen=True)
class TritonKernel:
    """A Kernel's Triton module and its launch: `name[(grid,)](*buffers, *sizes, **blocks)`."""

    name: str  # the @triton.jit function
    source: str  # the whole module: imports, helpers, the kernel
    sizes: tuple  # ((argument name, size), ...) after the buffers (sizes may be symbolic)
    blocks: tuple  # ((constexpr name, value), ...): symbolic kernels: the largest ones
    grid: int  # programs to launch (0: nothing to do); symbolic kernels: see `plan`
    params: tuple = ()  # the kernel's size symbols, arguments after `sizes`
    # symbolic kernels: values of `params` -> (size argument values, blocks, grid)
    plan: Optional[Callable] = None

    def fits(self, numels) -> bool:
        """Whether int32 index arithmetic covers buffers of these element counts."""
        return all(n < INDEX_LIMIT for n in numels)


def next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def emit_kernel(kernel: Kernel, name: str, max_rblock: int = MAX_RBLOCK) -> TritonKernel:
    """The Triton module for `kernel`.  Raises NotImplementedError for what it cannot emit."""
    if getattr(kernel, "inplace", ()):
        # Reuse across stages assumes loads see inputs nothing in the kernel writes.
        raise NotImplementedError("in-place kernels (an output over an input's bytes)")
    stored = [{st.buf for st in stage.body if isinstance(st, Store)} for stage in kernel.stages]
    if len(set().union(*stored)) < sum(map(len, stored)):
        # a scatter kernel (Note [Scatter kernels], codegen/lower.py): its second stage's
        # stores must follow every program's first-stage stores, which no launch orders
        raise NotImplementedError("stages storing into one buffer (a scatter)")
    big = [b.name for b in kernel.buffers if isinstance(b.numel, int) and b.numel >= INDEX_LIMIT]
    if big:
        raise NotImplementedError(f"buffers {big} need 64-bit indices (int32 is emitted)")
    if kernel.outer or kernel.accs:
        emitter = _RowsEmitter(kernel, name, max_rblock)
    else:
        emitter = _PointwiseEmitter(kernel, name)
    return emitter.emit()


def index_expr(idx: Index) -> str:
    """An Index as Triton (Python) source: `8 * o0 + r0`, `(i0 // 4) % 3`."""
    parts = []
    for atom, c in idx.terms:
        text = atom if isinstance(atom, str) else _divmod_expr(atom)
        parts.append(text if c == 1 else f"{size_expr(c)} * {text}")
    if idx.const != 0 or not parts:
        parts.append(size_expr(idx.const))
    return " + ".join(parts).replace("+ -", "- ")


def size_expr(x) -> str:
    """A size in Triton source: an int literal, or an expression of the size arguments
    (`max`/`min` as tl.maximum/tl.minimum; only non-negative values are divided)."""
    if isinstance(x, int):
        return str(x)
    text = sz.py_source(x)
    return text.replace("max(", "tl.maximum(").replace("min(", "tl.minimum(")


def _divmod_expr(atom: DivMod) -> str:
    text = f"({index_expr(atom.inner)})"
    if atom.div != 1:
        text = f"({text} // {size_expr(atom.div)})"
    return f"({text} % {size_expr(atom.mod)})" if atom.mod is not None else text


def decode(dims: tuple, linear: str) -> list[str]:
    """Lines binding each loop variable of `dims` (outermost first) from a row-major
    linear index: the innermost is `linear % n`, the outermost needs no `%`."""
    out, stride = [], 1
    for k in range(len(dims) - 1, -1, -1):
        var, n = dims[k]
        text = linear if stride == 1 else f"({linear} // {size_expr(stride)})"
        if k > 0:
            text = f"{text} % {size_expr(n)}"
        out.append(f"{var} = {text}")
        stride = _mul(stride, n)
    return out[::-1]


def _mul(a, b):
    return a * b if isinstance(a, int) and isinstance(b, int) else sz.norm(a * b)


def _numel(dims: tuple):
    n = 1
    for _, size in dims:
        n = _mul(n, size)
    return n


class _Emitter:
    """What both kernel shapes share: the body of a stage, loads, stores, the module."""

    def __init__(self, kernel: Kernel, name: str):
        self.k = kernel
        self.name = name
        self.ops = TritonScalarOps()
        self.lines: list[str] = []
        self.temps: dict = {}  # Let name -> TV
        self.storage = {b.name: b.dtype for b in kernel.buffers}
        self.sizes: list = []  # (name, value) size arguments
        self.memo: dict = {}  # (scope, expression) -> TV; see Note [Reuse across stages]
        self.memo_scope = None  # None: the current stage's values are not reused
        self.acc_version: dict = {}  # acc -> number of folds emitted so far

    def line(self, text: str, depth: int = 1):
        self.lines.append("    " * depth + text)

    def size_arg(self, prefix: str, values: list[int]) -> list[str]:
        """Argument names for the sizes `values`: one per distinct value, in order."""
        distinct = list(dict.fromkeys(values))
        names = {v: prefix + "numel" if len(distinct) == 1 else f"{prefix}{i}numel"
                 for i, v in enumerate(distinct)}
        for v in distinct:
            self.sizes.append((names[v], v))
        return [names[v] for v in values]

    def pointer(self, buf: str, idx: Index, block_vars: list[set], shape: str) -> str:
        """`buf + (index)`, broadcast to the stage's block shape when the index does not
        vary along every block axis (tl.load/tl.store need a pointer of the mask's shape)."""
        ptr = f"{buf} + ({index_expr(idx)})"
        used = idx.variables()
        if all(used & axis_vars for axis_vars in block_vars):
            return ptr
        return f"tl.broadcast_to({ptr}, {shape})"

    def body(self, stmts, mask: str, block_vars: list[set], shape: str, depth: int,
             reduce_fn):
        for s in stmts:
            if isinstance(s, Let):
                self.let(s, mask, block_vars, shape, depth)
            elif isinstance(s, Store):
                value = self.temps[s.value]
                storage = self.storage[s.buf]
                expr = value.expr
                if storage == bf16:
                    self.ops.helpers.add("to_bf16")
                    expr = f"_to_bf16({expr})"
                elif compute_dtype(storage) != storage:
                    expr = f"{expr}.to({tl_dtype(storage)})"
                ptr = self.pointer(s.buf, s.index, block_vars, shape)
                self.line(f"tl.store({ptr}, {expr}, {mask})", depth)
            elif isinstance(s, Reduce):
                self.acc_version[s.acc] = self.acc_version.get(s.acc, 0) + 1
                reduce_fn(s, depth)

    def half_cast(self, x: TV, target) -> TV:
        """A rounding cast to f16/bf16 (explicit, or after an op of that type), on in f32.

        See Note [Half casts] in codegen/lower.py: the source converts to f32 first,
        as torch does, then rounds once to the half type.
        """
        wide = self.ops.cast(x, f32)
        if target == bf16:
            self.ops.helpers.add("to_bf16")
            return TV(f"_to_bf16({wide.expr}).to(tl.float32)", f32)
        return TV(f"{wide.expr}.to({tl_dtype(target)}).to(tl.float32)", f32)

    def let(self, s: Let, mask: str, block_vars, shape: str, depth: int):
        attrs = dict(s.attrs)
        if s.op == "load":
            ptr = self.pointer(attrs["buf"], attrs["index"], block_vars, shape)
            expr = f"tl.load({ptr}, {mask}, other=0)"
            if self.storage[attrs["buf"]] != s.dtype:  # f16, bf16: computed in f32
                expr += f".to({tl_dtype(s.dtype)})"
            value = TV(expr, s.dtype)
        elif s.op == "acc":
            value = TV(attrs["acc"], s.dtype)
        elif s.op == "const":
            # A [1] / [1, 1] block: broadcasts against every value of the stage, so
            # per-row arithmetic on constants stays [XBLOCK, 1] (see TritonScalarOps).
            self.ops.block_shape = "[1]" if shape == "[XBLOCK]" else "[1, 1]"
            value = self.ops.const(attrs["value"], TV("", s.dtype))
        elif s.op == "size":  # a symbolic count, from the size arguments
            block = "[1]" if shape == "[XBLOCK]" else "[1, 1]"
            value = TV(f"tl.full({block}, {size_expr(attrs['value'])}, {tl_dtype(s.dtype)})",
                       s.dtype)
        else:
            args = [self.temps[a] for a in s.args]
            if s.op == "cast" and attrs["dtype"] != s.dtype:
                value = self.half_cast(args[0], attrs["dtype"])
            elif s.op == "cast":
                value = self.ops.cast(args[0], s.dtype)
            elif s.op == "compare":
                value = self.ops.compare(attrs["name"], *args)
            elif hasattr(TritonScalarOps, s.op):
                value = getattr(self.ops, s.op)(*args)
            else:
                raise NotImplementedError(f"scalar op {s.op} has no Triton form")
        key = None
        if self.memo_scope is not None:  # See Note [Reuse across stages]
            version = f" @{self.acc_version.get(attrs['acc'], 0)}" if s.op == "acc" else ""
            key = (self.memo_scope, value.expr + version)
            if key in self.memo:
                self.temps[s.name] = self.memo[key]
                return
        name = f"t{s.name}"
        self.line(f"{name} = {value.expr}", depth)
        self.temps[s.name] = TV(name, s.dtype)
        if key is not None:
            self.memo[key] = self.temps[s.name]

    def module(self, params: list[str]) -> str:
        helpers = set(self.ops.helpers)
        header = [
            f'"""Triton kernel {self.name}, generated by refcomp (codegen/triton/emit.py)."""',
            "import triton",
            "import triton.language as tl",
        ]
        for key in sorted(helpers):
            header.append(HELPERS[key].rstrip("\n"))
            header.append("")
        comment = ["# " + ln for ln in str(self.k).splitlines()]
        signature = f"def {self.name}({', '.join(params)}):"
        text = "\n".join(header + [""] + comment + ["@triton.jit", signature] + self.lines)
        return text + "\n"


class _PointwiseEmitter(_Emitter):
    def emit(self) -> TritonKernel:
        numels = [_numel(st.ranges) for st in self.k.stages]
        names = self.size_arg("x", numels)
        static = all(isinstance(n, int) for n in numels)
        xblock = min(next_power_of_2(max(numels, default=0)), MAX_XBLOCK) if static else None
        self.line("xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)")
        for s, (stage, numel_name) in enumerate(zip(self.k.stages, names)):
            self.line(f"# stage {s}: [{_ranges_text(stage.ranges)}]")
            if _numel(stage.ranges) == 0:
                self.line("# (empty: nothing to compute)")
                continue
            mask = "xmask" if len(self.k.stages) == 1 else f"xmask{s}"
            self.line(f"{mask} = xindex < {numel_name}")
            for text in decode(stage.ranges, "xindex"):
                self.line(text)
            block_vars = [{v for v, _ in stage.ranges}]
            self.body(stage.body, mask, block_vars, "[XBLOCK]", 1, self._no_reduce)
        symbols = self.k.params
        params = [b.name for b in self.k.buffers] + [n for n, _ in self.sizes] + \
            [str(p) for p in symbols] + ["XBLOCK: tl.constexpr"]
        if not symbols:
            grid = -(-max(numels, default=0) // xblock)
            return TritonKernel(self.name, self.module(params), tuple(self.sizes),
                                (("XBLOCK", xblock),), grid)
        evaluate = sz.evaluator([v for _, v in self.sizes], symbols)
        n_numels = len(self.sizes)

        def plan(*values):
            args = evaluate(*values)
            longest = max(args[:n_numels], default=0)
            block = min(next_power_of_2(longest), MAX_XBLOCK)
            return args, {"XBLOCK": block}, -(-longest // block)
        return TritonKernel(self.name, self.module(params), tuple(self.sizes),
                            (("XBLOCK", MAX_XBLOCK),), -1, symbols, plan)

    def _no_reduce(self, s, depth):
        raise NotImplementedError("reduce in a kernel without accumulators")


class _RowsEmitter(_Emitter):
    def __init__(self, kernel: Kernel, name: str, max_rblock: int):
        super().__init__(kernel, name)
        self.max_rblock = max_rblock
        self.accs = {a.name: a for a in kernel.accs}

    def emit(self) -> TritonKernel:
        k = self.k
        rows = _numel(k.outer)
        (xnumel,) = self.size_arg("x", [rows])
        ranged = [st for st in k.stages if st.ranges]
        lengths = [_numel(st.ranges) for st in ranged]
        static = all(isinstance(n, int) for n in lengths + [rows])
        longest = max(lengths, default=1) if static else None
        persistent = static and longest <= self.max_rblock
        rblock = next_power_of_2(longest) if persistent else self.max_rblock
        rblock = max(rblock, 1)
        xblock = min(next_power_of_2(rows), max(1, TILE // rblock)) if static else None
        r_names = iter(self.size_arg("r", [_numel(st.ranges) for st in ranged]))

        self.line("xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        self.line(f"xmask = xindex < {xnumel}")
        for text in decode(k.outer, "xindex"):
            self.line(text)
        for a in k.accs:
            init = literal(reduce_init(a.op, a.dtype).item(), a.dtype)
            self.line(f"{a.name} = tl.full([XBLOCK, 1], {init}, {tl_dtype(a.dtype)})"
                      f"  # {a.op}")
        outer_vars = {v for v, _ in k.outer} | {"xindex"}
        for s, stage in enumerate(k.stages):
            kind = "" if not stage.ranges else (" persistent" if persistent else " looped")
            self.line(f"# stage {s}: [{_ranges_text(stage.ranges)}]{kind}")
            if not stage.ranges:
                self.memo_scope = ("rows", ())
                self.body(stage.body, "xmask", [outer_vars], "[XBLOCK, 1]", 1,
                          self._reduce_row)
                continue
            rnumel = next(r_names)
            if _numel(stage.ranges) == 0:
                self.line("# (empty: accumulators keep their initial values)")
                continue
            block_vars = [outer_vars, {v for v, _ in stage.ranges}]
            shape = "[XBLOCK, RBLOCK]"
            reduced = [st.acc for st in stage.body if isinstance(st, Reduce)]
            self.memo_scope = ("rows", stage.ranges) if persistent else None
            if persistent:
                self.line("rindex = tl.arange(0, RBLOCK)[None, :]")
                self._tile_head(stage, rnumel, 1)
                self.body(stage.body, "mask", block_vars, shape, 1, self._reduce_persistent)
                continue
            for acc in dict.fromkeys(reduced):
                a = self.accs[acc]
                init = literal(reduce_init(a.op, a.dtype).item(), a.dtype)
                self.line(f"_{acc} = tl.full([XBLOCK, RBLOCK], {init}, {tl_dtype(a.dtype)})")
            self.line(f"for roffset in range(0, {rnumel}, RBLOCK):")
            self.line("rindex = roffset + tl.arange(0, RBLOCK)[None, :]", 2)
            self._tile_head(stage, rnumel, 2)
            self.body(stage.body, "mask", block_vars, shape, 2, self._reduce_looped)
            for acc in dict.fromkeys(reduced):
                fn = self._combiner(acc)
                self.line(f"{acc} = {fn}({acc}, {self._tree(acc, '_' + acc)})")
        symbols = k.params
        params = [b.name for b in k.buffers] + [n for n, _ in self.sizes] + \
            [str(p) for p in symbols] + ["XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"]
        if not symbols:
            grid = -(-rows // xblock)
            return TritonKernel(self.name, self.module(params), tuple(self.sizes),
                                (("XBLOCK", xblock), ("RBLOCK", rblock)), grid)
        evaluate = sz.evaluator([v for _, v in self.sizes] + [rows] + lengths, symbols)
        n_args, max_rblock = len(self.sizes), self.max_rblock

        def plan(*values):  # looped stages: RBLOCK only as long as the longest needs
            got = evaluate(*values)
            n_rows, longest = got[n_args], max(got[n_args + 1:], default=1)
            rb = max(min(next_power_of_2(longest), max_rblock), 1)
            xb = min(next_power_of_2(n_rows), max(1, TILE // rb))
            return got[:n_args], {"XBLOCK": xb, "RBLOCK": rb}, -(-n_rows // xb)
        return TritonKernel(self.name, self.module(params), tuple(self.sizes),
                            (("XBLOCK", max(1, TILE // max_rblock)), ("RBLOCK", max_rblock)),
                            -1, symbols, plan)

    def _tile_head(self, stage, rnumel: str, depth: int):
        self.line(f"mask = xmask & (rindex < {rnumel})", depth)
        for text in decode(stage.ranges, "rindex"):
            self.line(text, depth)

    def _combiner(self, acc: str) -> str:
        a = self.accs[acc]
        key = combiner(a.op, a.dtype)
        self.ops.helpers.add(key)
        return helper_name(key)

    def _identity(self, acc: str) -> str:
        a = self.accs[acc]
        return literal(reduce_init(a.op, a.dtype).item(), a.dtype)

    def _tree(self, acc: str, value: str, fn: str | None = None) -> str:
        """`value`'s reduction along the block's RBLOCK dim for accumulator `acc`: a
        tl.reduce whose combiner is the accumulator's, `_sum_tree` for a sum."""
        fn = fn or self._combiner(acc)
        return f"tl.reduce({value}, 1, {'_sum_tree' if fn == '_sum' else fn}, keep_dims=True)"

    def _reduce_row(self, s: Reduce, depth: int):
        fn = self._combiner(s.acc)
        value = self.temps[s.value].expr
        self.line(f"{s.acc} = tl.where(xmask, {fn}({s.acc}, {value}), {s.acc})", depth)

    def _reduce_persistent(self, s: Reduce, depth: int):
        fn = self._combiner(s.acc)
        value = f"tl.where(mask, {self.temps[s.value].expr}, {self._identity(s.acc)})"
        self.line(f"{s.acc} = {fn}({s.acc}, {self._tree(s.acc, value)})", depth)

    def _reduce_looped(self, s: Reduce, depth: int):
        fn = self._combiner(s.acc)
        value = self.temps[s.value].expr
        self.line(f"_{s.acc} = tl.where(mask, {fn}(_{s.acc}, {value}), _{s.acc})", depth)


def _ranges_text(ranges: tuple) -> str:
    return ", ".join(f"{v} < {n}" for v, n in ranges)


# Note [Split reductions]
# A rows kernel runs one program per XBLOCK rows, so a reduction to few outputs over many
# elements (sum of 16M elements: one row) ran on one program of one GPU core: >100x slower
# than eager on an H100.  A static kernel of at most SPLIT_MAX_ROWS rows whose longest
# stage has at least SPLIT_MIN_LENGTH elements is split instead, as Inductor splits
# reductions: each ranged stage becomes a *partial* launch of rows x S programs (program
# (row, j) folds the j-th chunk of the row's range into its own partial accumulators and
# writes them to a workspace; S = SPLIT_PROGRAMS // rows, fewer when the chunks would be
# under SPLIT_MIN_CHUNK elements), then a *combine* launch folds each row's S partials
# with the reduction's own combiner into the accumulator's final value; a stage that
# reads an accumulator (var's second pass reads the mean) runs after the combine of the
# stage that made it and loads the final value.  A *final* launch, one program per XBLOCK
# rows, runs the stages after the last ranged one (the stores of the results) from the
# final values.  A ranged stage that stores (softmax's last pass) is split the same way:
# each element is still computed and stored once.  var's two passes (and layer_norm's
# mean and variance passes) are one partial launch merged as Welford's parallel update
# does (Note [Welford merge of a split var]).  Sums are reassociated (per chunk, then
# across chunks) as Triton's tree reductions already are; max/min/any/all combine
# exactly.
SPLIT_MAX_ROWS = 64
SPLIT_MIN_LENGTH = 1 << 16
SPLIT_PROGRAMS = 1024
SPLIT_MIN_CHUNK = 4096


@dataclass(frozen=True)
class Launch:
    """One launch of a split kernel: `fn[(grid,)](*args, **blocks)`; an argument is a
    kernel buffer's name or a workspace buffer's."""

    fn: str
    args: tuple
    blocks: tuple
    grid: int


@dataclass(frozen=True)
class SplitKernel:
    """A split reduction (Note [Split reductions]): one module, several launches, and the
    workspace they share: ((name, dtype, numel), ...)."""

    name: str
    source: str
    workspace: tuple
    launches: tuple
    params: tuple = ()
    sizes: tuple = ()

    def fits(self, numels) -> bool:
        return all(n < INDEX_LIMIT for n in numels)


def split_plan(kernel: Kernel):
    """(rows, splits) when `kernel` is split (Note [Split reductions]), else None."""
    if kernel.params or getattr(kernel, "inplace", ()) or not kernel.accs:
        return None
    rows = _numel(kernel.outer)
    ranged = [i for i, st in enumerate(kernel.stages) if st.ranges]
    if not ranged or not isinstance(rows, int) or not 0 < rows <= SPLIT_MAX_ROWS:
        return None
    lengths = [_numel(kernel.stages[i].ranges) for i in ranged]
    if not all(isinstance(n, int) for n in lengths) or max(lengths) < SPLIT_MIN_LENGTH:
        return None
    reduced_in: dict = {}  # acc -> the ranged stage folding it
    for i, stage in enumerate(kernel.stages):
        defined = set()
        for s in stage.body:
            if isinstance(s, Let):
                if any(a not in defined for a in s.args):
                    return None  # a value from another stage
                defined.add(s.name)
                if s.op == "acc" and stage.ranges:
                    acc = dict(s.attrs)["acc"]
                    if reduced_in.get(acc, i) >= i:
                        return None  # read in a ranged stage before it is final
            elif not stage.ranges and i < ranged[-1]:
                return None  # a store or fold between ranged stages
            elif isinstance(s, Reduce) and stage.ranges:
                if s.acc in reduced_in and reduced_in[s.acc] != i:
                    return None  # folded by two ranged stages
                reduced_in[s.acc] = i
    splits = max(1, min(SPLIT_PROGRAMS // rows, max(lengths) // SPLIT_MIN_CHUNK))
    splits = 1 << (splits.bit_length() - 1)  # a power of two
    return (rows, splits) if splits > 1 else None


def emit_split(kernel: Kernel, name: str, max_rblock: int = MAX_RBLOCK) -> Optional[SplitKernel]:
    """The split form of `kernel` (Note [Split reductions]), or None when it is not split."""
    plan = split_plan(kernel)
    if plan is None:
        return None
    return _SplitEmitter(kernel, name, max_rblock, *plan).emit()


# Note [Welford merge of a split var]
# var lowers to a shifted two-pass (Note [How ATen computes var]): a stage folding d (x
# minus the row's first element) into a sum A, then a stage folding (d - A / N)^2 into
# B.  Split as two passes, it reads the input twice from memory.  Recognised (the same
# expression d in both stages, B's fold exactly (d - A / N)^2 with N the stage's length,
# A read nowhere else in the second stage), the pair is one partial launch: program j
# sums its chunk's d (S_j over n_j elements), then, reading its chunk again (from cache),
# the squared deviations about its own mean (M_j); the combine merges the chunks as
# Chan et al.'s parallel Welford update does: A = sum S_j, B = sum (M_j + n_j (S_j / n_j -
# A / N)^2), which is the two-pass value in exact arithmetic.  One read of the input from
# memory, one partial and one combine launch instead of two of each.
def _expression(lets: dict, name: str):
    """A temp's expression as a nested tuple (op, attrs, dtype, args), for comparing."""
    s = lets.get(name)
    if s is None:
        return ("?", name)
    return (s.op, s.attrs, s.dtype, tuple(_expression(lets, a) for a in s.args))


def _variance_pair(k: Kernel, s0: int, s1: int):
    """(A, B, the temps of A / N and of A in s1) when stages s0, s1 are var's two passes."""
    st0, st1 = k.stages[s0], k.stages[s1]
    if st0.ranges != st1.ranges:
        return None
    ops = {acc.name: acc for acc in k.accs}
    red0 = [t for t in st0.body if isinstance(t, Reduce)]
    red1 = [t for t in st1.body if isinstance(t, Reduce)]
    if len(red0) != 1 or len(red1) != 1 or any(isinstance(t, Store)
                                               for t in st0.body + st1.body):
        return None
    a, b = red0[0].acc, red1[0].acc
    if ops[a].op != "sum" or ops[b].op != "sum" or not ops[a].dtype.is_float \
            or ops[a].dtype != ops[b].dtype:
        return None
    lets0 = {t.name: t for t in st0.body if isinstance(t, Let)}
    lets1 = {t.name: t for t in st1.body if isinstance(t, Let)}
    sq = lets1.get(red1[0].value)
    if sq is None or sq.op != "mul" or sq.args[0] != sq.args[1]:
        return None
    dev = lets1.get(sq.args[0])
    if dev is None or dev.op != "sub":
        return None
    mu = lets1.get(dev.args[1])
    if mu is None or mu.op != "truediv":
        return None
    acc, n = lets1.get(mu.args[0]), lets1.get(mu.args[1])
    if acc is None or n is None or acc.op != "acc" or acc.attr("acc") != a \
            or n.op != "const" or float(n.attr("value")) != float(_numel(st0.ranges)):
        return None
    reads = [t for t in st1.body if isinstance(t, Let) and t.op == "acc"]
    if len(reads) != 1 or [t.name for t in st1.body if isinstance(t, Let) and mu.name in
                           t.args] != [dev.name]:
        return None
    if _expression(lets0, red0[0].value) != _expression(lets1, dev.args[0]):
        return None
    return a, b, mu.name, acc.name


class _SplitEmitter(_RowsEmitter):
    def __init__(self, kernel: Kernel, name: str, max_rblock: int, rows: int, splits: int):
        super().__init__(kernel, name, max_rblock)
        self.rows, self.splits = rows, splits
        self.functions: list = []  # (name, params, lines)
        self.launches: list = []
        self.workspace: list = []
        self.final: set = set()  # accs with a final value in the workspace

    def _function(self, fn: str, params: list, blocks: dict, grid: int):
        self.functions.append((fn, params, self.lines))
        args = tuple(p for p in params if not p.endswith("tl.constexpr"))
        self.launches.append(Launch(fn, args, tuple(blocks.items()), grid))
        self.lines = []

    def _load_finals(self, accs, row: str, depth: int = 1):
        for acc in accs:
            a = self.accs[acc]
            self.line(f"{acc} = tl.load(f_{acc} + {row}, xmask, other=0)"
                      f".to({tl_dtype(a.dtype)})", depth)

    def emit(self) -> SplitKernel:
        k, rows, splits = self.k, self.rows, self.splits
        buffers = [b.name for b in k.buffers]
        for a in k.accs:
            self.workspace.append((f"p_{a.name}", a.dtype, rows * splits))
            self.workspace.append((f"f_{a.name}", a.dtype, rows))
        last = max(i for i, st in enumerate(k.stages) if st.ranges)
        ranged = [s for s in range(last + 1) if k.stages[s].ranges]
        skip = set()
        for i, s in enumerate(ranged):
            if s in skip:
                continue
            pair = _variance_pair(k, s, ranged[i + 1]) if i + 1 < len(ranged) else None
            if pair is not None:  # Note [Welford merge of a split var]
                self._welford(s, ranged[i + 1], pair, buffers)
                skip.add(ranged[i + 1])
            else:
                self._partial(s, k.stages[s], buffers)
        self._finish(k.stages[last + 1:], buffers)
        helpers = set(self.ops.helpers)
        header = [
            f'"""Triton split reduction {self.name}, generated by refcomp'
            ' (codegen/triton/emit.py, Note [Split reductions])."""',
            "import triton",
            "import triton.language as tl",
        ]
        for key in sorted(helpers):
            header.append(HELPERS[key].rstrip("\n"))
            header.append("")
        text = header + [""] + ["# " + ln for ln in str(k).splitlines()]
        for fn, params, lines in self.functions:
            text += ["", "", "@triton.jit", f"def {fn}({', '.join(params)}):"] + lines
        return SplitKernel(self.name, "\n".join(text) + "\n", tuple(self.workspace),
                           tuple(self.launches))

    def _partial(self, s: int, stage, buffers):
        """Programs (row, j) fold chunk j of the stage's range; then the combine."""
        k, rows, splits = self.k, self.rows, self.splits
        length = _numel(stage.ranges)
        per = -(-length // splits)
        rblock = max(1, min(self.max_rblock, next_power_of_2(per)))
        chunk = -(-per // rblock) * rblock
        reduced = list(dict.fromkeys(t.acc for t in stage.body if isinstance(t, Reduce)))
        read = list(dict.fromkeys(dict(t.attrs)["acc"] for t in stage.body
                                  if isinstance(t, Let) and t.op == "acc"))
        self._split_program(k, rows, splits)
        self._load_finals(read, "row")
        for acc in reduced:
            a = self.accs[acc]
            self.line(f"_{acc} = tl.full([XBLOCK, RBLOCK], {self._identity(acc)}, "
                      f"{tl_dtype(a.dtype)})")
        self.line(f"# stage {s}: [{_ranges_text(stage.ranges)}], chunks of {chunk}")
        self.line(f"for roffset in range(0, {chunk}, RBLOCK):")
        self.line(f"rindex = split * {chunk} + roffset + tl.arange(0, RBLOCK)[None, :]", 2)
        self._tile_head(stage, str(length), 2)
        outer_vars = {v for v, _ in k.outer} | {"xindex", "row", "split"}
        block_vars = [outer_vars, {v for v, _ in stage.ranges}]
        self.memo_scope = None
        self.body(stage.body, "mask", block_vars, "[XBLOCK, RBLOCK]", 2, self._reduce_looped)
        for acc in reduced:
            self.line(f"tl.store(p_{acc} + xindex, {self._tree(acc, '_' + acc)}, xmask)")
        params = buffers + [f"f_{a}" for a in read] + [f"p_{a}" for a in reduced] + \
            ["XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"]
        self._function(f"{self.name}_p{s}", params, {"XBLOCK": 1, "RBLOCK": rblock},
                       rows * splits)
        if not reduced:
            return
        sblock, xblock = self._combine_program(rows, splits)
        for acc in reduced:
            self.line(f"_{acc} = tl.where(mask, tl.load(p_{acc} + xindex * {splits} + sindex,"
                      f" mask, other=0), {self._identity(acc)})")
            self.line(f"tl.store(f_{acc} + xindex, {self._tree(acc, '_' + acc)}, xmask)")
            self.final.add(acc)
        params = [f"p_{a}" for a in reduced] + [f"f_{a}" for a in reduced] + \
            ["XBLOCK: tl.constexpr", "SBLOCK: tl.constexpr"]
        self._function(f"{self.name}_c{s}", params, {"XBLOCK": xblock, "SBLOCK": sblock},
                       -(-rows // xblock))

    def _combine_program(self, rows: int, splits: int) -> tuple[int, int]:
        """A combine launch's program: XBLOCK rows by SBLOCK partials; (SBLOCK, XBLOCK)."""
        sblock = next_power_of_2(splits)
        xblock = min(next_power_of_2(rows), max(1, TILE // sblock))
        self.line("xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        self.line(f"xmask = xindex < {rows}")
        self.line("sindex = tl.arange(0, SBLOCK)[None, :]")
        self.line(f"mask = xmask & (sindex < {splits})")
        return sblock, xblock

    def _split_program(self, k, rows: int, splits: int) -> None:
        """A split launch's program: its row of the kernel's outer range and its split."""
        self.line("xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        self.line(f"xmask = xindex < {rows * splits}")
        self.line(f"row = xindex // {splits}")
        self.line(f"split = xindex % {splits}")
        for text in decode(k.outer, "row"):
            self.line(text)

    def _chunking(self, stage):
        length = _numel(stage.ranges)
        per = -(-length // self.splits)
        rblock = max(1, min(self.max_rblock, next_power_of_2(per)))
        return length, rblock, -(-per // rblock) * rblock

    def _chunk_loop(self, stage, chunk: int, stmts, skip=()):
        """The loop over this program's chunk of `stage`, its statements but `skip`."""
        length = _numel(stage.ranges)
        self.line(f"for roffset in range(0, {chunk}, RBLOCK):")
        self.line(f"rindex = split * {chunk} + roffset + tl.arange(0, RBLOCK)[None, :]", 2)
        self._tile_head(stage, str(length), 2)
        outer_vars = {v for v, _ in self.k.outer} | {"xindex", "row", "split"}
        block_vars = [outer_vars, {v for v, _ in stage.ranges}]
        self.memo_scope = None
        kept = [t for t in stmts if not (isinstance(t, Let) and t.name in skip)]
        self.body(kept, "mask", block_vars, "[XBLOCK, RBLOCK]", 2, self._reduce_looped)

    def _welford(self, s0: int, s1: int, pair, buffers):
        """Note [Welford merge of a split var]: one partial launch for both passes."""
        k, rows, splits = self.k, self.rows, self.splits
        a, b, mu, read = pair
        stage0, stage1 = k.stages[s0], k.stages[s1]
        add = self._combiner(a)  # the sums' helper
        length, rblock, chunk = self._chunking(stage0)
        ty = tl_dtype(self.accs[a].dtype)
        self._split_program(k, rows, splits)
        self.line(f"_{a} = tl.full([XBLOCK, RBLOCK], 0, {ty})")
        self.line(f"# stage {s0}: [{_ranges_text(stage0.ranges)}], chunks of {chunk}")
        self._chunk_loop(stage0, chunk, stage0.body)
        self.line(f"{a}_sum = {self._tree(a, '_' + a, add)}")
        self.line(f"{a}_n = tl.minimum(tl.maximum({length} - split * {chunk}, 0), {chunk})"
                  f".to({ty})")
        self.line(f"{a}_mean = {a}_sum / tl.maximum({a}_n, 1)")
        self.line(f"_{b} = tl.full([XBLOCK, RBLOCK], 0, {ty})")
        self.line(f"# stage {s1}: [{_ranges_text(stage1.ranges)}] about the chunk's mean")
        self.temps[mu] = TV(f"{a}_mean", self.accs[a].dtype)
        self._chunk_loop(stage1, chunk, stage1.body, skip={mu, read})
        self.line(f"tl.store(p_{a} + xindex, {a}_sum, xmask)")
        self.line(f"tl.store(p_{b} + xindex, {self._tree(b, '_' + b, add)}, xmask)")
        params = buffers + [f"p_{a}", f"p_{b}", "XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"]
        self._function(f"{self.name}_w{s0}", params, {"XBLOCK": 1, "RBLOCK": rblock},
                       rows * splits)
        sblock, xblock = self._combine_program(rows, splits)
        self.line(f"sums = tl.where(mask, tl.load(p_{a} + xindex * {splits} + sindex, mask,"
                  " other=0), 0)")
        self.line(f"m2s = tl.where(mask, tl.load(p_{b} + xindex * {splits} + sindex, mask,"
                  " other=0), 0)")
        self.line(f"n = tl.minimum(tl.maximum({length} - sindex * {chunk}, 0), {chunk}).to({ty})")
        self.line(f"total = {self._tree(a, 'sums', add)}")
        self.line(f"dev = tl.where(n > 0, sums / tl.maximum(n, 1) - total / {length}, 0)")
        self.line(f"tl.store(f_{a} + xindex, total, xmask)")
        self.line(f"tl.store(f_{b} + xindex, {self._tree(b, 'm2s + n * dev * dev', add)},"
                  " xmask)")
        self.final.update((a, b))
        params = [f"p_{a}", f"p_{b}", f"f_{a}", f"f_{b}", "XBLOCK: tl.constexpr",
                  "SBLOCK: tl.constexpr"]
        self._function(f"{self.name}_c{s0}", params, {"XBLOCK": xblock, "SBLOCK": sblock},
                       -(-rows // xblock))

    def _finish(self, stages, buffers):
        """The stages after the last ranged one, per row, from the final values."""
        if not any(st.body for st in stages):
            return
        k, rows = self.k, self.rows
        xblock = min(next_power_of_2(rows), MAX_XBLOCK)
        self.line("xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        self.line(f"xmask = xindex < {rows}")
        for text in decode(k.outer, "xindex"):
            self.line(text)
        finals = [a.name for a in k.accs if a.name in self.final]
        self._load_finals(finals, "xindex")
        for a in k.accs:
            if a.name not in self.final:
                self.line(f"{a.name} = tl.full([XBLOCK, 1], {self._identity(a.name)}, "
                          f"{tl_dtype(a.dtype)})")
        outer_vars = {v for v, _ in k.outer} | {"xindex"}
        for s, stage in enumerate(stages):
            self.memo_scope = ("rows", ())
            self.body(stage.body, "xmask", [outer_vars], "[XBLOCK, 1]", 1, self._reduce_row)
        params = buffers + [f"f_{a}" for a in finals] + ["XBLOCK: tl.constexpr"]
        self._function(f"{self.name}_f", params, {"XBLOCK": xblock}, -(-rows // xblock))
