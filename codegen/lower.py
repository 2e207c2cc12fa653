"""Lowering: a fused region's body graph becomes one backend-neutral Kernel.

Owns: `lower_region(body, sizes) -> Kernel`, `single_node_body(node)` (a lone
pointwise or reduction node as a region) and `Unsupported` (what cannot be
lowered; callers fall back, never guess).  Must not know: LLVM, Triton, torch.
Spec: spec/codegen.md, "Lowering".

Every body value is lowered as a function from an index to a scalar temporary, as
Inductor's loaders are; reductions, stages and what is Unsupported: spec/codegen.md,
"Lowering".
"""

from __future__ import annotations

import dataclasses

import numpy as np
import sympy

from codegen import sizes
from codegen.kernel import Acc, Buffer, Index, Kernel, Let, Reduce, Stage, Store, collapse
from codegen.scalar import compute_dtype, compute_dtypes, result_dtype
from ir.graph import Graph, Node, Value
from ir.ops.registry import CREATION, POINTWISE, REDUCTION
from ir.ops.rules import normalize_dim, normalize_dims
from ir.types import bool_, f64, is_symbolic, round_to_dtype

# Note [Half casts]
# f16/bf16 values are computed in f32 (compute_dtype), but every value whose IR type
# is f16/bf16 is rounded to that type where it is computed, as eager materialises
# each op's result in its dtype: a pointwise op's result, a reduction's result read
# back in the kernel, an explicit cast.  Rounding only once per store (as Inductor
# does) gives an answer an ulp off, and an op whose answer jumps turns that ulp into
# a wrong value: `(int32 + bf16).long()` held -2.9921875 where eager's bf16 sum is
# -3.0 and came back -2 (corpus bf16_sum_to_long_llvm); `>`, floor, `//`, casts to
# int or bool and widening casts alike.  A rounding is a `cast` Let with attribute
# dtype=f16 (or bf16) and Let dtype f32: round to the half type, widen back to f32
# (`round_half`).  The source is first converted to f32, as torch does (c10::Half and
# c10::BFloat16 convert from float): f64 -> f16 rounds twice, exactly like eager.
# Decomposed ops (softmax, layer_norm, ...) therefore round after each primitive, as
# the interpreter does (spec/passes.md, "decompose").


class Unsupported(Exception):
    """This region (or node) has no Kernel form; the caller must fall back."""


# reduction op -> (accumulator op, accumulator dtype rule)
_REDUCTIONS = {"sum": "sum", "prod": "prod", "amax": "max", "amin": "min", "any": "any",
               "all": "all", "mean": "sum", "var": "sum"}


def single_node_body(node: Node) -> Graph:
    """A one-node region: the node applied to fresh inputs, returning its results."""
    inputs = [Value(v.type, f"a{i}") for i, v in enumerate(node.inputs)]
    outputs = [Value(v.type) for v in node.outputs]
    inner = Node(node.op, inputs, node.attrs, outputs, node.body)
    return Graph(f"{node.op.name}_region", inputs, [inner], outputs)


def lower_region(body: Graph) -> Kernel:
    """The Kernel computing `body`'s outputs from its inputs (all flat, contiguous).

    A symbolic body gives a symbolic Kernel (See Note [Runtime sizes] in
    codegen/kernel.py): one kernel for every value of its size symbols.
    Raises Unsupported for what the Kernel model cannot express.
    """
    key = region_key(body)
    found = _LOWERED.get(key) if key is not None else None
    if found is None:
        try:
            found = collapse(_Lowering(body).run())
        except Unsupported as e:
            found = e
        if key is not None:
            if len(_LOWERED) >= _LOWERED_LIMIT:
                _LOWERED.clear()
            _LOWERED[key] = found
    if isinstance(found, Unsupported):
        raise found
    return found


# Note [Lowering once per body]: a deep model repeats the same few regions (80 conv
# blocks: the same batch-norm-and-relu region 80 times forward, and its gradient 80 times
# backward), and lowering is a walk of the body per region.  A Kernel depends only on the
# region's body (its inputs are flat and contiguous), so it is memoized by the body's
# structure: ops, attributes, types and how values connect, not value names.  Kernels are
# immutable; the runtime derives in-place variants with dataclasses.replace.
_LOWERED: dict = {}
_LOWERED_LIMIT = 4096


