"""Tracing a torch call the table has no rule for into one opaque `aten` node.

Owns: `call_opaque` (the tracer's treatment of a C-implemented torch callable without
an IR rule, or whose entry refused these arguments) and the refusals that keep it
correct.  The node's format and runner: ir/ops/opaque.py and codegen/opaque.py.
Spec: spec/tracer.md, "Opaque torch calls" (what the meta run on fresh copies of the
operands decides: writes, views, refusals; symbolic sizes: Note [Opaque calls over
symbolic sizes], refcomp/tracer/symbolic_meta.py).
"""

from __future__ import annotations

import torch

from codegen.opaque import OpaqueArgsError, callable_name, encode_args, flatten_results
from ir.ops.opaque import ATEN, format_results
from ir.types import TensorType
from refcomp.reasons import (
    COMPLEX_UNSUPPORTED,
    INEXPRESSIBLE_OP,
    INPLACE_ON_ALIAS,
    TENSOR_TO_PYTHON,
    UNSUPPORTED_CALL,
    Unsupported,
)
from refcomp.tracer import autocast, eager_layout, mutation, symbolic_meta
from refcomp.tracer.context import ir_device, ir_dtype, meta_device
from refcomp.tracer.torch_table import (
    is_symbolic_shape,
    new_tensor,
    refuse_inference_under_grad,
    refuse_self_overlap,
    specialize_sizes,
)
from refcomp.tracer.values import VT, ConstVar, ListVar, TensorVar, TupleVar, as_python

# Calls whose effect reaches beyond their operands and result (global state, hooks,
# storage): never run on meta tensors, never captured.  Matched on the last name part.
DENY = frozenset({
    "manual_seed", "seed", "set_rng_state", "get_rng_state", "set_default_dtype",
    "set_default_tensor_type", "set_num_threads", "set_printoptions", "backward",
    "register_hook", "retain_grad", "requires_grad_", "share_memory_", "set_",
    "record_stream", "untyped_storage", "storage", "data_ptr", "pin_memory", "_assert_async",
    "resize_", "resize_as_", "detach_", "numpy", "tolist", "item", "__reduce_ex__",
    "__setstate__", "apply_", "map_", "map2_", "copy_", "to_sparse", "to_mkldnn",
    "use_deterministic_algorithms", "set_flush_denormal", "_set_grad_enabled",
    "_make_subclass", "as_subclass", "new_tensor", "tensor", "as_tensor", "from_numpy",
    "frombuffer", "asarray", "sparse_coo_tensor", "sparse_csr_tensor",
})
# Factory functions: no tensor operand, a `device=` argument (run on meta while typing).
FACTORIES = frozenset({
    "zeros", "ones", "full", "empty", "arange", "linspace", "logspace", "eye",
    "empty_strided", "tril_indices", "triu_indices", "scalar_tensor", "range",
    "kaiser_window", "hann_window", "hamming_window", "bartlett_window", "blackman_window",
})


# Note [Typed on zeros]: ops with no meta kernel in torch 2.13 whose result shapes depend
# only on the operands' shapes and the constant arguments, never on values (checked by
# their definitions: cov/corrcoef [n, n] or [], geqrf (a's shape, [min(m, n)]),
# combinations C(n, r) rows, histogram/histogramdd: the bins argument's count; ctc_loss:
# [N] or [] by its reduction, the lengths' values only index the input).  They are
# typed by running them on zero-filled CPU tensors of the operands' shapes, strides and
# dtypes -- what FakeTensor's fallback kernel does for such ops -- and the node runs the
# real call on the real data at run time.  One that raises on zeros (cov's weights must
# not sum to zero) is typed on ones; one that raises on both breaks.
SHAPE_ONLY = frozenset({"cov", "corrcoef", "geqrf", "combinations", "histogram", "histogramdd",
                        "ctc_loss"})


def _shape_only(short: str, pkwargs: dict) -> bool:
    """Whether the call's result shapes depend on no value (Note [Typed on zeros]).
    linalg.lstsq's do with the drivers gelsy (CPU's default: residuals always empty) and
    gels (always computed for m > n); gelsd and gelss compute them by the matrix's rank."""
    if short == "linalg_lstsq":
        return pkwargs.get("driver") in (None, "gelsy", "gels")
    return short in SHAPE_ONLY


