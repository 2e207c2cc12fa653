"""Memory plans: where each intermediate buffer of a graph lives in one arena.

Owns: `MemoryPlan` (slots and views), its text form (a `plan { ... }` section after
the function, printed by ir/printer.py and read by ir/parser.py), the checker
`check_plan` (coverage, liveness, no overlap of live buffers, safe in-place reuse)
and `run_with_plan`, a reference executor that really stores every intermediate in
the arena, so a wrong plan gives wrong answers.  The planning algorithm is the
`plan_memory` pass (ir/passes/plan_memory.py).  Spec: spec/memory.md.

`MemoryPlan.into` says which graph outputs a kernel stores straight into the graph input
the caller would copy them into (a mutated input's new value), and why not where it
does not: `plan_input_writes`, checked by `input_write_safe`.

Steps are top-level node indices.  A buffer is *live* from the step that writes it
to the last step that reads it (or a view of it), both inclusive.  Offsets and sizes
are bytes, multiples of ALIGN, and may be polynomials in size symbols: the plan is
then a formula, evaluated at call time with `MemoryPlan.evaluate(sizes)`.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import sympy

from ir.graph import Graph, Node, Value
from ir.interpreter import run
from ir.ops.layout import slice_bounds
from ir.ops.rules import normalize_dim
from ir.printer import value_names
from ir.types import Dim, bf16, is_symbolic, simplify_dim

ALIGN = 64  # bytes: a cache line, and enough for any vector load


@dataclass(frozen=True)
class Slot:
    """An intermediate with its own bytes: [offset, offset + size) during `live`."""

    value: Value
    offset: Dim
    size: Dim
    live: tuple[int, int]
    reuses: Optional[Value] = None  # in place: the dying operand whose bytes it takes


@dataclass(frozen=True)
class View:
    """An intermediate made by a top-level layout node: it reads `of`'s bytes."""

    value: Value
    of: Value


@dataclass(frozen=True)
class Into:
    """A graph output the caller copies into graph input `input` (a mutated input's new
    value): stored into that input's bytes by the kernel computing it when `why` is ''
    (spec/memory.md, "Graph inputs written in place"), else copied by the caller, for
    the reason `why`."""

    value: Value
    input: Value
    why: str = ""


@dataclass
class MemoryPlan:
    slots: list[Slot] = field(default_factory=list)
    views: list[View] = field(default_factory=list)
    into: list[Into] = field(default_factory=list)

    def arena_bytes(self) -> Dim:
        """The arena size: the highest slot end (a sympy Max when ends are symbolic)."""
        ends = [simplify_dim(s.offset + s.size) for s in self.slots]
        if not ends:
            return 0
        if all(not is_symbolic(e) for e in ends):
            return max(ends)
        return sympy.Max(*ends)

    def evaluate(self, sizes: dict) -> tuple[int, dict[Value, int]]:
        """(arena bytes, offset of each slot) for concrete size symbols."""
        offsets = {s.value: _concrete(s.offset, sizes) for s in self.slots}
        ends = [offsets[s.value] + _concrete(s.size, sizes) for s in self.slots]
        return max(ends, default=0), offsets

    def format(self, name_of) -> list[str]:
        """The plan section's lines (`format_plan`); the printer calls this."""
        return format_plan(self, name_of)

    def entry(self, value: Value):
        for item in self.slots + self.views:
            if item.value is value:
                return item
        return None


def _concrete(d: Dim, sizes: dict) -> int:
    return int(d.subs(sizes)) if is_symbolic(d) else int(d)