def region_key(body: Graph):
    """The structure of `body` up to the names of its values: equal keys lower equally.
    None for a body that is not memoized (a nested body, a value defined outside)."""
    number = {v: i for i, v in enumerate(body.inputs)}
    nodes = []
    for node in body.nodes:
        if node.body is not None or any(v not in number for v in node.inputs):
            return None
        ins = tuple(number[v] for v in node.inputs)
        for v in node.outputs:
            number[v] = len(number)
        nodes.append((node.op.name, id(node.op), ins,
                      tuple((k, repr(a)) for k, a in node.attrs.items()),
                      tuple(v.type for v in node.outputs)))
    if any(v not in number for v in body.outputs):
        return None
    return (tuple(v.type for v in body.inputs), tuple(nodes),
            tuple(number[v] for v in body.outputs))


class _Temp:
    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype


class _Recorder:
    """A ScalarOps that records each vocabulary call as a Let in the current stage."""

    def __init__(self):
        self.body: list = []
        self.memo: dict = {}
        self.count = 0

    def emit(self, op, args, attrs, dtype) -> _Temp:
        # The dtype is in the key: a constant's dtype is not among its attrs (0 as f32
        # and 0 as f64 are two Lets); floats by their bits: -0.0 == 0.0 in Python, but
        # they are two constants (clamp(x, -0.0, 0.0) read 0.0 as -0.0).
        exact = tuple((k, v.hex() if isinstance(v, float) else v) for k, v in attrs)
        key = (op, tuple(a.name for a in args), exact, dtype)
        if key in self.memo:
            return self.memo[key]
        name = f"{self.count}"
        self.count += 1
        self.body.append(Let(name, op, key[1], attrs, dtype))
        temp = _Temp(name, dtype)
        self.memo[key] = temp
        return temp

    def call(self, op, args, **attrs) -> _Temp:
        if op in ("const", "load", "acc", "size"):
            dtype = attrs.pop("dtype")
        else:
            dtype = result_dtype(op, [a.dtype for a in args], attrs)
        return self.emit(op, list(args), tuple(sorted(attrs.items())), dtype)

    # Conventions that differ from "f(*operands)" (see codegen/scalar.py).
    def const(self, value, like):
        return self.call("const", [], value=value, dtype=like.dtype)

    def cast(self, x, dtype):
        if compute_dtype(dtype) == x.dtype:
            return x
        return self.call("cast", [x], dtype=compute_dtype(dtype))

    def to_bool(self, x):
        return x if x.dtype == bool_ else self.call("to_bool", [x])

    def compare(self, name, a, b):
        return self.call("compare", [a, b], name=name)

    def __getattr__(self, op):
        if op.startswith("_"):
            raise AttributeError(op)
        return lambda *args: self.call(op, args)