def _typed_on_zeros(ctx, name, fn, pargs, pkwargs, operands, index):
    """The call's results as meta tensors, from a run on zeros, else on ones (Note [Typed
    on zeros])."""
    for fill in (0, 1):
        zeros = []
        for tv in operands:
            m = tv.meta
            z = torch.empty_strided(tuple(m.shape), tuple(m.stride()), dtype=m.dtype).fill_(fill)
            zeros.append(z.requires_grad_(m.requires_grad) if m.requires_grad else z)
        versions = [z._version for z in zeros]
        try:
            with torch.set_grad_enabled(ctx.grad_enabled):
                out = fn(*_substitute(pargs, zeros, index),
                         **_substitute(pkwargs, zeros, index))
            break
        except Exception as err:
            if fill:
                raise Unsupported(UNSUPPORTED_CALL, f"{name} has no meta kernel and raises"
                                  f" on zeros and on ones: {type(err).__name__}") from None

    def meta(r):
        if isinstance(r, (tuple, list)):
            return type(r)(meta(i) for i in r) if type(r) in (tuple, list) else \
                type(r)([meta(i) for i in r])
        if not isinstance(r, torch.Tensor):
            return r
        if any(torch._C._is_alias_of(r, z) for z in zeros):
            raise Unsupported(UNSUPPORTED_CALL, f"{name} (no meta kernel) returns a view")
        m = torch.empty_strided(tuple(r.shape), tuple(r.stride()), dtype=r.dtype,
                                device="meta")
        return m.requires_grad_(True) if r.requires_grad else m
    if [z._version for z in zeros] != versions:
        raise Unsupported(UNSUPPORTED_CALL, f"{name} (no meta kernel) writes an operand")
    return meta(out)


_OPTIONAL_TENSOR = torch._C.OptionalType(torch._C.TensorType.get())