# --- sizes ---------------------------------------------------------------------------------
def aligned(nbytes: Dim) -> Dim:
    """nbytes rounded up to a multiple of ALIGN; polynomials round each coefficient up,
    which gives a multiple of ALIGN no smaller than nbytes for every positive size."""
    if not is_symbolic(nbytes):
        return -(-int(nbytes) // ALIGN) * ALIGN
    expr = sympy.expand(nbytes)
    symbols = sorted(expr.free_symbols, key=str)
    try:
        poly = sympy.Poly(expr, *symbols)
    except sympy.PolynomialError:
        raise NotImplementedError(f"cannot plan a buffer of {nbytes} bytes: only polynomial"
                                  " sizes are supported") from None
    out = 0
    for monom, coeff in poly.terms():
        term = -(-int(coeff) // ALIGN) * ALIGN
        for sym, power in zip(symbols, monom):
            term = term * sym ** power
        out = out + term
    return simplify_dim(out)


def provably_nonneg(expr: Dim) -> bool:
    """True when expr >= 0 for every choice of size symbols (integers >= 1)."""
    if not is_symbolic(expr):
        return expr >= 0
    return _provably_nonneg(sympy.expand(expr))


@functools.lru_cache(maxsize=65536)
def _provably_nonneg(expr) -> bool:
    """provably_nonneg of an expanded expression (memory planning asks the same
    questions of many offset pairs: cached)."""
    expr = simplify_dim(expr)
    if not is_symbolic(expr):
        return expr >= 0
    if expr.xreplace({s: 1 for s in expr.free_symbols}) < 0:
        return False  # negative where every size is 1
    if expr.is_nonnegative:
        return True
    # With s = t + 1 (t >= 0), a polynomial in t with nonnegative coefficients is >= 0.
    shifted = {s: sympy.Symbol(f"_t_{s}", integer=True, nonnegative=True) + 1
               for s in expr.free_symbols}
    moved = sympy.expand(expr.subs(shifted))
    try:
        coeffs = sympy.Poly(moved, *sorted(moved.free_symbols, key=str)).coeffs()
    except sympy.PolynomialError:
        return False
    return all(c >= 0 for c in coeffs)


def format_size(d: Dim) -> str:
    """A size in the textual IR's dim grammar (products, sums; powers written out)."""
    if not is_symbolic(d):
        return str(int(d))
    parts = []
    for term in sympy.expand(d).as_ordered_terms():
        coeff, rest = term.as_coeff_Mul()
        factors = []
        for sym, power in sorted(rest.as_powers_dict().items(), key=lambda kv: str(kv[0])):
            if sym == 1:
                continue
            factors += [str(sym)] * int(power)
        magnitude = abs(int(coeff))
        if magnitude != 1 or not factors:
            factors.insert(0, str(magnitude))
        sign = "-" if coeff < 0 else "+"
        parts.append((sign, "*".join(factors)))
    text = "".join(f"{s}{t}" for s, t in parts)
    return text[1:] if text.startswith("+") else text


# --- liveness ------------------------------------------------------------------------------
def liveness(graph: Graph) -> dict[Value, tuple[int, int]]:
    """[first, last] step of every top-level value defined by a node.  A view's reads
    count as reads of what it views (transitively)."""
    step_of = {v: i for i, node in enumerate(graph.nodes) for v in node.outputs}
    view_of = views_in(graph)
    live = {v: (i, i) for v, i in step_of.items()}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            while v is not None:
                if v in live:
                    live[v] = (live[v][0], max(live[v][1], i))
                v = view_of.get(v)
    return live


def views_in(graph: Graph) -> dict[Value, Value]:
    """Top-level results that alias their operand (the `aliases` op fact): result -> operand."""
    return {node.outputs[0]: node.inputs[0] for node in graph.nodes
            if node.op.aliases and node.body is None}


# Views whose elements keep their row-major order: over a row-major operand they are its
# bytes, read the same way (a kernel may take one's pointer for its operand's).
ROW_MAJOR_VIEWS = frozenset({"reshape", "squeeze", "unsqueeze"})


def same_bytes_views(graph: Graph) -> dict[Value, Value]:
    """Top-level ROW_MAJOR_VIEWS results: result -> operand."""
    return {node.outputs[0]: node.inputs[0] for node in graph.nodes
            if node.op.aliases and node.body is None and node.op.name in ROW_MAJOR_VIEWS}


def bytes_root(v: Value, same_bytes: dict) -> Value:
    """The value whose bytes `v` is, in the same order (v itself when it is no such view)."""
    while v in same_bytes:
        v = same_bytes[v]
    return v


def intermediates(graph: Graph) -> list[Value]:
    """Values defined by top-level nodes that the caller never sees.

    The caller sees the outputs and every value an output is a view of (a returned
    `reshape` of a computed value shares its bytes), so none of those is in the arena.
    """
    view_of = views_in(graph)
    visible: set = set()
    for v in graph.outputs:
        while v is not None and v not in visible:
            visible.add(v)
            v = view_of.get(v)
    return [v for node in graph.nodes for v in node.outputs if v not in visible]


# --- in-place safety -----------------------------------------------------------------------
def inplace_safe(node: Node, operand: Value, result: Value, view_of: dict,
                 same_bytes: Optional[dict] = None) -> str:
    """'' when `result` may be written over `operand`'s bytes by `node`, else why not.

    Safe only in a pointwise region that reads the operand elementwise (no index map)
    at every position it is passed, reads no view of it, computes the result with a
    pointwise op of the same shape and element size, and computes no other result from
    the operand: element i is then read before element i is written, and no other
    element is read from those bytes.
    """
    if node.op.name == "slice_scatter" and node.body is None:
        return _scatter_inplace_safe(node, operand, view_of, same_bytes or {})
    if node.body is not None and node.attrs.get("kind") == "scatter":
        return _scatter_region_inplace_safe(node, operand, view_of, same_bytes or {})
    if node.body is None or node.attrs.get("kind") != "pointwise":
        return f"{node.op.name} is not a pointwise region"
    if operand.type.shape != result.type.shape or \
            operand.type.dtype.itemsize != result.type.dtype.itemsize:
        return "operand and result differ in shape or element size"
    body = node.body
    users: dict[Value, list[Node]] = {}
    for inner in body.nodes:
        for v in inner.inputs:
            users.setdefault(v, []).append(inner)
    for param, v in zip(body.inputs, node.inputs):
        root = v
        while root in view_of:
            root = view_of[root]
        if root is not operand:
            continue
        if v is not operand:
            return "the node also reads a view of the operand"
        if param in body.outputs:
            return "the operand is returned unchanged"
        for user in users.get(param, []):
            if user.op.category != "pointwise" or user.outputs[0].type.shape != result.type.shape:
                return f"the body reads the operand through {user.op.name}"
    produced = body.outputs[node.outputs.index(result)]
    makers = [n for n in body.nodes if produced in n.outputs]
    if not makers or makers[0].op.category != "pointwise":
        return "the result is not computed by a pointwise op"
    # Another result computed from the operand may be stored after this one: its loads
    # of element i would then read this result's element i (a wrong answer before:
    # exp(t) written over a dying matmul result that a * t, the region's second
    # result, still read).  A result of the same shape is computed in the same loop at
    # the same element, and the kernel stores after its loads (codegen/lower.py
    # `stores_last`); one of another shape loops apart, maybe later.
    reads = {p for p, v in zip(body.inputs, node.inputs) if v is operand}
    for inner in body.nodes:
        if any(v in reads for v in inner.inputs):
            reads.update(inner.outputs)
    if any(out in reads and out.type.shape != result.type.shape
           for out in body.outputs if out is not produced):
        return "another result of the node, of another shape, reads the operand"
    return ""


def _scatter_inplace_safe(node: Node, operand: Value, view_of: dict, same_bytes: dict) -> str:
    """Note [Scatter kernels] (codegen/lower.py): `slice_scatter x, src` over x's bytes
    stores src's elements at the window and nothing else, so it is safe when x is the
    base or a reshape of it (ROW_MAJOR_VIEWS: the same bytes in the same order) and src
    does not share the base's bytes: every element src holds was computed before the
    first store."""
    x, src = node.inputs
    if bytes_root(x, same_bytes) is not operand:
        return "slice_scatter writes in place over its base only (or a reshape of it)"
    root = src
    while root is not None:
        if root is operand:
            return "the window's new value is a view of the base"
        root = view_of.get(root)
    return ""


def _scatter_region_inplace_safe(node: Node, operand: Value, view_of: dict,
                                 same_bytes: dict) -> str:
    """A scatter region (spec/fusion.md, "Scatter regions") over its base's bytes: safe
    under `_scatter_inplace_safe`'s conditions when, besides, the body reads the base
    only through the window itself (`slice` of the scatter's window) into pointwise ops:
    window element j is then read only by the iteration that stores element j."""
    body = node.body
    scatter = next(n for n in body.nodes if body.outputs[0] in n.outputs)
    base = scatter.inputs[0]
    outer = dict(zip(body.inputs, node.inputs))
    if base not in outer or bytes_root(outer[base], same_bytes) is not operand:
        return "the scatter writes in place over its base only (or a reshape of it)"
    for param, v in outer.items():
        while param is not base and v is not None:
            if v is operand:
                return "the region reads the base through another operand"
            v = view_of.get(v)
    users: dict[Value, list[Node]] = {}
    for inner in body.nodes:
        for v in inner.inputs:
            users.setdefault(v, []).append(inner)
    window = _window_of(scatter, scatter.inputs[1].type.shape)
    for user in users.get(base, []):
        if user is scatter:
            continue
        if user.op.name != "slice" or _window_of(user, user.outputs[0].type.shape) != window:
            return f"the body reads the base through {user.op.name}, not the window"
        for reader in users.get(user.outputs[0], []):
            if reader.op.category != "pointwise":
                return f"the body reads the window through {reader.op.name}"
    return ""


def _window_of(node: Node, shape) -> tuple:
    """(dim, first index, step, shape) of a slice or slice_scatter's window."""
    a = node.attrs
    size = node.inputs[0].type.shape
    d = normalize_dim(a["dim"], len(size))
    start, _ = slice_bounds(size[d], a["start"], a["stop"], a["step"])
    return d, start, a["step"], tuple(shape)

# --- graph inputs written in place --------------------------------------------------------
def input_write_safe(graph: Graph, value: Value, target: Value) -> str:
    """'' when the node computing graph output `value` may store it straight into graph
    input `target`'s bytes (the caller copies `value` there after the call), else why not.

    Safe when `value` has `target`'s shape and dtype, is computed by a region or a
    pointwise or reduction op (a kernel) and is no other output, and `target`'s old value
    is not needed afterwards: no later node reads `target` or a view of it, no output is
    `target` or a view of it (outputs are read after the last step), and the node itself
    reads it, if at all, under the in-place rule of intermediates (`inplace_safe`:
    element i read before element i is written).  The caller vouches that `target`
    shares its storage with no other input (refcomp's NO_ALIASING guard) and hands it
    over contiguous or lets the result be copied (spec/memory.md, "Graph inputs written
    in place")."""
    if target not in graph.inputs:
        return "not a graph input"
    if value.type.shape != target.type.shape or value.type.dtype != target.type.dtype:
        return "the new value differs from the input in shape or dtype"
    if graph.outputs.count(value) != 1:
        return "the new value is also another output"
    step = next((i for i, n in enumerate(graph.nodes) if value in n.outputs), None)
    if step is None:
        return "the new value is a graph input"
    node = graph.nodes[step]
    if node.body is None and (node.op.aliases or node.op.category not in ("pointwise",
                                                                            "reduction")) \
            and node.op.name != "slice_scatter":
        return f"{node.op.name} is not a kernel"
    view_of = views_in(graph)
    # what may hold target's bytes: target, its views, and what an opaque `aten` call
    # makes of them (it may return a view); other nodes make bytes of their own
    shares = {target}
    for n in graph.nodes:
        if n is not node and n.body is None and (n.op.aliases or n.op.name == "aten") \
                and any(v in shares for v in n.inputs):
            shares.update(n.outputs)

    def of_target(v) -> bool:
        return v in shares
    if any(of_target(v) for v in graph.outputs):
        return "an output is the input's old value or a view of it"
    for later in graph.nodes[step + 1:]:
        if any(of_target(v) for v in later.inputs):
            return f"{later.op.name}, a later step, reads the input's old value"
    read = [v for v in node.inputs if of_target(v)]
    if not read:
        return ""
    for v in read:
        while v in view_of:
            v = view_of[v]
        if v is not target:
            return "the node reads what a torch op made of the input"
    return inplace_safe(node, target, value, view_of, same_bytes_views(graph))


def plan_input_writes(graph: Graph, pairs) -> Graph:
    """`graph` (planned) with `plan.into` for each (input index, output index) in `pairs`:
    the outputs the caller copies into inputs, each stored in place where
    `input_write_safe` allows it.  An input named twice is copied both times."""
    inputs = [i for i, _ in pairs]
    into = []
    for i, o in pairs:
        value, target = graph.outputs[o], graph.inputs[i]
        why = "the input is written back twice" if inputs.count(i) > 1 else \
            input_write_safe(graph, value, target)
        into.append(Into(value, target, why))
    plan = MemoryPlan(list(graph.plan.slots), list(graph.plan.views), into)
    return Graph(graph.name, graph.inputs, graph.nodes, graph.outputs, plan)


# --- the checker ---------------------------------------------------------------------------
def check_plan(graph: Graph, sizes: Optional[dict] = None) -> list[str]:
    """Every violation of the plan invariants (spec/memory.md); [] when the plan is valid.

    With `sizes`, also evaluates the formulas there and checks the concrete plan.
    """
    plan = graph.plan
    if plan is None:
        return ["the graph has no memory plan"]
    names = value_names(graph)

    def nm(v):
        return names.get(v, "%<not a top-level value>")

    problems: list[str] = []
    expected = set(intermediates(graph))
    live = liveness(graph)
    view_of = views_in(graph)
    same_bytes = same_bytes_views(graph)
    entries = [s.value for s in plan.slots] + [w.value for w in plan.views]
    for v in entries:
        if v not in expected:
            problems.append(f"{nm(v)} is planned but is not an intermediate (an input, an"
                            " output the caller sees, or not in this graph)")
    for v in expected - set(entries):
        problems.append(f"{nm(v)} has no buffer in the plan")
    for v in {v for v in entries if entries.count(v) > 1}:
        problems.append(f"{nm(v)} is planned twice")
    for w in plan.views:
        if view_of.get(w.value) is not w.of:
            problems.append(f"{nm(w.value)} is planned as a view of {nm(w.of)}, but it is not"
                            " a layout node reading that value")
    producer = {v: node for node in graph.nodes for v in node.outputs}
    for s in plan.slots:
        if s.value not in live:
            continue
        if tuple(s.live) != live[s.value]:
            problems.append(f"{nm(s.value)}: live={_span(s.live)} but the graph says"
                            f" {_span(live[s.value])}")
        if not provably_nonneg(s.offset):
            problems.append(f"{nm(s.value)}: offset {s.offset} may be negative")
        if not provably_nonneg(s.size - s.value.type.nbytes()):
            problems.append(f"{nm(s.value)}: size {s.size} is smaller than its"
                            f" {s.value.type.nbytes()} bytes")
        if s.reuses is not None:
            problems += _check_reuse(s, plan, producer, view_of, same_bytes, nm)
    slots = plan.slots
    for i, a in enumerate(slots):
        for b in slots[i + 1:]:
            if a.live[1] < b.live[0] or b.live[1] < a.live[0]:
                continue  # never live at the same step
            if _is_reuse_pair(a, b) or _is_reuse_pair(b, a):
                continue  # checked by _check_reuse
            if not (provably_nonneg(b.offset - (a.offset + a.size))
                    or provably_nonneg(a.offset - (b.offset + b.size))):
                problems.append(f"{nm(a.value)} and {nm(b.value)} overlap while both are live"
                                f" (steps {_span(a.live)} and {_span(b.live)})")
    problems += _check_into(graph, plan, nm)
    if sizes is not None and not problems:
        problems += _check_concrete(plan, sizes, nm)
    return problems


def _check_into(graph: Graph, plan: MemoryPlan, nm) -> list[str]:
    problems = []
    for item in plan.into:
        if item.input not in graph.inputs or item.value not in graph.outputs:
            problems.append(f"{nm(item.value)} into {nm(item.input)}: not a graph output"
                            " written into a graph input")
        elif not item.why:
            why = input_write_safe(graph, item.value, item.input)
            if why:
                problems.append(f"{nm(item.value)} cannot be written into {nm(item.input)}"
                                f" in place: {why}")
    inputs = [item.input for item in plan.into]
    for v in {v for v in inputs if inputs.count(v) > 1}:
        problems.append(f"{nm(v)} is written into twice")
    return problems


def _span(live) -> str:
    return f"[{live[0]},{live[1]}]"


def _is_reuse_pair(first: Slot, second: Slot) -> bool:
    return second.reuses is first.value


def _check_reuse(s: Slot, plan: MemoryPlan, producer, view_of, same_bytes, nm) -> list[str]:
    old = plan.entry(s.reuses)
    if not isinstance(old, Slot):
        return [f"{nm(s.value)} reuses {nm(s.reuses)}, which has no buffer"]
    if old.live[1] != s.live[0]:
        return [f"{nm(s.value)} reuses {nm(s.reuses)}, which is still live after step"
                f" {s.live[0]}"]
    if sympy.simplify(old.offset - s.offset) != 0 or sympy.simplify(old.size - s.size) != 0:
        return [f"{nm(s.value)} reuses {nm(s.reuses)} but has another offset or size"]
    node = producer[s.value]
    if all(bytes_root(v, same_bytes) is not s.reuses for v in node.inputs):
        return [f"{nm(s.value)} reuses {nm(s.reuses)}, which its node does not read"]
    why = inplace_safe(node, s.reuses, s.value, view_of, same_bytes)
    return [f"{nm(s.value)} cannot reuse {nm(s.reuses)} in place: {why}"] if why else []


def _check_concrete(plan: MemoryPlan, sizes: dict, nm) -> list[str]:
    arena, offsets = plan.evaluate(sizes)
    problems = []
    spans = {s.value: (offsets[s.value], offsets[s.value] + _concrete(s.size, sizes))
             for s in plan.slots}
    for i, a in enumerate(plan.slots):
        if spans[a.value][1] > arena or spans[a.value][0] % ALIGN:
            problems.append(f"{nm(a.value)} is misaligned or outside the arena at {sizes}")
        for b in plan.slots[i + 1:]:
            both = not (a.live[1] < b.live[0] or b.live[1] < a.live[0])
            ra, rb = spans[a.value], spans[b.value]
            if both and ra[0] < rb[1] and rb[0] < ra[1] and not (
                    _is_reuse_pair(a, b) or _is_reuse_pair(b, a)):
                problems.append(f"{nm(a.value)} and {nm(b.value)} overlap at {sizes}")
    return problems


# --- text form -------------------------------------------------------------------------------
def format_plan(plan: MemoryPlan, name_of) -> list[str]:
    """The plan section's lines; `name_of(value)` gives a value's printed `%name`."""
    lines = ["plan {"]
    for s in plan.slots:
        text = (f"  {name_of(s.value)}: offset={format_size(s.offset)},"
                f" size={format_size(s.size)}, live=[{s.live[0]},{s.live[1]}]")
        if s.reuses is not None:
            text += f", reuses={name_of(s.reuses)}"
        lines.append(text)
    for w in plan.views:
        lines.append(f"  {name_of(w.value)}: view of {name_of(w.of)}")
    for item in plan.into:
        text = f"  {name_of(item.value)}: into {name_of(item.input)}"
        lines.append(text + (f", copied={json.dumps(item.why)}" if item.why else ""))
    arena = plan.arena_bytes()
    total = simplify_dim(sum((s.size for s in plan.slots), 0))
    lines.append(f"  # arena={str(arena).replace(' ', '')} bytes,"
                 f" buffers={str(total).replace(' ', '')} bytes")
    lines.append("}")
    return lines


def parse_plan(parser, scope: dict) -> MemoryPlan:
    """Read a `plan { ... }` section with the IR parser's tokens; names are top-level."""
    parser.expect("plan")
    parser.expect("{")
    plan = MemoryPlan()
    while not parser.at("}"):
        value = parser.use(scope)
        parser.expect(":")
        if parser.accept("view"):
            parser.expect("of")
            plan.views.append(View(value, parser.use(scope)))
            continue
        if parser.accept("into"):
            target, why = parser.use(scope), ""
            if parser.accept(","):
                parser.expect("copied")
                parser.expect("=")
                why = parser.attr_value("str")
            plan.into.append(Into(value, target, why))
            continue
        fields = {}
        for key in ("offset", "size", "live"):
            if key != "offset":
                parser.expect(",")
            parser.expect(key)
            parser.expect("=")
            if key == "live":
                parser.expect("[")
                first = parser.number()
                parser.expect(",")
                fields[key] = (first, parser.number())
                parser.expect("]")
            else:
                fields[key] = simplify_dim(parser.dim())
        reuses = None
        if parser.accept(","):
            parser.expect("reuses")
            parser.expect("=")
            reuses = parser.use(scope)
        plan.slots.append(Slot(value, fields["offset"], fields["size"], fields["live"], reuses))
    parser.expect("}")
    return plan


# --- a reference executor that obeys the plan ----------------------------------------------
def run_with_plan(graph: Graph, args, rng=None) -> list:
    """Run `graph` storing every slot's data in one byte arena at its planned offset.

    Views are recomputed from their operand when read.  A plan that lets two live
    buffers share bytes makes this executor return wrong values; the interpreter
    (`ir.run`) stays the oracle for what the values should be.
    """
    plan = graph.plan
    sizes = _bind_sizes(graph, args)
    arena_size, offsets = plan.evaluate(sizes)
    arena = np.zeros(max(arena_size, 1), np.uint8)
    slot_of = {s.value: s for s in plan.slots}
    env = dict(zip(graph.inputs, [np.asarray(a) for a in args]))

    def store(v, array):
        if v not in slot_of:
            env[v] = array
            return
        _bytes_view(arena, offsets[v], v, sizes)[...] = _encode(array, v)

    def load(v):
        if v in slot_of:
            return _decode(_bytes_view(arena, offsets[v], v, sizes), v, sizes)
        return env[v]

    for node in graph.nodes:
        one = Graph("step", list(node.inputs), [node], list(node.outputs))
        results = run(one, [load(v) for v in node.inputs], rng)
        for v, array in zip(node.outputs, results):
            store(v, array)
    return [load(v) for v in graph.outputs]


def _bind_sizes(graph: Graph, args) -> dict:
    sizes = {}
    for v, a in zip(graph.inputs, args):
        for dim, actual in zip(v.type.shape, np.shape(a)):
            if is_symbolic(dim) and dim.is_Symbol:
                sizes[dim] = actual
    return sizes


def _storage(v: Value) -> np.dtype:
    # bf16 is stored in the arena as its 16 bits; the interpreter keeps it in float32.
    return np.dtype(np.uint16) if v.type.dtype is bf16 else v.type.dtype.np


def _shape(v: Value, sizes: dict) -> tuple[int, ...]:
    return tuple(_concrete(d, sizes) for d in v.type.shape)


def _bytes_view(arena, offset, v: Value, sizes: dict) -> np.ndarray:
    count = int(np.prod(_shape(v, sizes)))
    dtype = _storage(v)
    return arena[offset:offset + count * dtype.itemsize].view(dtype)


def _encode(array, v: Value) -> np.ndarray:
    flat = np.ascontiguousarray(array).reshape(-1)
    if v.type.dtype is bf16:
        return (flat.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return flat


def _decode(flat, v: Value, sizes: dict) -> np.ndarray:
    if v.type.dtype is bf16:
        flat = (flat.astype(np.uint32) << 16).view(np.float32)
    return flat.copy().reshape(_shape(v, sizes))