class _Lowering:
    def __init__(self, body: Graph):
        self.g = body
        self.producer = body.producers()
        self.rec = _Recorder()
        self.stage_memo: dict = {}
        self.ranges: dict = {}  # loop var -> size, for index simplification
        self.row_vars: tuple = ()  # outer vars, in kept-dim order
        self.reduced: dict = {}  # reduction output Value -> (acc names, node)
        self.accs: list = []
        self.stages: list = []

    # --- shapes ------------------------------------------------------------------------
    def shape(self, v: Value) -> tuple:
        return tuple(sizes.norm(d) if is_symbolic(d) else int(d) for d in v.type.shape)

    # --- driver ------------------------------------------------------------------------
    def run(self) -> Kernel:
        ins = [Buffer(f"in{i}", v.type.dtype, _prod(self.shape(v)), False)
               for i, v in enumerate(self.g.inputs)]
        outs = [Buffer(f"out{i}", v.type.dtype, _prod(self.shape(v)), True)
                for i, v in enumerate(self.g.outputs)]
        self.in_buf = {v: b.name for v, b in zip(self.g.inputs, ins)}
        reductions = [n for n in self.g.nodes if n.op.category == REDUCTION]
        scatter = self.scatter_node()
        if scatter is not None and not reductions:
            outer = ()
            self.store_scatter(scatter)
        elif reductions:
            outer = self.plan_rows(reductions)
            early = self.early_outputs(reductions)
            self.lower_reductions(reductions, early)
            self.store_row_outputs(early)
        else:
            outer = ()
            self.store_pointwise_outputs()
        return Kernel(tuple(ins + outs), outer, tuple(self.accs), tuple(self.stages))

    def new_stage(self, dims: list):
        """Start recording a stage looping over dims [(var, size)]."""
        count = self.rec.count
        self.rec = _Recorder()
        self.rec.count = count  # temp names stay unique across stages
        self.stage_memo = {}
        for var, n in dims:
            self.ranges[var] = n
        return self.rec

    def end_stage(self, dims: list):
        self.stages.append(Stage(tuple(dims), tuple(self.rec.body)))

    def store(self, j: int, v: Value, idx: tuple):
        value = self.rec.cast(self.value_at(v, idx), v.type.dtype)
        self.rec.body.append(Store(f"out{j}", flat(idx, self.shape(v)), value.name))

    # --- pointwise-only regions ----------------------------------------------------------
    def store_pointwise_outputs(self):
        groups: dict = {}
        for j, v in enumerate(self.g.outputs):
            groups.setdefault(self.shape(v), []).append((j, v))
        for s, (shape, members) in enumerate(groups.items()):
            dims = [(f"i{s}_{k}" if s else f"i{k}", n) for k, n in enumerate(shape)]
            self.new_stage(dims)
            idx = tuple(Index.var(var) for var, _ in dims)
            for j, v in members:
                self.store(j, v, idx)
            self.end_stage(dims)

    # --- scatter regions (Note [Scatter kernels]) -----------------------------------------
    def scatter_node(self):
        """The body's `slice_scatter` when it computes the body's one output, else None."""
        if len(self.g.outputs) != 1:
            return None
        node = self.producer.get(self.g.outputs[0])
        return node if node is not None and node.op.name == "slice_scatter" else None

    def store_scatter(self, node: Node):
        """Two stages: the base copied to out0, then each window element computed where it
        is stored (the copy is dropped when out0 is written over the base)."""
        x, src = node.inputs
        if x not in self.in_buf or x.type.dtype.is_complex:
            raise Unsupported("a scatter's base must be a real region input")
        shape, window, dtype = self.shape(x), self.shape(src), x.type.dtype
        a = node.attrs
        d = normalize_dim(a["dim"], len(shape))
        start, step = _slice_start(a["start"], a["stop"], a["step"], shape[d])
        copy = [("i0", _prod(shape))]
        rec = self.new_stage(copy)
        base = rec.call("load", [], buf=self.in_buf[x], index=Index.var("i0"),
                        dtype=compute_dtype(dtype))
        rec.body.append(Store("out0", Index.var("i0"), base.name))
        self.end_stage(copy)
        if _prod(window) == 0:
            return
        dims = [(f"i{k}", n) for k, n in enumerate(window)]
        rec = self.new_stage(dims)
        idx = tuple(Index.var(v) for v, _ in dims)
        placed = list(idx)
        placed[d] = idx[d].scale(step) + Index.of(start)
        value = rec.cast(self.value_at(src, idx), dtype)
        rec.body.append(Store("out0", flat(tuple(placed), shape), value.name))
        self.end_stage(dims)

    # --- regions with reductions --------------------------------------------------------
    def plan_rows(self, reductions: list[Node]) -> tuple:
        x = self.shape(reductions[0].inputs[0])
        dims = self.reduce_dims(reductions[0])
        for n in reductions[1:]:
            if self.shape(n.inputs[0]) != x or self.reduce_dims(n) != dims:
                raise Unsupported("reductions in one region must reduce one shape over one"
                                  f" dim set: {reductions[0].op.name}{list(dims)} over {x} vs"
                                  f" {n.op.name}{list(self.reduce_dims(n))}")
        self.x_shape, self.x_dims = x, dims
        kept = [k for k in range(len(x)) if k not in dims]
        outer = tuple((f"o{i}", x[k]) for i, k in enumerate(kept))
        self.row_vars = tuple(Index.var(var) for var, _ in outer)
        for var, n in outer:
            self.ranges[var] = n
        self.reduce_ranges = [(f"r{i}", x[k]) for i, k in enumerate(dims)]
        return outer

    def reduce_dims(self, n: Node) -> tuple:
        if n.op.name not in _REDUCTIONS:
            raise Unsupported(f"{n.op.name} has no kernel lowering (only"
                              f" {', '.join(_REDUCTIONS)})")
        return normalize_dims(n.attrs["dims"], n.inputs[0].type.rank)

    def row_index(self, stage_vars) -> tuple:
        """The index into X of the current outer point and stage point."""
        idx, o, r = [], iter(self.row_vars), iter(stage_vars)
        for k in range(len(self.x_shape)):
            idx.append(next(r) if k in self.x_dims else next(o))
        return tuple(idx)

    def early_outputs(self, reductions: list[Node]) -> dict:
        """Note [Stores in reduction stages]: full-shape outputs that read no reduced
        value, by the reduction whose first stage stores them.

        A gradient kernel often returns a pointwise value and its sum over some dims
        (`gelu_backward` and the bias gradient).  Stored in a final stage, that value
        is computed twice, once for the sum and once for the store: twice the erf and
        exp.  It needs no reduced value, so the stage that reduces it (or that reduces
        a value computed from the same nodes) stores it too, from the same temporaries.
        Outputs sharing no node with any reduced value stay in the final stage.
        """
        if not self.reduce_ranges:
            return {}
        under: dict = {}  # value -> the body nodes it is computed from
        for node in self.g.nodes:
            deps = frozenset({node}).union(*(under.get(x, ()) for x in node.inputs))
            for out in node.outputs:
                under[out] = deps
        early: dict = {}
        none: frozenset = frozenset()
        for j, v in enumerate(self.g.outputs):
            deps = under.get(v, none)
            if self.shape(v) != self.x_shape or not deps or deps & set(reductions):
                continue
            home = next((n for n in reductions if deps <= under.get(n.inputs[0], none)), None)
            if home is None:
                home = next((n for n in reductions if deps & under.get(n.inputs[0], none)),
                            None)
            if home is not None:
                early.setdefault(home, []).append((j, v))
        return early

    def lower_reductions(self, reductions: list[Node], early: dict):
        stage_vars = [Index.var(var) for var, _ in self.reduce_ranges]
        count = _prod(n for _, n in self.reduce_ranges)
        for node in reductions:
            x = node.inputs[0]
            out_dtype = node.outputs[0].type.dtype
            is_var = node.op.name == "var"
            # var: Welford's answer as the decomposition computes it, a two-pass in f64
            # on the values shifted by their row's first element (Note [How ATen
            # computes var], ir/passes/decompose.py)
            acc_dtype = f64 if is_var else compute_dtype(out_dtype)
            accs = []
            passes = 2 if is_var else 1
            for p in range(passes):
                acc = Acc(f"a{len(self.accs)}", _REDUCTIONS[node.op.name], acc_dtype)
                self.accs.append(acc)
                accs.append(acc.name)
                rec = self.new_stage(self.reduce_ranges)
                value = self.value_at(x, self.row_index(stage_vars))
                if acc.op in ("any", "all"):
                    value = rec.to_bool(value)
                else:
                    value = rec.cast(value, acc_dtype)
                if is_var:
                    first = self.value_at(x, self.row_index([Index.of(0)] * len(stage_vars)))
                    value = rec.sub(value, rec.cast(first, acc_dtype))
                if p == 1:  # var: sum of squared deviations from the first pass's mean
                    mean = rec.truediv(rec.call("acc", [], acc=accs[0], dtype=acc_dtype),
                                       _count(rec, count, value))
                    dev = rec.sub(value, mean)
                    value = rec.mul(dev, dev)
                rec.body.append(Reduce(acc.name, value.name))
                if p == 0:  # See Note [Stores in reduction stages]
                    for j, v in early.get(node, ()):
                        self.store(j, v, self.row_index(stage_vars))
                self.end_stage(self.reduce_ranges)
            self.reduced[node.outputs[0]] = (accs, node, count)

    def reduced_value(self, v: Value, idx: tuple) -> _Temp:
        accs, node, count = self.reduced[v]
        kept = list(idx)
        if node.attrs["keepdim"]:
            kept = [i for k, i in enumerate(idx) if k not in self.x_dims]
        # Size-1 kept dims can only be read at 0, whatever the index says.
        if any(i != o for i, o, n in zip(kept, self.row_vars, self.x_kept_sizes()) if n != 1):
            raise Unsupported(f"{node.op.name}'s result is read at another row than its own")
        rec = self.rec
        acc_dtype = compute_dtype(v.type.dtype)
        value = rec.call("acc", [], acc=accs[-1], dtype=acc_dtype)
        if node.op.name == "mean":
            value = rec.truediv(value, _count(rec, count, value))
        elif node.op.name == "var":
            denom = count - node.attrs["correction"]
            denom = max(denom, 0) if isinstance(denom, int) else sizes.norm(sympy.Max(denom, 0))
            value = rec.cast(rec.truediv(value, _count(rec, denom, value)),
                             compute_dtype(v.type.dtype))
        if node.op.name in ("amax", "amin"):
            return value  # one of the operand's values: already of its dtype
        return self.round_half(value, v.type.dtype)

    def store_row_outputs(self, early: dict):
        rows, full = [], []
        stored = {j for members in early.values() for j, _ in members}
        kept_sizes = [n for n in (self.x_shape[k] for k in range(len(self.x_shape))
                                  if k not in self.x_dims) if n != 1]
        for j, v in enumerate(self.g.outputs):
            shape = self.shape(v)
            if j in stored:
                continue
            if shape == self.x_shape and self.reduce_ranges:
                full.append((j, v))
            elif [n for n in shape if n != 1] == kept_sizes:
                rows.append((j, v))
            else:
                raise Unsupported(f"output {v.type} is neither the reduced shape nor"
                                  f" {list(self.x_shape)}")
        if rows:
            self.new_stage([])
            for j, v in rows:
                row = iter(i for i, n in zip(self.row_vars, self.x_kept_sizes()) if n != 1)
                idx = tuple(Index.of(0) if n == 1 else next(row) for n in self.shape(v))
                self.store(j, v, idx)
            self.end_stage([])
        if full:
            self.new_stage(self.reduce_ranges)
            idx = self.row_index([Index.var(var) for var, _ in self.reduce_ranges])
            for j, v in full:
                self.store(j, v, idx)
            self.end_stage(self.reduce_ranges)

    def x_kept_sizes(self) -> list:
        return [self.x_shape[k] for k in range(len(self.x_shape)) if k not in self.x_dims]

    # --- values as functions of an index -------------------------------------------------
    def value_at(self, v: Value, idx: tuple) -> _Temp:
        key = (v, idx)
        if key not in self.stage_memo:
            self.stage_memo[key] = self.compute(v, idx)
        return self.stage_memo[key]

    def compute(self, v: Value, idx: tuple) -> _Temp:
        rec = self.rec
        if v in self.in_buf:
            dtype = compute_dtype(v.type.dtype)
            return rec.call("load", [], buf=self.in_buf[v], index=flat(idx, self.shape(v)),
                            dtype=dtype)
        if v in self.reduced:
            return self.reduced_value(v, idx)
        node = self.producer[v]
        cat = node.op.category
        if cat == POINTWISE:
            return self.pointwise(node, idx)
        if node.op.index_map:  # read through it (Note [Op facts] in ir/ops/registry.py)
            operand = node.inputs[0]
            return self.value_at(operand, self.layout_index(node, idx))
        if cat == CREATION and node.op.name == "full":
            value = node.attrs["value"]
            if compute_dtype(v.type.dtype) != v.type.dtype:
                # The IR's f16/bf16 `full` holds the value rounded to that dtype (70000
                # is an f16 inf), even though the kernel computes in f32.
                value = float(round_to_dtype(np.asarray(value, np.float64), v.type.dtype))
            return rec.call("const", [], value=value, dtype=compute_dtype(v.type.dtype))
        if cat == CREATION and node.op.name == "size_value":  # Note [Sizes as tensors]
            value = node.attrs["value"]
            if isinstance(value, int):
                return rec.call("const", [], value=value, dtype=compute_dtype(v.type.dtype))
            return rec.call("size", [], value=value, dtype=compute_dtype(v.type.dtype))
        raise Unsupported(f"{node.op.name} ({cat}) cannot be computed inside a kernel")

    def pointwise(self, node: Node, idx: tuple) -> _Temp:
        operands = [self.value_at(x, () if x.type.rank == 0 else idx) for x in node.inputs]
        out = node.outputs[0].type.dtype
        targets = compute_dtypes(node.op.name, [x.type.dtype for x in node.inputs], out)
        if node.op.name != "cast":
            operands = [self.rec.cast(t, d) for t, d in zip(operands, targets)]
        elif compute_dtype(out) != out:
            # See Note [Half casts]: an explicit cast to f16/bf16 rounds, result in f32.
            return self.rec.call("cast", operands, dtype=out)
        result = node.op.scalar(self.rec, *operands, **node.attrs)
        return self.round_half(self.rec.cast(result, out), out)

    def round_half(self, value: _Temp, dtype) -> _Temp:
        """`value` (computed in f32) rounded to `dtype` where that is f16/bf16, as eager
        materialises it (Note [Half casts]); other dtypes are left as they are."""
        if compute_dtype(dtype) == dtype:
            return value
        return self.rec.call("cast", [value], dtype=dtype)

    def layout_index(self, node: Node, idx: tuple) -> tuple:
        """The operand index that the layout op's result at `idx` reads."""
        name, a = node.op.name, node.attrs
        src = self.shape(node.inputs[0])
        if name == "reshape":
            if 0 in src:  # no element is ever read (and strides of 0 would divide by 0)
                return tuple(Index.of(0) for _ in src)
            offset = flat(idx, self.shape(node.outputs[0]))
            out, stride = [], 1
            strides = []
            for n in reversed(src):
                strides.append(stride)
                stride = _mul(stride, n)
            for n, s in zip(src, reversed(strides)):
                out.append(offset.floordiv(s, self.ranges).mod(n, self.ranges))
            return tuple(out)
        if name == "permute":
            out = [None] * len(idx)
            for k, p in enumerate(a["perm"]):
                out[p] = idx[k]
            return tuple(out)
        if name == "slice":
            d = normalize_dim(a["dim"], len(src))
            start, step = _slice_start(a["start"], a["stop"], a["step"], src[d])
            out = list(idx)
            out[d] = idx[d].scale(step) + Index.of(start)
            return tuple(out)
        if name == "expand":
            return tuple(Index.of(0) if n == 1 else i for n, i in zip(src, idx))
        if name == "unsqueeze":
            d = normalize_dim(a["dim"], len(src) + 1)
            return idx[:d] + idx[d + 1:]
        if name == "squeeze":
            dims = normalize_dims(a["dims"], len(src)) if a["dims"] else range(len(src))
            gone = [k for k in dims if src[k] == 1]
            it = iter(idx)
            return tuple(Index.of(0) if k in gone else next(it) for k in range(len(src)))
        raise Unsupported(f"{name} is an index map but has no index function here"
                          " (add it to layout_index)")


