"""Turning a trace into a runnable cache entry, and running it.

Owns: `build_entry` (trace result -> optimized graph -> backend -> `Entry`) and
`Entry.run`: call the compiled graph on the guarded inputs, write mutated inputs
back, detach the outputs eager would not have attached to autograd, and rebuild
the frame's return value.  Spec: spec/guards.md, "Cache and recompiles", and
spec/tracer.md, "Outputs, mutation and autograd".

The Notes cited here are defined in spec/: Note [Autograd honesty] (tracer.md, "Outputs,
mutation and autograd"), Note [Returned views], Note [Views of outputs] (correctness.md,
"Output aliasing") and Note [Runtime checks] (correctness.md, "Exceptions").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import sympy
import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false
from torch.autograd.graph import increment_version

from codegen import sizes as sz
from codegen.backends import get_backend
from codegen.stats import collecting, gc_paused, stage
from ir.facts import touches_rng
from ir.graph import Graph
from ir.ops.opaque import parse_layouts
from ir.passes.manager import run_pipeline
from ir.passes.pipelines import optimize_passes
from ir.passes.registry import all_passes
from ir.plan import views_in
from refcomp import global_state, logs
from refcomp.aliasing import (
    fold_clone_copies,
    outputs_maybe_views,
    outputs_to_copy,
    outputs_to_rewrap,
)
from refcomp.autograd import check_versions_at_backward, eager_version_plan
from refcomp.cache import COUNTERS
from refcomp.config import default_backend
from refcomp.guards import GuardSet, pinned_contiguous
from refcomp.reasons import (
    NON_TENSOR_RESULT,
    OP_BY_OP_AUTOGRAD,
    TENSOR_CONTROL_FLOW,
    Unsupported,
)
from refcomp.tracer import eager_layout
from refcomp.tracer.context import CONSTANT_TYPES, TraceContext
from refcomp.tracer.facts import has_symbols
from refcomp.tracer.torch_table import is_symbolic_shape
from refcomp.tracer.values import (
    VIEW_BASE,
    VT,
    ConstVar,
    DictVar,
    ListVar,
    MadeObjectVar,
    ModelOutputVar,
    TensorVar,
    TupleVar,
    make_model_output,
    make_tuple,
)


@dataclass
class Entry:
    """One cache entry: guards -> compiled graph (or, for a fallback entry, eager)."""

    guards: GuardSet
    graph: Optional[Graph] = None  # None: the frame runs eagerly (see `reason`)
    fn: Any = None
    output_spec: Any = None
    # What run() does to the outputs before the caller sees them: one OutputFix per output
    # that needs anything (below).
    outputs: tuple = ()
    contiguous: bool = False
    # Entry inputs the contiguity pass leaves as they are (_read_in_named_layouts).
    keep_layout: frozenset = frozenset()
    backend: str = ""
    reason: Optional[Unsupported] = None
    notes: list = field(default_factory=list)
    compile_time_s: float = 0.0
    stage_times: dict = field(default_factory=dict)  # seconds per compile stage
    hits: int = 0
    refs: list = field(default_factory=list)  # strong refs that keep ID_MATCH ids valid
    weakrefs: list = field(default_factory=list)
    refs_to_hold: tuple = ()  # ID_MATCH objects, handed to the cache (modules: weakly)
    resume: Any = None  # a graph break's Break (refcomp/break_trace.py), else None
    generated: bool = False  # an entry of a resume function (refcomp/resume.py)
    # Output index when `run` would only pick one output of fn (no output fix, no
    # contiguity pass): the call path then calls fn itself, saving ~0.2 us.
    lone: Optional[int] = None
    # Returned views of inputs (Note [Returned views]): (input index, size, stride,
    # storage offset minus the input's, grad): the grad mode the view was made under
    # when the input requires grad, else None.
    views: list = field(default_factory=list)
    # A compiled forward + backward (refcomp/autograd.py): its TrainingRecord, else None.
    training: Any = None
    # Eager's version checks at backward (Note [Saved by eager], ir/ops/registry.py): per
    # output, the inputs and outputs eager's nodes on its path save.
    version_plan: dict = field(default_factory=dict)
    # Inputs written in place under grad (Note [In-place on a graph input under grad],
    # refcomp/tracer/mutation.py): the graph gets a clone, the write-back records autograd.
    grad_written: frozenset = frozenset()
    # Note [Write-back sources]: outputs written back into one input that are another
    # written input's old value or a view of it (`x1.copy_(x0); x0.add_(x0)`): copied
    # before any write-back, else the copy into x1 read x0's new value.
    snapshot: frozenset = frozenset()

    def __post_init__(self):
        fixes = self.outputs
        self._checks = tuple((f.index, f.check) for f in sorted(
            (f for f in fixes if f.check is not None), key=lambda f: f.check_order))
        self._settle = tuple(f for f in fixes if f.settles)
        self._writeback = tuple((i, f.index) for f in fixes for i in f.writes_back)
        self._detach = frozenset(f.index for f in fixes if f.detach)
        self._raise_checks = any(not isinstance(c, str) for _, c in self._checks)

    def run(self, inputs):
        if self.contiguous and self.keep_layout:
            keep = self.keep_layout
            call_inputs = [t if t.is_contiguous() or i in keep else t.contiguous()
                           for i, t in enumerate(inputs)]
        elif self.contiguous:
            call_inputs = [t if t.is_contiguous() else t.contiguous() for t in inputs]
        else:
            call_inputs = inputs
        if self.grad_written:
            call_inputs = [t.clone() if i in self.grad_written else t
                           for i, t in enumerate(call_inputs)]
        try:
            outs = self.fn(*call_inputs)
        except Exception:
            if self._raise_checks:  # Note [Raising branches]: eager says which raises first
                raise RerunEagerly() from None
            raise
        for i, check in self._checks:  # in program order: eager raises the first
            if outs[i]:
                raise check_exception(check)
        if self._settle:
            outs = list(outs)
            for fix in self._settle:
                outs[fix.index] = fix.settle(outs[fix.index], call_inputs)
        if self._writeback:
            if self.snapshot:
                outs = list(outs)
                for o in self.snapshot:
                    outs[o] = outs[o].clone()
            for i, o in self._writeback:
                target = inputs[i]
                if outs[o] is target:  # stored in place (Note [Inputs written in place])
                    increment_version(target)  # what copy_ would count
                    continue
                with torch.set_grad_enabled(i in self.grad_written):
                    target.copy_(outs[o])
        if self._detach:
            outs = [o.detach() if i in self._detach else o for i, o in enumerate(outs)]
        if self.version_plan:
            check_versions_at_backward(self.version_plan, inputs, outs)
        views = [_view(inputs, *v) for v in self.views] if self.views else None
        return _rebuild(self.output_spec, outs, inputs, views)


@dataclass(frozen=True)
class OutputFix:
    """What `Entry.run` does to one output of the compiled function, in this order: raise
    where a runtime check fails; make the tensor the caller gets (`settle`: a clone,
    eager's memory order, the input object's own view); copy it into the inputs it writes
    back to; detach it.  Each field says why in its Note."""

    index: int  # the output of the compiled function
    # Note [Runtime checks]: raise check_exception(check) when this 0-d bool output is
    # true; check_order: its place among the entry's checks in program order.
    check: Any = None
    check_order: int = 0
    # Note [Fresh outputs] (refcomp/aliasing.py): the backend may hand back memory eager's
    # result does not share: "clone" it, or "row_major" (eager lays it out row-major:
    # `x.contiguous()` of a transposed input folds to `x`).
    clone: Optional[str] = None
    # Note [Output layout]: (eager's strides, eager's (dim, stride) of dims of size > 1),
    # or with dynamic sizes (None, eager's dim order, outermost first): restrided to
    # eager's memory order when the backend's differs.
    layout: Optional[tuple] = None
    row_major: bool = False  # eager's result is row-major and the backend's may not be
    rewrap: bool = False  # an input handed back: the caller gets a view, as from eager
    writes_back: tuple = ()  # input indices this output's value is copied into
    detach: bool = False  # eager does not attach this output to autograd

    @property
    def settles(self) -> bool:
        return bool(self.clone or self.layout or self.row_major or self.rewrap)

    def settle(self, o, call_inputs):
        """The tensor the caller gets for the backend's output `o`."""
        if self.clone == "row_major":
            o = o.clone(memory_format=torch.contiguous_format)
        elif self.clone:
            o = o.clone()
        if self.layout is not None:
            strides, dims = self.layout
            got = o.stride()
            if strides is None:  # dynamic sizes: `dims` is eager's memory order
                if _permuted(o.shape, got, dims):
                    o = torch.empty_permuted(o.shape, dims, dtype=o.dtype,
                                             device=o.device).copy_(o)
            elif any(got[d] != st for d, st in dims):
                o = torch.empty_strided(o.shape, strides, dtype=o.dtype,
                                        device=o.device).copy_(o)
        if self.row_major and not o.is_contiguous():
            o = o.contiguous()
        if self.rewrap and any(o is t for t in call_inputs):
            o = o.view(o.shape)
        return o