def _schema_writes(fn, short, pargs, pkwargs, index) -> set:
    """Operand indices an aten schema marks written (`Tensor(a!) running_mean`) among the
    non-out arguments: meta kernels do not bump those tensors' versions, so the meta run
    alone misses them (`_native_batch_norm_legit`, `_batch_norm_with_update`).  Any
    overload's annotation counts (which overload torch picks is not known here)."""
    if isinstance(fn, torch._ops.OpOverload):
        schemas = [fn._schema]
    else:
        packet = fn if isinstance(fn, torch._ops.OpOverloadPacket) else getattr(
            torch.ops.aten, short, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            return set()
        schemas = [getattr(packet, o)._schema for o in packet.overloads()]
    out = set()
    if short == "native_batch_norm":  # writes its running stats in training, unannotated
        training = pargs[5] if len(pargs) > 5 else pkwargs.get("training")
        for pos, key in ((3, "running_mean"), (4, "running_var")):
            value = pargs[pos] if pos < len(pargs) else pkwargs.get(key)
            if training is True and isinstance(value, TensorVar) and id(value) in index:
                out.add(index[id(value)])
    for schema in schemas:
        for pos, arg in enumerate(schema.arguments):
            if arg.kwarg_only or arg.alias_info is None or not arg.alias_info.is_write:
                continue
            if not arg.type.isSubtypeOf(_OPTIONAL_TENSOR):
                # TorchScript's list sorts (`aten::sort.Tensor(Tensor(a!)[] self)`) write
                # a list, not the tensor `Tensor.sort` takes (test_sort_writes_nothing)
                continue
            value = pargs[pos] if pos < len(pargs) else pkwargs.get(arg.name)
            if isinstance(value, TensorVar) and id(value) in index:
                out.add(index[id(value)])
    return out


def opaque_name(fn):
    """The dotted name of `fn` if it is a C-implemented torch callable, else None."""
    if not callable(fn) or isinstance(fn, type):
        return None
    builtin = type(fn).__name__ in ("builtin_function_or_method", "method_descriptor",
                                    "OpOverload", "OpOverloadPacket")
    if not builtin:
        return None
    return callable_name(fn)


def _draws_random(fn, short: str) -> bool:
    """Does the aten op behind `fn` draw random numbers (schema tag
    `nondeterministic_seeded` on any overload)?  The Python name of a C-implemented torch
    callable is its aten name (`torch._C._nn.rrelu_with_noise` -> `aten.rrelu_with_noise`).
    Not a dispatch-mode recording of the meta run: entering a TorchDispatchMode imports
    torch._dynamo (seconds, once per process)."""
    tag = torch.Tag.nondeterministic_seeded
    if isinstance(fn, torch._ops.OpOverload):
        return tag in fn.tags
    packet = fn if isinstance(fn, torch._ops.OpOverloadPacket) else getattr(
        torch.ops.aten, short, None)
    if packet is None:
        return False
    return any(tag in getattr(packet, o).tags for o in packet.overloads())


# Ops tagged random that draw nothing for some arguments: name -> [(position, keyword,
# the value that means "no draw", default)]; no draw when any of them holds.
_DRAWS_ONLY_IF = {
    "scaled_dot_product_attention": [(4, "dropout_p", 0.0, 0.0)],
    "dropout": [(1, "p", 0.0, None), (2, "train", False, None)],
    "feature_dropout": [(1, "p", 0.0, None), (2, "train", False, None)],
    "alpha_dropout": [(1, "p", 0.0, None), (2, "train", False, None)],
    "feature_alpha_dropout": [(1, "p", 0.0, None), (2, "train", False, None)],
    "native_dropout": [(1, "p", 0.0, None), (2, "train", False, None)],
}


def _rnn_no_draw(args, kwargs) -> bool:
    """torch.lstm/gru/rnn_*: dropout between layers draws only with dropout > 0 in
    training.  Unpacked form: (input, hx, params, has_biases, num_layers, dropout, train,
    ...); packed: (data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
    ...) -- told apart by has_biases (a bool) at position 3."""
    if kwargs or len(args) < 8:
        return False
    at = 5 if isinstance(args[3], bool) else 6
    dropout, train = args[at], args[at + 1]
    return type(dropout) in (int, float) and type(train) is bool and (
        dropout == 0 or not train)


def _no_draw(short, args, kwargs) -> bool:
    if short in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
        return _rnn_no_draw(args, kwargs)
    for pos, key, quiet, default in _DRAWS_ONLY_IF.get(short, ()):
        value = args[pos] if len(args) > pos else kwargs.get(key, default)
        if type(value) in (int, float, bool) and value == quiet:
            return True
    return False


# Ops whose CPU kernel returns a 4-d (5-d) result channels_last (channels_last_3d) when
# their first operand suggests that format, where torch's meta kernel says row-major
# (roll: empty_like with the suggested format; group_norm, channel_shuffle, max_unpool2d
# likewise): the result's meta takes eager's layout, so Note [Output layout] restrides to
# it (corpus channels_last_roll_group_norm, channels_last_unpool_channel_shuffle,
# channels_last_3d_roll_group_norm).  Convolutions:
# eager_layout.conv_strides (corpus channels_last_conv_transpose); replication and
# reflection pads: eager_layout.suggested_format_strides (the 3-d pads' meta kernels say
# row-major).
CHANNELS_LAST = frozenset({"roll", "group_norm", "channel_shuffle", "native_channel_shuffle",
                           "max_unpool2d"})


# Ops that address their first operand's storage by explicit sizes, strides and offset
# (the position of their `size` argument).  The graph hands an opaque node its operands as
# its own tensors (row-major buffers, views of them, or fresh copies: it depends on the
# backend), not eager's, so such a call is exact only where all address the same
# elements: the operand is contiguous in eager (its meta says so), the offset is its own
# (none given, or 0 where its meta's is 0 -- as_strided_scatter's counts from the storage's
# start too: ATen clones its operand with its storage offset, corpus
# as_strided_scatter_offset_of_view_interp) and the addressed elements lie within it.
# Anything else (`torch.as_strided(x.t(), ...)`, an offset into a view's storage) runs at
# a break, on eager's tensors (corpus as_strided_of_transposed_storage).
STORAGE_READERS = {"as_strided": 1, "as_strided_copy": 1, "as_strided_scatter": 2}


def _check_storage_read(ctx, name, short, pargs, pkwargs):
    at = STORAGE_READERS[short]
    x = pargs[0] if pargs else pkwargs.get("input", pkwargs.get("self"))
    size, stride, offset = (pargs[at + k] if at + k < len(pargs) else pkwargs.get(key)
                            for k, key in enumerate(("size", "stride", "storage_offset")))
    m = x.meta if isinstance(x, TensorVar) else None
    exact = m is not None and m.is_contiguous() and isinstance(size, (tuple, list)) and \
        isinstance(stride, (tuple, list)) and len(size) == len(stride) and \
        all(isinstance(n, int) for n in (*size, *stride)) and (
            offset is None or offset == 0 and m.storage_offset() == 0)
    if exact and 0 not in size:
        exact = sum((n - 1) * st for n, st in zip(size, stride)) < m.numel()
    if not exact:
        raise Unsupported(INEXPRESSIBLE_OP,
                          f"{name} addresses its operand's storage, which the graph"
                                   " does not hold as eager does (an operand not contiguous,"
                                   " an offset of its own, or elements beyond it)")
    if offset is not None:
        _guard_input_offsets(ctx, name, x)


def _guard_input_offsets(ctx, name, x):
    """Note [Input storage offsets]: a graph input's meta has storage offset 0, and
    TENSOR_MATCH does not check the caller's (an input may be any view).  Only an
    explicit storage offset reads it: `as_strided(x, size, stride, 0)` counts from the
    start of x's storage, which is x's first element only where x's offset is 0 (a
    backend may hand ATen a fresh copy of x: `interp`).  So a storage reader with an
    explicit offset into the storage of a graph input (the input itself or a view of it
    made in the frame: the same alias) guards each such input's storage offset == 0, and
    runs at a break where one is not 0 (corpus as_strided_offset_of_offset_input_interp).
    An offset left out is the operand's own on every backend: no guard."""
    for source_name, tv in ctx.input_vars.items():
        if tv.alias is not x.alias:
            continue
        where = ctx.examples[source_name].storage_offset()
        if where:
            raise Unsupported(INEXPRESSIBLE_OP, f"{name} counts an explicit storage offset from the"
                                       f" start of {source_name}'s storage, which {source_name}"
                                       f" starts at offset {where} (the graph may hold a copy)")
        ctx.guard_fact(tv.source, torch.Tensor.storage_offset, "{}.storage_offset()", 0)


def _channels_last_3d_conv(pargs, pkwargs) -> bool:
    """Does a 3-d convolution's input (unsqueezed to a batch of one without a batch dim) or
    weight suggest channels_last_3d?  ATen's CPU result then follows that format when it
    runs mkldnn and not when it runs slow3d, which it picks by sizes, groups and the
    thread count; torch's meta kernel says row-major.  Such a call runs at a break
    (corpus conv3d_channels_last_3d_strides).  Otherwise both kernels write row-major."""
    x, weight = (pargs[i] if i < len(pargs) else pkwargs.get(key)
                 for i, key in enumerate(("input", "weight")))
    if not (isinstance(x, TensorVar) and isinstance(weight, TensorVar)):
        return False
    xm = x.meta.unsqueeze(0) if x.meta.dim() == 4 else x.meta
    return any(eager_layout.suggest_memory_format(m) == torch.channels_last_3d
               for m in (xm, weight.meta))


def _rolls_every_dim(x, pargs, pkwargs) -> bool:
    """Whether roll(x, shifts, dims) moves every dim it names: ATen rolls one dim at a
    time and returns a Contiguous clone for a shift that is a multiple of the size (and
    flattens when no dim is named), which makes the rest row-major."""
    shifts = pargs[1] if len(pargs) > 1 else pkwargs.get("shifts")
    dims = pargs[2] if len(pargs) > 2 else pkwargs.get("dims")
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    shape = x.meta.shape
    return len(shifts) == len(dims) and all(
        isinstance(s, int) and isinstance(d, int) and shape[d] and s % shape[d]
        for s, d in zip(shifts, dims))


def _symbolic_shapes(ctx, fn, name, pargs, pkwargs, operands, index, results, symbolic,
                     writes_or_views):
    """The results' shapes over the operands' symbolic sizes (Note [Opaque calls over
    symbolic sizes], refcomp/tracer/symbolic_meta.py); None once the sizes are specialized
    (guarded).  A size only automatic dynamic made symbolic changed once and will again (a
    KV cache grows by a token per decoding step): where it cannot be typed, the call runs
    at a break instead, and the size stays symbolic around it."""
    shapes = None if writes_or_views else symbolic_meta.symbolic_result_shapes(
        ctx, fn, lambda fakes: (_substitute(pargs, fakes, index),
                                _substitute(pkwargs, fakes, index)), operands, results)
    if shapes is not None:
        return shapes
    for d in symbolic:
        if d.free_symbols & ctx.automatic_symbols:
            raise Unsupported(INEXPRESSIBLE_OP, f"{name} of a tensor whose size changes between"
                                       " calls (its result's size could not be typed over"
                                       " symbolic sizes)")
        ctx.notes.append(f"dynamic: {d} is specialised to {ctx.specialize(d)}: {name}"
                         " could not be typed over symbolic sizes")
    return None


def _layout_text(tv: TensorVar) -> str:
    """An operand's `layouts` entry: eager's strides where they are not row-major, as
    numbers, or, for a dense operand with symbolic sizes, its dims' memory order."""
    strides = eager_layout.operand_strides(tv.meta)
    if strides is None:
        return ""
    order = eager_layout.memory_order(tv.meta)
    if order is not None and is_symbolic_shape(tv.value.type.shape):
        return "order=" + ",".join(map(str, order))
    return ",".join(map(str, strides))


def call_opaque(ctx, fn, args: list, kwargs: dict, name: str | None = None) -> VT:
    """Trace `fn(*args, **kwargs)` as one `aten` node, or raise Unsupported (a break)."""
    name = name or opaque_name(fn)
    if name is None:
        raise Unsupported(UNSUPPORTED_CALL,
                          f"{getattr(fn, '__qualname__', fn)!r} cannot be named for"
                                   " an opaque call")
    # the op's name, which the rules below are keyed by: an OpOverload's is its packet's
    # (`torch.ops.aten.copysign.Tensor` is `copysign`, not `Tensor`)
    short = fn._opname if isinstance(fn, torch._ops.OpOverload) else name.rsplit(".", 1)[-1]
    if short in DENY or short.startswith("_foreach") and short.endswith("_"):
        raise Unsupported(UNSUPPORTED_CALL, f"{name} changes state beyond its operands (deny list)")
    try:
        pargs = [as_python(a, keep_tensors=True) for a in args]
        pkwargs = {k: as_python(v, keep_tensors=True) for k, v in kwargs.items()}
    except TypeError:
        raise Unsupported(INEXPRESSIBLE_OP, f"{name}: an argument is not a tensor or a constant")\
            from None
    pargs, pkwargs = specialize_sizes(ctx, pargs), specialize_sizes(ctx, pkwargs)
    if pkwargs.get("generator") is not None:
        raise Unsupported(UNSUPPORTED_CALL, f"{name} draws from a generator object; the graph draws"
                                   " only from torch's default generator")
    if not short.endswith("_") and "out" not in pkwargs:  # Note [Autocast policy]
        pargs, pkwargs = autocast.cast_operands(ctx, fn, name, pargs, pkwargs, new_tensor)
    operands: list[TensorVar] = []
    _collect(pargs, operands)
    _collect(pkwargs, operands)
    refuse_inference_under_grad(ctx, operands, name)
    factory = not operands
    if factory and short not in FACTORIES and not _draws_random(fn, short):
        raise Unsupported(UNSUPPORTED_CALL, f"{name} takes no tensor and is not a known factory")
    symbolic = [d for tv in operands for d in tv.value.type.shape
                if not isinstance(d, int) and getattr(d, "free_symbols", None)]
    if short in STORAGE_READERS:
        _check_storage_read(ctx, name, short, pargs, pkwargs)
    if short in ("conv3d", "conv_transpose3d") and _channels_last_3d_conv(pargs, pkwargs):
        raise Unsupported(INEXPRESSIBLE_OP,
                          f"{name} of a channels_last_3d operand: ATen's result is"
                                   " channels_last_3d or row-major by the kernel it picks"
                                   " (mkldnn or slow3d: by sizes and thread count)")
    index = {id(tv): i for i, tv in enumerate(operands)}
    try:
        text = encode_args(pargs, pkwargs,
                           lambda v: index.get(id(v)) if isinstance(v, TensorVar) else None)
    except OpaqueArgsError as e:
        raise Unsupported(INEXPRESSIBLE_OP, f"{name}: {e}") from None

    # The meta run, on fresh copies of the operands.
    metas = [_fresh_meta(tv.meta) for tv in operands]
    before = [_facts(m) for m in metas]
    versions = [m._version for m in metas]
    margs = _substitute(pargs, metas, index)
    mkwargs = _substitute(pkwargs, metas, index)
    if factory:
        device = mkwargs.get("device")
        mkwargs["device"] = "meta"
    # Note [Random stream in program order] (refcomp/tracer/rng.py): drawn by ATen at run
    # time from the default generator, in program order.
    draws = _draws_random(fn, short) and not _no_draw(short, pargs, pkwargs)
    try:
        with torch.set_grad_enabled(ctx.grad_enabled), \
                meta_device(operands, device if factory else None):
            out = fn(*margs, **mkwargs)
    except Unsupported:
        raise
    except NotImplementedError as err:
        if not _shape_only(short, pkwargs) or factory:
            detail = str(err).split("\n")[0][:160]
            raise Unsupported(UNSUPPORTED_CALL, f"{name} cannot be typed on meta tensors (no meta"
                                       f" kernel, or an output shape that depends on data):"
                                       f" NotImplementedError: {detail}") from None
        out = _typed_on_zeros(ctx, name, fn, pargs, pkwargs, operands, index)
    except Exception as err:
        detail = str(err).split("\n")[0][:160]
        raise Unsupported(UNSUPPORTED_CALL,
                          f"{name} cannot be typed on meta tensors (no meta kernel,"
                                   f" or an output shape that depends on data):"
                                   f" {type(err).__name__}: {detail}") from None
    mutates = []
    written = _schema_writes(fn, short, pargs, pkwargs, index)
    for i, (m, facts, version) in enumerate(zip(metas, before, versions)):
        if _facts(m) != facts:
            raise Unsupported(INPLACE_ON_ALIAS, f"{name} changes the sizes, strides, dtype or"
                                       " requires_grad of a tensor in place")
        if m._version != version or i in written:
            mutates.append(i)
    # A call that only writes its operands (x[i] = v: Tensor.__setitem__) returns None.
    # Sequences nested one level in the result (histogramdd's bin edges) are flattened,
    # as the runner flattens them (codegen/opaque.py), and rebuilt below.
    results = [] if out is None and mutates else (
        flatten_results(out) if isinstance(out, (tuple, list)) else [out])
    if not (results or mutates) or not all(isinstance(r, torch.Tensor) for r in results):
        kinds = sorted({type(r).__name__ for r in results}) or [repr(out)]
        raise Unsupported(TENSOR_TO_PYTHON, f"{name} returns {', '.join(kinds)}, not tensors")
    if short in eager_layout.BATCH_NORM_OPS and len(results) >= 3 and \
            eager_layout.batch_norm_in_eval(short, pargs, pkwargs):
        results = results[:1] + [torch.empty((0,), dtype=r.dtype, device="meta")
                                 for r in results[1:3]] + results[3:]
    for r in results:
        if r.layout != torch.strided or r.is_quantized:
            raise Unsupported(INEXPRESSIBLE_OP, f"{name} returns a {r.layout}/{r.dtype} tensor")
        if r.is_complex() and r.requires_grad:  # its gradient has no IR rule
            raise Unsupported(COMPLEX_UNSUPPORTED,
                              f"{name} returns a complex tensor that requires grad")
        ir_dtype(r.dtype)  # raises RB013 for dtypes the IR lacks
    propagations = [_check_writable(ctx, operands[i], name) for i in mutates]
    for i in mutates:  # Note [Overlapping writes] (refcomp/tracer/mutation.py)
        mutation.refuse_overlapping_operands(operands[i], operands, name)
    if len(mutates) > 1 and any(p is not None for p in propagations):
        raise Unsupported(INPLACE_ON_ALIAS, f"{name} writes several tensors, one through a view")
    # Results torch returns as (views of) an operand.
    mutated_ids = {id(metas[i]): i for i in mutates}
    views, view_base = [], {}
    for j, r in enumerate(results):
        if id(r) in mutated_ids:
            continue  # the written operand itself (x.op_(), out=): its TensorVar is returned
        for i, m in enumerate(metas):
            if torch._C._is_alias_of(r, m):
                views.append(j)
                view_base[j] = i
                break
    device = _device(ctx, name, short, operands, pkwargs, device if factory else None)
    shapes = [tuple(int(s) for s in r.shape) for r in results]
    if symbolic:
        shapes = _symbolic_shapes(ctx, fn, name, pargs, pkwargs, operands, index, results,
                                  symbolic, mutates or views) or shapes
    out_types = [TensorType(ir_dtype(r.dtype), shape, device)
                 for r, shape in zip(results, shapes)]
    out_types += [TensorType(operands[i].value.type.dtype,
                             tuple(int(s) for s in metas[i].shape), operands[i].value.type.device)
                  for i in mutates]
    attrs = {"fn": name, "args": text, "results": format_results(out_types),
             "mutates": tuple(mutates), "views": tuple(views), "rng": draws}
    # Note [Operands in eager's layout] (refcomp/tracer/eager_layout.py): ATen sees each
    # operand in eager's strides where those are not row-major
    layouts = "; ".join(f"{i}:" + layout for i, layout in
                        enumerate(_layout_text(tv) for tv in operands) if layout)
    if layouts:
        attrs["layouts"] = layouts
    overlaps = tuple(i for i, tv in enumerate(operands) if eager_layout.overlaps(tv.meta))
    if overlaps:
        attrs["overlaps"] = overlaps
    values = ctx.builder.insert(ATEN, [tv.value for tv in operands], attrs, out_types)
    values = list(values) if isinstance(values, tuple) else [values]

    from refcomp.tracer import torch_table

    # Written operands take their new values (See Note [In-place] in context.py).
    for k, i in enumerate(mutates):
        tv = operands[i]
        tv.value = values[len(results) + k]
        tv.meta = metas[i].detach()
        # requires_grad unchanged (checked above); under no_grad it may become a cut
        tv.grad_cut = mutation.autograd_of_write(ctx, tv, operands, False, None, name)[1]
        if tv.source is not None and tv.source.name() in ctx.input_vars:
            ctx.record_mutation(tv, tv)
    for propagate in propagations:
        if propagate is not None:
            propagate()
    wrapped = []
    for j, (r, v) in enumerate(zip(results, values)):
        if id(r) in mutated_ids:
            wrapped.append(operands[mutated_ids[id(r)]])
            continue
        if j in view_base:
            base = operands[view_base[j]]
            tv = torch_table.new_tensor(ctx, v, _view_meta(base.meta, r), [base] + [
                t for t in operands if t is not base], True)
            step = torch_table.view_step(
                fn, pargs, pkwargs, base, j if isinstance(out, (tuple, list)) else None)
            tv.view_root = torch_table.view_root(ctx, base, tv, step)
            wrapped.append(tv)
            continue
        meta = r.detach() if not r.requires_grad else r
        if meta.numel():  # Note [Eager's layout, not the meta kernel's]
            meta = eager_layout.restrided(
                meta, _eager_strides(short, margs, mkwargs, metas, meta, j))
        if short in CHANNELS_LAST and operands and (short != "roll" or _rolls_every_dim(
                operands[0], pargs, pkwargs)):  # eager's CPU kernel, not the meta kernel
            meta = torch_table.as_channels_last(meta, operands[:1])
        wrapped.append(torch_table.new_tensor(ctx, v, meta, operands, False))
    if out is None:
        return ConstVar(None)
    if not isinstance(out, (tuple, list)):
        return wrapped[0]
    # torch.return_types structseqs keep their class (fields .values, .indices, ...).
    items, k = [], 0
    for r in out:
        if isinstance(r, (tuple, list)):
            inner = wrapped[k:k + len(r)]
            k += len(r)
            items.append(TupleVar(inner) if isinstance(r, tuple) else ListVar(inner))
        else:
            items.append(wrapped[k])
            k += 1
    return TupleVar(items, cls=type(out) if isinstance(out, tuple) else tuple)


def _eager_strides(short, margs, mkwargs, metas, result, j):
    """The CPU kernel's strides for `result` (the call's j-th) where torch's meta kernel
    is known to differ (refcomp/tracer/eager_layout.py), else None."""
    if eager_layout.row_major_result(short) or \
            eager_layout.row_major_without_grad(short, result):
        return eager_layout.row_major(result.shape)
    if short == "__getitem__":
        return eager_layout.getitem_strides(margs[0], margs[1])
    if short in eager_layout.BATCH_NORM_OPS:  # the normalized input; not the statistics
        x, weight, bias = (margs[i] if i < len(margs) else mkwargs.get(key)
                           for i, key in enumerate(("input", "weight", "bias")))
        if j or not isinstance(x, torch.Tensor) or x.shape != result.shape:
            return None
        return eager_layout.batch_norm_strides(x, weight, bias)
    if metas and eager_layout.pads_in_suggested_format(short, margs, mkwargs):
        return eager_layout.suggested_format_strides(metas[0], result.shape)
    if short in ("conv1d", "conv_transpose1d", "conv2d", "conv_transpose2d"):
        x, weight = (margs[i] if i < len(margs) else mkwargs.get(key)
                     for i, key in enumerate(("input", "weight")))
        if isinstance(x, torch.Tensor) and isinstance(weight, torch.Tensor) and \
                weight.dim() == int(short[-2]) + 2 and \
                x.dim() in (weight.dim(), weight.dim() - 1) and result.dim() == x.dim():
            return eager_layout.conv_strides(x, weight, result.shape)
        return None
    if metas and eager_layout.pointwise_kernel(short):
        shape = tuple(result.shape)
        try:
            if tuple(torch.broadcast_shapes(shape, *(m.shape for m in metas))) != shape:
                return None
        except RuntimeError:
            return None
        return eager_layout.iterator_strides(
            shape, metas, eager_layout.common_dtype(metas, result.dtype))
    return None


def _collect(x, out: list) -> None:
    if isinstance(x, TensorVar):
        if all(x is not t for t in out):
            out.append(x)
    elif isinstance(x, (list, tuple)):
        for i in x:
            _collect(i, out)
    elif isinstance(x, dict):
        for v in x.values():
            _collect(v, out)


def _substitute(x, metas, index):
    if isinstance(x, TensorVar):
        return metas[index[id(x)]]
    if isinstance(x, (list, tuple)):
        return type(x)(_substitute(i, metas, index) for i in x)
    if isinstance(x, dict):
        return {k: _substitute(v, metas, index) for k, v in x.items()}
    return x


def _fresh_meta(m: torch.Tensor) -> torch.Tensor:
    fresh = torch.empty_strided(tuple(m.shape), tuple(m.stride()), dtype=m.dtype, device="meta")
    return fresh.requires_grad_(True) if m.requires_grad else fresh


def _facts(m: torch.Tensor) -> tuple:
    return (tuple(m.shape), tuple(m.stride()), m.storage_offset(), m.dtype, m.requires_grad)


def _view_meta(base_meta: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """The view's meta tensor made on the operand's own meta tensor (so it aliases it).

    `r` viewed a fresh copy of the operand (same strides, storage offset 0), so its
    offset is relative to the operand's own."""
    try:
        view = base_meta.as_strided(tuple(r.shape), tuple(r.stride()),
                                    base_meta.storage_offset() + r.storage_offset())
    except RuntimeError:
        return r.detach()
    if view.dtype != r.dtype:
        return r.detach()
    return view.detach().requires_grad_(r.requires_grad) if r.requires_grad else view.detach()


def _check_writable(ctx, tv: TensorVar, name: str):
    """Raise where the write cannot be traced; return the propagation to run once the
    operand has its new value when it writes through views (Note [Writes through
    views], refcomp/tracer/mutation.py), else None."""
    propagate = None
    if ctx.shares_storage_with_live(tv) or tv.is_view:
        propagate = mutation.through_views(ctx, tv, ctx.live_tensors())
        if propagate is None:
            raise Unsupported(INPLACE_ON_ALIAS, f"{name} writes a tensor that shares storage with"
                                       " another live tensor")
        if tv.alias in ctx.input_aliases and not mutation.input_base(ctx, tv):
            # an opaque write through a view of a graph input (`x.view(s).uniform_()`):
            # its views then came back fresh where eager's are the input's (corpus
            # view_of_input_after_random_fill_returned): the break stays, as before
            # Note [Writes through views of a graph input]
            raise Unsupported(INPLACE_ON_ALIAS, f"{name} writes through a view of a graph input")
    if tv.requires_grad:
        raise Unsupported(INPLACE_ON_ALIAS, f"{name} writes a tensor that requires grad")
    if ctx.saved_for_backward(tv):
        raise Unsupported(INPLACE_ON_ALIAS, f"{name} writes a tensor that an earlier op saved for"
                                   " its backward")
    refuse_self_overlap(tv, name)
    return propagate


def _device(ctx, name, short, operands, kwargs, factory_device) -> str:
    devices = {tv.value.type.device for tv in operands}
    asked = kwargs.get("device") if not operands else None
    if operands:
        asked = kwargs.get("device")
        if short in ("cpu", "cuda", "to"):
            raise Unsupported(INEXPRESSIBLE_OP, f"{name} moves tensors between devices")
    else:
        asked = factory_device
    if asked is not None:
        devices.add(ir_device(torch.device(asked)))
    if not devices:
        devices.add(ir_device(torch.device("cpu")))
    if len(devices) != 1:
        raise Unsupported(INEXPRESSIBLE_OP, f"{name} mixes devices {sorted(devices)}")
    return devices.pop()