# Note [Scatter kernels]: `slice_scatter x, src` (Note [Writes as slice_scatter],
# ir/ops/layout.py) is a kernel of two stages: a copy of x, then a store of src's elements
# at their window positions.  Where the memory plan writes the result over x's bytes
# (spec/memory.md, "Writes in place"), the copy stores each element onto itself and the
# runtime drops it (`drop_inplace_copies`): the kernel then stores src's elements only.
NODE_KERNELS = frozenset({"slice_scatter"})


def lower_node(node: Node) -> Kernel:
    """The Kernel of a top-level node that is not a region (today `slice_scatter`, as a
    one-node scatter region); Unsupported for any other node, or one the Kernel model
    cannot express."""
    if node.op.name not in NODE_KERNELS:
        raise Unsupported(f"{node.op.name} has no kernel of its own")
    return lower_region(single_node_body(node))


def drop_inplace_copies(kernel: Kernel) -> Kernel:
    """`kernel` without the stages that only copy an input onto the output written over it
    (Kernel.inplace): each stores every element onto itself (Note [Scatter kernels])."""
    pairs = set(kernel.inplace)
    kept = tuple(st for st in kernel.stages if not _self_copy(st, pairs))
    if len(kept) == len(kernel.stages):
        return kernel
    # the copy's index no longer keeps the window's loops apart (`collapse` checks every
    # stage's indices)
    return collapse(dataclasses.replace(kernel, stages=kept))