def output_fixes(*, checks, fresh, fresh_row_major, layouts, row_major, rewrap, writeback,
                 detach) -> tuple:
    """One OutputFix per output that needs one, from the facts each analysis found."""
    fixes: dict = {}

    def fix(i):
        return fixes.setdefault(i, {})
    for order, (i, check) in enumerate(checks):
        if "check" not in fix(i):  # one condition twice: the first in program order
            fix(i).update(check=check, check_order=order)
    for i in fresh:
        fix(i)["clone"] = "row_major" if i in fresh_row_major else "clone"
    for i, strides, dims in layouts:
        fix(i)["layout"] = (strides, dims)
    for i in row_major:
        fix(i)["row_major"] = True
    for i in rewrap:
        fix(i)["rewrap"] = True
    for i, o in writeback:
        fix(o)["writes_back"] = fix(o).get("writes_back", ()) + (i,)
    for i in detach:
        fix(i)["detach"] = True
    return tuple(OutputFix(i, **kw) for i, kw in sorted(fixes.items()))


def check_exception(check) -> Exception:
    """Note [Runtime checks]: the exception a failed check raises.  A message (ATen's
    checks) names its type (IndexError, else RuntimeError); a raising branch (Note
    [Raising branches], refcomp/tracer/raise_checks.py) recorded (class, args)."""
    if isinstance(check, str):
        return (IndexError if check.startswith("IndexError") else RuntimeError)(check)
    cls, args = check
    return cls(*args)


def _permuted(shape, strides, order) -> bool:
    """Whether `strides` differ, on a dim of size > 1, from a dense tensor's of `shape`
    laid out in `order` (outermost dim first)."""
    step = 1
    for d in reversed(order):
        if shape[d] > 1 and strides[d] != step:
            return True
        step *= shape[d]
    return False


_REPLAY = "replay"  # Entry.views: `stride` holds view steps to run on the caller's tensor


@dataclass(frozen=True)
class _Size:
    """A symbolic size inside a replayed view op's arguments: `fn` of the input sizes
    at `where` ((input index, dim) per symbol)."""

    fn: Any
    where: tuple

    def __call__(self, inputs):
        return int(self.fn(*(inputs[i].shape[d] for i, d in self.where)))


def _resolve(x, inputs, base):
    """A view step's argument for this call: sizes evaluated, VIEW_BASE -> `base`."""
    if x is VIEW_BASE:
        return base
    if isinstance(x, _Size):
        return x(inputs)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_resolve(i, inputs, base) for i in x)
    if isinstance(x, dict):
        return {k: _resolve(v, inputs, base) for k, v in x.items()}
    if isinstance(x, slice):
        return slice(_resolve(x.start, inputs, base), _resolve(x.stop, inputs, base),
                     _resolve(x.step, inputs, base))
    return x


def _replay(t, steps, inputs):
    for fn, args, kwargs, item in steps:
        t = fn(*_resolve(args, inputs, t), **_resolve(kwargs, inputs, t))
        if item is not None:
            t = t[item]
    return t


def _view(inputs, i, size, stride, offset, grad):
    t = inputs[i]
    if size is _REPLAY:  # Note [Returned views]: the traced view ops, on this call's sizes
        if grad == "detach":
            return _replay(t.detach(), stride, inputs)
        with torch.set_grad_enabled(torch.is_grad_enabled() if grad is None else grad):
            return _replay(t, stride, inputs)
    if size is None:  # the input's own layout, whatever its (dynamic) sizes
        size, stride = t.shape, t.stride()
    if grad == "detach":
        return t.detach().as_strided(size, stride, t.storage_offset() + offset)
    if grad is None:
        return t.as_strided(size, stride, t.storage_offset() + offset)
    with torch.set_grad_enabled(grad):
        return t.as_strided(size, stride, t.storage_offset() + offset)


def _rebuild(spec, outs, inputs, views=None):
    kind = spec[0]
    if kind == "out":
        return outs[spec[1]]
    if kind == "view":
        return views[spec[1]]
    if kind == "oview":  # Note [Views of outputs]
        if spec[3]:  # made under no_grad: eager refuses an in-place op on it under grad
            with torch.no_grad():
                return _replay(outs[spec[1]], spec[2], inputs)
        return _replay(outs[spec[1]], spec[2], inputs)
    if kind == "in":
        return inputs[spec[1]]
    if kind == "const":
        return spec[1]
    if kind == "size":  # a dynamic size the frame returned, read off this call's inputs
        return int(spec[1](*(inputs[i].shape[d] for i, d in spec[2])))
    if kind == "tuple":
        items = tuple(_rebuild(s, outs, inputs, views) for s in spec[1])
        return make_tuple(spec[2], items)
    if kind == "list":
        return [_rebuild(s, outs, inputs, views) for s in spec[1]]
    if kind == "model_output":
        return make_model_output(
            spec[1], {k: _rebuild(s, outs, inputs, views) for k, s in spec[2]},
            {k: _rebuild(s, outs, inputs, views) for k, s in spec[3]})
    return {k: _rebuild(s, outs, inputs, views) for k, s in spec[1]}