def stores_last(kernel: Kernel) -> Kernel:
    """`kernel` with each store over an input (Kernel.inplace) moved after the last
    statement of its stage: every load of element i of that input, made lazily where a
    later result first needs it, then reads the old element (the IR's meaning), so
    several results of one pointwise stage may read the input written over (ir.plan
    `inplace_safe`).  Stages with a reduction are left as they are (never in place)."""
    written = {o for o, _ in kernel.inplace}
    stages = []
    for st in kernel.stages:
        if any(isinstance(s, Store) and s.buf in written for s in st.body) and \
                not any(isinstance(s, Reduce) for s in st.body):
            st = Stage(st.ranges, tuple([s for s in st.body if not isinstance(s, Store)]
                                        + [s for s in st.body if isinstance(s, Store)]))
        stages.append(st)
    return dataclasses.replace(kernel, stages=tuple(stages))


def _self_copy(stage: Stage, pairs: set) -> bool:
    if len(stage.body) != 2:
        return False
    load, store = stage.body
    return isinstance(load, Let) and load.op == "load" and isinstance(store, Store) and \
        store.value == load.name and (store.buf, load.attr("buf")) in pairs and \
        store.index == load.attr("index")


def flat(idx: tuple, shape: tuple) -> Index:
    """Row-major offset of idx in a contiguous tensor of `shape`."""
    out, stride = Index.of(0), 1
    for i, n in zip(reversed(idx), reversed(shape)):
        if n != 1:
            out = out + i.scale(stride)
        stride = _mul(stride, n)
    return out