class _Outputs:
    """Collects graph outputs while describing the frame's return value (views of
    intermediates rebuilt from graph outputs: Note [Views of outputs])."""

    def __init__(self, ctx: TraceContext):
        self.ctx = ctx
        self.values: list = []
        self.keys: list = []  # eager's alias identity per output (Note [Fresh outputs])
        self.index: dict = {}  # id(TensorVar) -> output index
        self.requires_grad: list = []
        self.input_index = {src.name(): i for i, src in enumerate(ctx.input_sources)}
        self.views: list = []  # Entry.views
        self.view_index: dict = {}  # id(TensorVar) -> index in views
        self.notes: list = []
        self.layouts: list = []  # OutputFix.layout: (index, strides, dims)
        self.row_major: set = set()  # output indices whose eager result is row-major

    def add_value(self, value, requires_grad: bool, key=None) -> int:
        self.values.append(value)
        self.keys.append(key)
        self.requires_grad.append(requires_grad)
        return len(self.values) - 1

    def size_spec(self, expr):
        symbols = sorted(expr.free_symbols, key=str)
        where = []
        for sym in symbols:
            source, dim = self.ctx.sym_sources[sym][0]
            where.append((self.input_index[source.name()], dim))
        return ("size", sz.int_function(symbols, expr), where)

    def _note_layout(self, index: int, vt: TensorVar) -> None:
        """Note [Output layout]: eager's result of a pointwise or `*_like` op keeps its
        operand's memory order (a permuted or channels_last input gives a permuted or
        channels_last result); kernels write row-major.  Where eager's strides (the meta
        result's) are dense but not row-major, `Entry.run` restrides the output when the
        backend's differs (a copy: what eager's layout costs).  With static shapes the
        entry keeps eager's strides; with dynamic ones their memory order (dims from
        outermost to innermost, the meta's strides on the traced sizes sorted; symbolic
        sizes are >= 2, so only size-1 dims tie, and their strides do not matter), and
        the output is restrided to a dense tensor in that order at this call's sizes
        (corpus permuted_pointwise_output_dynamic).  With static shapes eager's strides
        may also be non-overlapping but not dense: `slice_scatter`, `select_scatter`,
        `diagonal_scatter` copy their input with `clone_preserve_strides`, so a
        step-sliced input gives a step-strided result, as their meta kernels say; the
        output is restrided to those strides too (`empty_strided` allocates the gaps;
        corpus scatter_of_step_input_strides).

        And where eager's result is row-major, a backend that runs ATen ops (`eager`)
        may still hand back another order: the IR folds `x.contiguous()` into `x` and
        decomposes softmax, layer_norm, ... into pointwise ops, and ATen's pointwise ops
        follow their operand's memory order, so `x.contiguous() * 2` or `x.softmax(0)`
        of a transposed `x` came back transposed (corpus
        pointwise_of_contiguous_copy_strides, softmax_then_flip_strides_eager).  On a
        backend that does not promise row-major results (`Backend.row_major`) such an
        output is made contiguous when it is not (`Entry.row_major`: one
        `is_contiguous()` per output and call).  Kernels' backends pay that only for an
        output that may be a view of another value (`outputs_maybe_views`): the IR folds
        a clone, so `(x + 1).narrow(1, 0, 1).clone()` is the narrow view of the
        kernel's buffer (corpus clone_of_narrow_of_intermediate_strides); and for an
        output an opaque `aten` call returns, which ATen laid out
        (`_outputs_of_aten_calls`: corpus sort_indices_contiguous_strides_llvm)."""
        meta = vt.meta
        if meta.is_contiguous():
            self.row_major.add(index)
            return
        symbolic = is_symbolic_shape(vt.value.type.shape)
        if not is_non_overlapping_and_dense_or_false(meta) and (
                symbolic or eager_layout.operand_strides(meta) is None):
            return  # overlapping (expanded), or not dense with dynamic sizes
        if symbolic:
            order = sorted(range(meta.dim()), key=lambda d: (-meta.stride()[d], d))
            self.layouts.append((index, None, tuple(order)))
            return
        self.layouts.append((index, tuple(meta.stride()),
                             tuple((d, st) for d, (n, st) in
                                   enumerate(zip(meta.shape, meta.stride())) if n > 1)))

    def view_spec(self, vt: TensorVar):
        """("view", k) when `vt` is rebuilt from an input (Note [Returned views])."""
        if id(vt) in self.view_index:
            return ("view", self.view_index[id(vt)])
        root = vt.view_root
        if root is None or root.source is None:
            return None
        name = root.source.name()
        if name not in self.input_index or self.ctx.input_vars.get(name) is not root or \
                vt.meta.dtype != root.meta.dtype:
            return None
        if name in self.ctx.mutated:
            # The input is written back before views are rebuilt, so a view of its new
            # value is a view of the caller's tensor -- if the in-place ops kept its layout.
            # (A view taken before a later mutation is live at it: that mutation is RB010.)
            # An input's meta has storage offset 0 whatever the caller's offset (meta_like,
            # refcomp/tracer/context.py), so an in-place op kept the offset when the
            # meta's is still 0 (corpus inplace_then_view_of_offset_input).
            example = self.ctx.examples.get(name)
            if self.ctx.mutated[name][1] is not root or example is None or \
                    tuple(root.meta.shape) != tuple(example.shape) or \
                    root.meta.stride() != example.stride() or \
                    root.meta.storage_offset() != 0:
                return None
        elif root.value is not self.ctx.builder.inputs[self.input_index[name]]:
            return None
        same_layout = (tuple(vt.value.type.shape) == tuple(root.value.type.shape)
                       and vt.meta.stride() == root.meta.stride()
                       and vt.meta.storage_offset() == root.meta.storage_offset())
        dynamic = is_symbolic_shape(vt.value.type.shape) or \
            is_symbolic_shape(root.value.type.shape)
        replay = self._replay(vt.view_steps) if dynamic and not same_layout else None
        if dynamic and not same_layout and replay is None:
            self.notes.append(f"a returned view of {name} is a copy: its sizes are dynamic"
                              " and a view op cannot be replayed (Note [Returned views])")
            return None
        grad = vt.view_grad if root.requires_grad else None
        if root.requires_grad and not vt.requires_grad and vt.view_grad:
            grad = "detach"  # x.detach() (or a view of it): no autograd history
        overlap = torch._debug_has_internal_overlap(root.meta) != 0
        if root.requires_grad and grad != "detach" and replay is None and (
                overlap or any(step[3] is not None for step in vt.view_steps or ())):
            # An input whose elements share memory (expanded): as_strided's backward
            # sums the gradient per memory location and spreads it over the elements
            # sharing it, where eager's view ops keep one gradient per element (Note
            # [Returned views]; corpus grad_view_of_expanded_input).  A view through a
            # view op with several results (chunk, split, unbind): autograd refuses an
            # in-place op on such a view of a tensor that requires grad, and on an
            # as_strided view it would not (corpus grad_chunk_view_modified_missed_raise;
            # where the steps cannot be replayed, the as_strided view keeps the aliasing).
            replay = self._replay(vt.view_steps)
            if replay is None and overlap:
                self.notes.append(f"a returned view of {name} is a copy: {name} requires"
                                  " grad, its elements share memory and a view op cannot be"
                                  " replayed (Note [Returned views])")
                return None
        if replay is not None:  # the view ops, run again on the caller's tensor
            self.views.append((self.input_index[name], _REPLAY, replay, 0, grad))
        elif dynamic:  # the input's own layout: read off the caller's tensor
            self.views.append((self.input_index[name], None, None, 0, grad))
        else:
            self.views.append((self.input_index[name], tuple(vt.meta.shape),
                               tuple(vt.meta.stride()),
                               vt.meta.storage_offset() - root.meta.storage_offset(), grad))
        self.view_index[id(vt)] = len(self.views) - 1
        return ("view", len(self.views) - 1)

    def output_view_spec(self, vt: TensorVar):
        """("oview", k, steps, no_grad) when `vt` is rebuilt as a view of output k (Note
        [Views of outputs]), else None."""
        if vt.view_base is None or vt.value is not vt.view_made:
            # (an in-place op on the view itself since it was made: `(x + 1).view(-1)
            # .mul_(2)`, whose base nothing else holds, so the base was not updated; corpus
            # inplace_on_view_of_unnamed_intermediate)
            return None
        base, value = vt.view_base
        meta = base.meta
        if base.value is not value or base.view_root is not None or \
                (base.source is not None and base.source.name() in self.input_index):
            return None
        # The replay needs the base in eager's memory order: row-major, or restrided by
        # Note [Output layout] (dense: to eager's strides, or with dynamic sizes to a
        # dense tensor in eager's dim order, which is eager's strides at those sizes).
        if not is_non_overlapping_and_dense_or_false(meta):
            return None
        steps = self._replay(vt.view_steps)
        if steps is None:
            return None
        kind, k = self.spec(base)
        if kind != "out":
            return None
        return ("oview", k, steps, not vt.view_grad)

    def _replay(self, steps):
        """`steps` (TensorVar.view_steps) with each symbolic size as a `_Size` read off
        the call's inputs, or None when a step or a size's symbol cannot be replayed."""
        if steps is None:
            return None

        def arg(x):
            if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
                return type(x)(arg(i) for i in x)
            if isinstance(x, dict):
                return {k: arg(v) for k, v in x.items()}
            if isinstance(x, slice):
                return slice(arg(x.start), arg(x.stop), arg(x.step))
            if isinstance(x, sympy.Basic):
                if not x.free_symbols:
                    return int(x)
                symbols = sorted(x.free_symbols, key=str)
                where = []
                for sym in symbols:
                    source, dim = self.ctx.sym_sources[sym][0]
                    if source.name() not in self.input_index:
                        raise LookupError(sym)
                    where.append((self.input_index[source.name()], dim))
                return _Size(sz.int_function(symbols, x), tuple(where))
            return x

        try:
            return tuple((fn, arg(args), arg(kwargs), item) for fn, args, kwargs, item in steps)
        except (LookupError, TypeError):
            return None

    def spec(self, vt: VT):
        if isinstance(vt, TensorVar):
            name = vt.source.name() if vt.source is not None else None
            if name in self.input_index and self.ctx.input_vars[name] is vt and \
                    name not in self.ctx.mutated and \
                    vt.value is self.ctx.builder.inputs[self.input_index[name]]:
                return ("in", self.input_index[name])  # eager returns the very object
            if name in self.ctx.mutated:
                return ("in", self.input_index[name])  # mutated in place, then returned
            view = self.view_spec(vt)
            if view is not None:
                return view
            view = self.output_view_spec(vt)
            if view is not None:
                return view
            if id(vt) not in self.index:
                self.index[id(vt)] = self.add_value(vt.value, vt.requires_grad, vt.alias)
                self._note_layout(self.index[id(vt)], vt)
            return ("out", self.index[id(vt)])
        if isinstance(vt, ConstVar):
            if isinstance(vt.value, torch.Tensor):
                raise Unsupported(NON_TENSOR_RESULT, "returning a tensor constant")
            if isinstance(vt, MadeObjectVar):  # eager returns a new one at every call
                raise Unsupported(NON_TENSOR_RESULT, f"returning {vt!r}")
            if isinstance(vt.value, sympy.Basic) and vt.value.free_symbols:
                return self.size_spec(vt.value)
            if has_symbols(vt.value):  # a slice(s0 - 3, None) built here: no constant
                raise Unsupported(NON_TENSOR_RESULT, f"returning a {type(vt.value).__name__}"
                                                     " holding a dynamic size")
            if vt.source is not None and not _pinned_object(vt.value):
                # Only its type is guarded: a later call's object differs.  The return
                # becomes a graph break that CPython runs (spec/runtime.md).
                raise Unsupported(NON_TENSOR_RESULT, f"returning {vt.source.name()}, an object of"
                                           f" type {type(vt.value).__name__}")
            return ("const", vt.value)
        if isinstance(vt, TupleVar):
            return ("tuple", [self.spec(i) for i in vt.items], vt.cls)
        if isinstance(vt, ListVar):
            return ("list", [self.spec(i) for i in vt.items])
        if isinstance(vt, ModelOutputVar):  # Note [Model outputs] (refcomp/tracer/constructors.py)
            return ("model_output", vt.cls, [(k, self.spec(v)) for k, v in vt.fields.items()],
                    [(k, self.spec(v)) for k, v in vt.items.items()])
        if isinstance(vt, DictVar):
            return ("dict", [(k, self.spec(v)) for k, v in vt.items.items()])
        raise Unsupported(NON_TENSOR_RESULT, f"returning {vt!r}")


def _pinned_object(value) -> bool:
    """Values whose guard pins the object itself (a constant, or identity under ID_MATCH)."""
    import types

    if isinstance(value, (tuple, frozenset)):
        return all(_pinned_object(v) for v in value)
    return isinstance(value, CONSTANT_TYPES + (torch.dtype, torch.device, type,
                                               types.FunctionType, types.ModuleType,
                                               types.BuiltinFunctionType, torch.nn.Module))


def default_passes() -> list:
    """The registered passes of DEFAULT_PIPELINE (ir/passes/pipelines.py)."""
    from ir.passes.pipelines import optimize_passes
    from ir.passes.registry import all_passes

    return optimize_passes(None, all_passes(), op_by_op_autograd=False)


# Note [Composites under autograd]: on a backend that records autograd op by op (`eager`),
# each IR op is one autograd node, so what the nodes save and how their gradients round
# follow the IR's ops.  ATen's composites (softmax, log_softmax, layer_norm, batch_norm...)
# have their own nodes that save less than their decompositions: softmax saves its
# result, its decomposition's amax saves the input, so modifying the input after the graph
# raised at backward where eager does not.  And a pass that makes one value of two makes
# one tensor of two: `simplify` folds `v4 = v3 * 1` into v3 and `cse` merges twins, so
# `v4 / v4` saved the v3 the caller then changed in place (thorough gradient loop, corpus
# grad_folded_identity_saved_false_raise_eager).  Such a graph runs the default pipeline's
# `dce` only (the eager backend has every composite): the nodes are eager's.  Graphs
# without autograd, and the compiled Function's halves, run the whole pipeline.


class RerunEagerly(Exception):
    """Note [Raising branches]: the graph of an entry with a raising branch's check raised
    before the entry could look at the check; nothing observable has happened yet, so
    the caller runs the frame eagerly, which raises what eager raises first."""