def _mul(a, b):
    return a * b if isinstance(a, int) and isinstance(b, int) else sizes.norm(a * b)


def _prod(dims) -> sizes.Size:
    out = 1
    for n in dims:
        out = _mul(out, n)
    return out


def _count(rec, count, like):
    """A reduction's element count as a value of `like`'s dtype: a constant, or for a
    symbolic count a `size` Let the kernel computes from its size arguments."""
    if isinstance(count, int):
        return rec.const(float(count), like)
    return rec.call("size", [], value=count, dtype=like.dtype)


def _slice_start(start, stop, step, n):
    """(first index, step) of a slice of a dim of size n; n may be symbolic.  An empty
    slice's start is never read, so a start past the end needs no clamping."""
    if isinstance(n, int) and not any(is_symbolic(x) for x in (start, stop, step)
                                      if x is not None):
        first, _, step = slice(start, stop, step).indices(n)
        return first, step
    step = 1 if step is None else step
    if is_symbolic(step) or step <= 0:
        raise Unsupported(f"slice with step {step} of a symbolic dim")
    if start is None:
        return 0, step
    start = sizes.norm(start)
    if sizes.provably_nonneg(start):
        return start, step
    if isinstance(start, int):  # negative: counts from the end, clamped at 0
        return sizes.norm(sympy.Max(n + start, 0)), step
    raise Unsupported(f"slice start {start} of a symbolic dim may be negative")