def _no_draw_with_raise_check(ctx) -> None:
    """Note [Raising branches]: a graph with a raising branch's check may be rerun eagerly
    (RerunEagerly), and a random draw after the check would advance the generator where
    eager, having raised, drew nothing: with a draw, the frame runs eagerly."""
    if ctx.raise_check_at is not None and any(touches_rng(n) for n in ctx.builder.nodes):
        raise Unsupported(TENSOR_CONTROL_FLOW, "the truth value of a tensor (a branch that"
                          " raises, in a graph that draws random numbers)")


def build_entry(ctx: TraceContext, output: VT, backend_name: str, options: dict,
                guard_list: list) -> Entry:
    """Graph, backend and runtime plan for a finished trace."""
    start = time.perf_counter()
    outs = _Outputs(ctx)
    spec = outs.spec(output)
    writeback = []
    grad_written = set()  # Note [In-place on a graph input under grad]
    for i, src in enumerate(ctx.input_sources):
        if src.name() in ctx.mutated:
            _, tv = ctx.mutated[src.name()]
            # a parameter written under no_grad: written back without autograd (Note
            # [Parameters written under no_grad], refcomp/tracer/mutation.py)
            grad = tv.requires_grad and not tv.written_without_grad
            writeback.append((i, outs.add_value(tv.value, grad)))
            if grad:
                grad_written.add(i)
            else:  # a buffer updated from detached values (an EMA):
                ctx.grad_free.add(tv.value)  # no gradient reaches it (a cut feeds no
                # value that requires grad: RB011), so it is written back without autograd
    _no_draw_with_raise_check(ctx)
    checks = [(outs.add_value(v, False), check) for v, check in ctx.checks]
    graph = ctx.builder.build(outs.values)
    if not any(outs.requires_grad):  # Note [Clones under grad] (spec/autograd.md)
        graph = fold_clone_copies(graph, ctx.clone_copies)
    snapshot = _written_input_sources(graph, writeback)
    captured = graph  # before any pass: the joint graph differentiates the captured ops
    frozen = None
    if options["freeze"]:  # before decompose: it folds the batch_norm composite
        from refcomp.freeze import freeze_entry

        frozen = freeze_entry(ctx, graph, guard_list, backend_name)
        graph, guard_list = frozen.graph, guard_list + frozen.guards
    notes = list(frozen.notes) if frozen is not None else []
    notes += outs.notes
    if not backend_name:  # compile(backend=None): pick by the graph's device
        devices = {v.type.device for v in graph.inputs} or {"cpu"}
        backend_name = default_backend(sorted(devices)[0])
    backend = get_backend(backend_name)
    needs_grad = any(outs.requires_grad)
    joint = None
    if needs_grad and not backend.differentiable:
        with stage("autodiff"):
            joint, refusal = _joint_or_reason(ctx, captured, outs, writeback, grad_written,
                                              frozen)
        if joint is None:
            notes.append(f"[{OP_BY_OP_AUTOGRAD}] autograd: outputs require grad and {refusal},"
                         f" so this graph runs on 'eager' (autograd records op by op)")
            COUNTERS["op_by_op_graphs"] += 1
            backend = get_backend("eager")
    passes = optimize_passes(options["passes"], all_passes(),
                             op_by_op_autograd=needs_grad and backend.differentiable)
    print_ir = logs.graph_captured(graph)  # REFCOMP_LOGS=ir: after capture, after each pass
    if passes:
        from ir.passes.manager import run_pipeline

        with stage("passes"):
            graph = run_pipeline(graph, passes, **print_ir)
    backend_options = dict(options["backend_options"])
    pinned = pinned_contiguous(guard_list, ctx.input_sources)
    if backend.inputs_guarded:  # the guards vouch: See Note [Guarded inputs]
        plan = frozen.plan if frozen is not None else [("in", i) for i in range(len(pinned))]
        backend_options["inputs_guarded"] = tuple(
            pinned[x] if kind == "in" else x.is_contiguous() for kind, x in plan)
    if joint is None and frozen is None and not checks and "writes_back" in backend.options:
        # Note [Inputs written in place] (codegen/runtime.py): the NO_ALIASING guard
        # vouches that each such input shares its storage with no other input.  Not in a
        # graph with runtime checks: a check fires after the kernels ran, and eager
        # never made the write (Note [Runtime checks]).
        backend_options["writes_back"] = tuple((i, o) for i, o in writeback
                                               if i not in grad_written)
    training = None
    if joint is not None:
        fn, training, graph = _compile_training(joint, backend, backend_options, passes,
                                                outs, print_ir)
        notes.append(f"autograd: compiled forward and backward (saves {training.saved}"
                     f" tensors, {training.saved_bytes} bytes; recomputes"
                     f" {training.recomputed} ops in the backward)")
    else:
        fn = backend.compile_graph(graph, backend_options)
    logs.output_code(fn)
    n_inputs = len(ctx.input_sources)
    if frozen is not None and frozen.plan != [("in", i) for i in range(n_inputs)]:
        fn = frozen.wrap(fn, n_inputs)  # drops frozen inputs, feeds the tensors it computed
    if torch.is_autocast_enabled("cpu"):  # casts are IR nodes: Note [Autocast policy]
        fn = _without_autocast(fn)
    if joint is None and not backend.differentiable and torch.is_grad_enabled() and \
            any(getattr(v, "requires_grad", False) for v in ctx.input_vars.values()):
        # No output needs grad, but an input requires it: the backend's ATen calls with
        # out= (matmul) would raise "functions with out=... arguments don't support
        # automatic differentiation" (corpus grad_dead_matmul_of_input_requiring_grad).
        fn = _without_grad(fn)
    guards = make_guard_set(ctx, guard_list, list(ctx.input_sources))
    input_keys = _input_keys(ctx, graph, frozen)
    version_plan = {}
    if needs_grad and frozen is None:  # Note [Saved by eager] (ir/ops/registry.py)
        version_plan = eager_version_plan(captured, _wants_grad(ctx), dict(
            (o, i) for i, o in writeback), _unsure_outputs(captured, outs.keys,
                                                           ctx.copy_aliases),
            ctx.eager_saves, grad_written)
    # Note [Tensors the Function holds] (refcomp/aliasing.py): an output that shares a
    # tensor the compiled backward reads, where eager's is not one its backward saved.
    held_from = len(outs.keys) if training is not None else None
    eager_held = frozenset(o for _, saved_outs in version_plan.values() for o in saved_outs)
    fresh = outputs_to_copy(graph, outs.keys, input_keys, held_from, eager_held)
    # Outputs eager does not attach to autograd: every one a differentiable backend
    # returns, and on any backend a copy of a graph input (`x.detach().clone()` folds to
    # the input's value, and the copy of an input that requires grad would record
    # autograd: corpus grad_detached_clone_of_input_requires_grad_llvm).
    detach = frozenset(i for i, rg in enumerate(outs.requires_grad)
                       if not rg and joint is None and (backend.differentiable or i in fresh))
    rewrap = outputs_to_rewrap(graph, outs.keys, input_keys)
    # Inputs the guards pin contiguous need no contiguity pass at run time.
    contiguous = backend.name not in ("eager", "interp") and not all(pinned)
    keep_layout = _read_in_named_layouts(graph, frozen) if contiguous else frozenset()
    # Note [Output layout]: a backend of ATen ops may follow an operand's memory order,
    # and any backend may hand back a view of an intermediate where eager's is fresh.
    row_major = outs.row_major - fresh
    if backend.row_major and row_major:
        row_major &= outputs_maybe_views(graph) | _outputs_of_aten_calls(graph)
    row_major = tuple(sorted(row_major))
    fixes = output_fixes(checks=checks, fresh=fresh, fresh_row_major=fresh & outs.row_major,
                         layouts=outs.layouts, row_major=row_major, rewrap=rewrap,
                         writeback=writeback, detach=detach)
    entry = Entry(guards, graph, fn, spec, fixes, contiguous=contiguous,
                  keep_layout=keep_layout, backend=backend.name,
                  notes=notes, views=outs.views, training=training,
                  version_plan=version_plan, grad_written=frozenset(grad_written),
                  snapshot=snapshot)
    if spec[0] == "out" and not (fixes or contiguous or version_plan or grad_written):
        entry.lone = spec[1]
    entry.compile_time_s = time.perf_counter() - start
    return entry


def _written_input_sources(graph: Graph, writeback) -> frozenset:
    """Note [Write-back sources]: the write-back outputs that are the old value of another
    input written back (or a view of it): the backend hands back that input's tensor
    (or its view), which an earlier write-back may already have changed."""
    views = views_in(graph)
    written = {graph.inputs[i]: i for i, _ in writeback}
    out = set()
    for i, o in writeback:
        v = graph.outputs[o]
        while v in views:
            v = views[v]
        if written.get(v, i) != i:
            out.add(o)
    return frozenset(out)


def _without_autocast(fn):
    def run(*inputs):
        with global_state.autocast_off():
            return fn(*inputs)
    run.__wrapped__ = fn  # the backend's function (its `compiled`) for inspect.unwrap
    return run


def _without_grad(fn):
    def run(*inputs):
        with torch.no_grad():
            return fn(*inputs)
    run.__wrapped__ = fn
    return run


def _outputs_of_aten_calls(graph: Graph) -> frozenset:
    """Output indices that are an `aten` node's results: ATen's tensors, in the layout its
    kernel picks, not a row-major kernel buffer, on every backend (Note [Output layout]:
    `x.argsort(1).contiguous()` of a permuted `x` folds to the argsort, whose result is
    permuted: corpus sort_indices_contiguous_strides_llvm)."""
    made_by_aten = {v for n in graph.nodes if n.op.name == "aten" for v in n.outputs}
    return frozenset(i for i, v in enumerate(graph.outputs) if v in made_by_aten)


def _read_in_named_layouts(graph: Graph, frozen) -> frozenset:
    """Entry inputs that only `aten` calls read, each in a layout the call names (its
    runner lays it out so itself): the contiguity pass would copy them for nothing, and
    the kernel backends copy an unguarded input before any kernel reads it (Note
    [Guarded inputs], codegen/runtime.py).  A channels_last input of a frozen
    convolution (Note [Channels-last convolutions], refcomp/freeze.py)."""
    named, other = set(), set()
    for node in graph.nodes:
        laid = parse_layouts(node.attrs.get("layouts") or "") if node.op.name == "aten" else {}
        for j, v in enumerate(node.inputs):
            (named if j in laid else other).add(v)
    other.update(graph.outputs)
    plan = frozen.plan if frozen is not None else [("in", i) for i in range(len(graph.inputs))]
    return frozenset(x for v, (kind, x) in zip(graph.inputs, plan)
                     if kind == "in" and v in named and v not in other)


def _input_keys(ctx: TraceContext, graph: Graph, frozen) -> list:
    """Eager's alias identity of each graph input (a frozen constant: its own)."""
    by_source = [ctx.input_vars[src.name()].alias if src.name() in ctx.input_vars
                 else object() for src in ctx.input_sources]
    if frozen is None:
        return by_source
    return [by_source[x] if kind == "in" else object() for kind, x in frozen.plan]


def _unsure_outputs(graph: Graph, keys: list, copies=frozenset()) -> set:
    """Outputs that may not be the tensor an op made in eager: the IR folds a clone into
    its operand, so `x.clone()` is the graph input x, and `y.clone()` beside `y` is one
    value at two outputs of different alias identity (Note [Fresh outputs]).  Eager's
    version checks leave them out (Note [Saved by eager]): a clone has its own version.
    `copies`: the ids of the alias objects a folded copy made (TraceContext.copy_aliases):
    such an output is a clone, never what eager saved (corpus
    grad_write_through_narrow_of_clone_of_saved_view_false_raise); where one value's
    outputs have exactly one other key, that one is the op's own tensor and stays
    checked (`y` beside `y.clone()`, then `y.abs_()` after the graph: corpus
    grad_clone_beside_saved_result_at_break_missed_raise)."""
    inputs = set(graph.inputs)
    keys_of: dict = {}
    for v, key in zip(graph.outputs, keys):
        if key is not None:
            keys_of.setdefault(v, set()).add(id(key))

    def sure(v, key) -> bool:
        if key is not None and id(key) in copies:  # a clone: its own version counter
            return False
        ids = keys_of.get(v, set())
        if len(ids) <= 1:
            return True
        own = ids - set(copies)
        return key is not None and own == {id(key)}
    return {o for o, (v, key) in enumerate(zip(graph.outputs, keys))
            if v in inputs or not sure(v, key)}


def _wants_grad(ctx) -> list:
    """Per graph input, whether it requires grad.  An input that is no tensor argument
    (the [n, 0] binding of an int symbol, Note [Number symbols]) never does."""
    return [src.name() in ctx.input_vars and ctx.input_vars[src.name()].requires_grad
            for src in ctx.input_sources]


def _joint_or_reason(ctx, captured: Graph, outs: _Outputs, writeback, grad_written, frozen):
    """(Joint, None) when the graph's gradients can be compiled, else (None, why)."""
    from ir.autodiff import NotDifferentiable, differentiable_values, joint

    if frozen is not None:
        return None, "the graph is frozen"
    wants = _wants_grad(ctx)
    diff = differentiable_values(captured, wants)
    for i, o in writeback:
        # A value that requires grad written into an input is a Function output that
        # requires grad, copied in with grad on (Note [In-place on a graph input under
        # grad]).  Values eager updates without autograd (batch norm's running
        # statistics, ctx.grad_free) are plain non-differentiable outputs.
        value = captured.outputs[o]
        if value in diff and value not in ctx.grad_free and i not in grad_written:
            return None, "an input is mutated with a value that requires grad"
    grad_outputs = [i for i, rg in enumerate(outs.requires_grad) if rg]
    # ATen's copies of matmul operands as IR values, so the partitioner can save them
    # (Note [Copies]); every value of `captured` stays as it is.
    # Complex values as float pairs first: gradients follow torch's convention for complex
    # ones through the views (ir/passes/complex_lowering.py).
    captured = run_pipeline(captured, ["lower_complex", "materialize"])
    try:
        return joint(captured, wants, grad_outputs, ctx.checkpointed), None
    except NotDifferentiable as e:
        return None, f"{e} (ir/ops)"
    except NotImplementedError as e:
        return None, str(e)


def _compile_training(j, backend, backend_options, passes, outs: _Outputs, print_ir):
    """Both halves through the pipeline and the backend; the backward lazily."""
    from refcomp.autograd import TrainingRecord, compile_joint

    def optimize(graph: Graph, printing: dict) -> Graph:
        if not passes:
            return graph
        from ir.passes.manager import run_pipeline

        with stage("passes"):
            return run_pipeline(graph, passes, **printing)

    record = TrainingRecord(forward_ops=len(j.forward.nodes), backward_ops=len(j.backward.nodes),
                            saved=j.n_saved, saved_bytes=j.saved_bytes(),
                            recomputed=j.recomputed, backward_graph=j.backward)

    def compile_forward(graph):
        graph = optimize(graph, print_ir)
        record.forward_graph = graph
        fn = backend.compile_graph(graph, backend_options)
        record.forward_kernels = _kernel_count(fn)
        return fn

    def compile_backward(graph, primary=True):
        # primary: the backward of every output's gradient (Note [Given gradients],
        # spec/autograd.md), the one stats() and explain() report.
        with collecting() as times, gc_paused():
            fn = _compile_backward(graph, primary)
        if primary:
            record.backward_stage_times = times
        return fn

    def _compile_backward(graph, primary):
        graph = optimize(graph, logs.graph_captured(graph))
        graph = run_pipeline(graph, ["materialize"])  # a gradient two matmuls read: one copy
        options = {k: v for k, v in backend_options.items() if k != "inputs_guarded"}
        fn = backend.compile_graph(graph, options)
        if primary:
            record.backward_graph = graph
            record.backward_kernels = _kernel_count(fn)
        return fn

    fn = compile_joint(j, compile_forward, compile_backward, outs.requires_grad, record)
    return fn, record, record.forward_graph


def _kernel_count(fn) -> int:
    """Kernels of a backend's compiled function (0 where it has none, or sizes are dynamic
    and nothing ran yet)."""
    compiled = getattr(fn, "compiled", None)
    return len(getattr(compiled, "kernels", ()) or ())


def fallback_entry(ctx: TraceContext, reason: Unsupported, guard_list: list) -> Entry:
    """An entry that runs the frame eagerly: the trace up to `reason` used only these facts."""
    return Entry(make_guard_set(ctx, guard_list, []), reason=reason)


def make_guard_set(ctx: TraceContext, guard_list: list, input_sources: list) -> GuardSet:
    examples = [ctx.examples[g.source.name()] for g in guard_list if g.kind == "TENSOR_MATCH"]
    return GuardSet(guard_list, input_sources, examples=examples)


def is_constant(value) -> bool:
    return isinstance(value, CONSTANT_TYPES)
