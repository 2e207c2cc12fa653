"""The state shared by one trace: graph builder, graph inputs, guards, mutations.

Owns: `TraceContext` and `wrap`, which turns a real Python value read from a
source into a symbolic value and installs the guards that reading it implies
(tensor facts, constant values, object identity, container lengths).  Must not
know opcodes.  Spec: spec/guards.md, "Which fact yields which guard".
"""

from __future__ import annotations

import contextlib
import enum
import re
import types
import typing
from typing import Optional

import sympy
import torch

from codegen import sizes as sz
from ir import GraphBuilder, TensorType
from ir.autodiff import EagerSaves
from ir.graph import Value
from ir.types import BY_TORCH_NAME, size_symbol
from refcomp import global_state
from refcomp import guards as G
from refcomp.reasons import (
    COMPLEX_UNSUPPORTED,
    INEXPRESSIBLE_OP,
    INPLACE_ON_ALIAS,
    NON_TENSOR_RESULT,
    UNREPLAYABLE_SIDE_EFFECT,
    Unsupported,
)
from refcomp.sources import (
    ATTR,
    BUFFER,
    MODULE,
    PARAM,
    AttrSource,
    DerivedSource,
    DictOfSource,
    IdentitySource,
    ItemSource,
    ModuleDictSource,
    ModuleSliceSource,
    NumberAsSize,
    NumberAsTensor,
    Source,
    size_text,
)
from refcomp.tracer.values import (
    VT,
    ConstVar,
    DictVar,
    DynamicFloatVar,
    ListVar,
    MethodVar,
    TensorVar,
    TupleVar,
)

# In `auto_dims`, a Python number's source maps to VALUE: automatic dynamic saw the number
# change, so its value is a size symbol (Note [Number symbols]).
VALUE = "value"
# ... and a float's source maps to FLOAT: its value is a graph input (Note [Dynamic floats],
# refcomp/tracer/dynamic_floats.py).
FLOAT = "float"
# ... or, once a trace needed its value, FLOAT_STATIC + ": " + why: static from then on.
FLOAT_STATIC = "float, static"
MARK_ATTR = "_refcomp_dynamic_dims"  # set by refcomp.mark_dynamic: dims to make symbolic
STATIC_ATTR = "_refcomp_static_dims"  # set by refcomp.mark_static: dims kept static

# Immutable values whose equality is their identity for tracing purposes.
CONSTANT_TYPES = (int, float, bool, str, type(None), complex, bytes)


def ir_dtype(dtype: torch.dtype):
    name = str(dtype).split(".")[-1]
    if name not in BY_TORCH_NAME:
        raise Unsupported(COMPLEX_UNSUPPORTED if dtype == torch.complex32 else INEXPRESSIBLE_OP,
                          f"dtype {dtype} has no IR dtype")
    return BY_TORCH_NAME[name]


def ir_device(device: torch.device) -> str:
    return device.type if device.index in (None, 0) else str(device)


@contextlib.contextmanager
def meta_device(operands, device=None):
    """Run torch's meta kernels as for the operands' device (`TensorVar`s; `device`: a
    factory's `device=`, else the default device when there are no operands).

    Note [Meta kernels and the device]: the tracer types a call by running it on meta
    tensors, and torch's Python meta kernels branch on `device_hint(t)`, which answers
    "cuda" for a plain meta tensor (only a FakeTensor knows its device).  So a CPU call
    was typed as on CUDA: embedding_bag's offset2bag is `i64[n]` there and `i64[0]` on
    the CPU fast path, and a kernel then read n elements of an empty tensor.  While the
    meta kernel runs, `device_hint` answers the operands' device type for meta tensors.
    """
    types_ = {str(t.value.type.device).split(":")[0] for t in operands}
    if not operands:
        try:
            types_ = {(torch.device(device) if device is not None
                       else torch.get_default_device()).type}
        except (TypeError, RuntimeError):  # not a device: the call itself reports it
            types_ = set()
    if len(types_) != 1 or types_ == {"cuda"}:  # mixed, or what device_hint says anyway
        yield
        return
    (kind,) = types_
    registrations = torch._meta_registrations
    real = registrations.device_hint

    def device_hint(tensor):
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "meta" and \
                not isinstance(tensor, torch._subclasses.FakeTensor):
            return kind
        return real(tensor)

    registrations.device_hint = device_hint
    try:
        yield
    finally:
        registrations.device_hint = real


def torch_dtype(d) -> torch.dtype:
    return getattr(torch, d.torch_name)


def meta_like(t: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """A meta tensor with `t`'s sizes, strides, dtype and lazy conjugate/negative bits (an
    op eager refuses on a conjugated view, such as view_as_real, refuses it here too; the
    graph's input value is the resolved one, spec/ir.md "Complex values")."""
    m = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")
    if t.is_conj():
        m = m.conj()
    if t.is_neg():
        m = m._neg_view()
    return m.requires_grad_(requires_grad) if requires_grad else m


def value_name(source) -> str:
    """A graph input's printed name from its source: L['x'] -> x, L['self'].fc.weight ->
    self.fc.weight, L['xs'][1] -> xs_1, G['w'] -> w (the printer makes repeated names
    unique)."""
    name = re.sub(r"^[LG]\[['\"](.*?)['\"]\]", r"\1", source.name())
    name = re.sub(r"\[['\"]?([^\]'\"]*)['\"]?\]", r"_\1", name)
    name = re.sub(r"[^A-Za-z0-9_.]", "_", name).strip("._")
    return name or "input"


NUMBER_SYMBOL_LIMIT = 2**59  # an int at or above it stays static: numpy holds no [n, 0] int64 array


def _below_symbol_limit(n) -> bool:
    return n < NUMBER_SYMBOL_LIMIT


class TraceContext:
    """One capture of one frame (with everything inlined into it).

    Note [Dynamic batch]: with dynamic=True, every dim of each contiguous argument
    tensor (not parameters or buffers) is a size symbol; so is any dim marked with
    `refcomp.mark_dynamic` (or `maybe_mark_dynamic`) and any dim in `auto_dims`
    (automatic dynamic: the cache saw that size change); `refcomp.mark_static` keeps a
    dim static in every mode.  Equal sizes share one symbol (duck sizing, as in torch); sizes 0
    and 1, non-contiguous tensors and module state stay static (a requested dim that
    stays static is said in `notes`).  Python code sees symbolic
    sizes (`x.shape[0]` is `s0`); a decision on one (`if x.shape[0] > 4`) is evaluated
    at the traced size and becomes a SHAPE_ENV guard, and a use the tracer cannot keep
    symbolic is specialized to the traced size, also guarded.

    Note [In-place]: an in-place op is functionalized by giving the TensorVar a new IR
    value; every holder of that TensorVar object sees the change, exactly like holders
    of one torch tensor.  A *different* tensor sharing storage (a view, or the view's
    base) would not, so an in-place op is refused (RB010) when such a tensor is still
    reachable from a running frame, or when the tensor is a view of a graph input.
    """

    def __init__(self, name: str = "forward", dynamic: bool = False, auto_dims=None,
                 static: bool = False, pinned=None):
        self.builder = GraphBuilder(name)
        # what eager's nodes save where the IR ops' `saves` differ: torch ops built from
        # several IR ops, promotion casts (Note [Saved by eager], ir/ops/registry.py)
        self.eager_saves = EagerSaves()
        # alias objects of tensors a folded copy made (`y.clone()` is y's value):
        # Note [Saved by eager] (ir/ops/registry.py), runtime._unsure_outputs
        self.copy_aliases: set = set()
        # the `copy` nodes' results a clone under grad made (Note [Clones under grad],
        # spec/autograd.md): folded when no output of the graph requires grad
        self.clone_copies: set = set()
        self._saved_so_far = None  # ir.autodiff.SavedSoFar, made by saved_for_backward
        self._module_keys_guarded: set = set()  # sources guard_module_keys has guarded
        # (source name, attribute) pairs the caller checks on every call itself, so no
        # guard is needed: OptimizedModule.forward looks up an instance `forward` of its
        # module before calling the compiled frame.
        self.checked_by_caller: set = set()
        self.dynamic = bool(dynamic)
        self.auto_dims = auto_dims or {}  # source name -> dims to make symbolic
        self.static = static  # ignore marks and auto_dims (a retry; see CompiledFunction)
        # source name -> {dim: why}: dims a trace with them symbolic failed on (Note
        # [Specialised dims] in refcomp/api.py), traced static now.
        self.pinned = pinned or {}
        self._symbol_why: dict = {}  # (source name, dim) -> (note kind, why it is symbolic)
        self.requested = False  # a marked or automatic dim became a symbol
        self.requested_explicit = False  # ... one the user asked for (not automatic)
        self.automatic_symbols: set = set()  # symbols only automatic dynamic asked for
        self.dynamic_floats: list = []  # names of the sources read as dynamic floats
        self.notes: list = []  # why a requested dim stayed static, which became symbolic
        self.sym_values: dict = {}  # size symbol -> the size seen while tracing
        self.sym_by_size: dict = {}  # size -> symbol (duck sizing: equal sizes, one symbol)
        self.sym_sources: dict = {}  # symbol -> [(source, dim)] where it was read
        self.shape_facts: list = []  # (sympy relation, its value) decided while tracing
        self.guards: dict = {}  # key -> Guard (deduplicated)
        self.input_sources: list[Source] = []
        self.input_vars: dict = {}  # source name -> TensorVar (as first read)
        self.parameter_vars: dict = {}  # id of a Parameter input -> its TensorVar
        self.objects: dict = {}  # source name -> VT (reads are cached per source)
        self.grad_enabled = torch.is_grad_enabled()
        self.mutated: dict = {}  # source name -> (source, latest TensorVar)
        # IR values eager computes without recording autograd although their operands
        # require grad (batch norm's running-statistics update): written back, never
        # differentiated (spec/autograd.md).
        self.grad_free: set = set()
        # IR values computed inside torch.utils.checkpoint regions: recomputed by the
        # compiled backward (Note [Checkpoint traced inline], refcomp/tracer/checkpoint.py).
        self.checkpointed: set = set()
        self.used_grad_toggle = False
        self.frames: list = []  # the translators now running (innermost last)
        self.input_aliases: set = set()  # alias objects of graph-input tensors
        self.examples: dict = {}  # source name -> the real tensor seen while tracing
        self.storage_alias: dict = {}  # storage data pointer -> alias object of its inputs
        self.id_objects: list = []  # objects under ID_MATCH (modules are held weakly)
        # (0-d bool IR value, message or (exception class, args)), in program order: the
        # entry raises when one is true after the graph ran (Note [Runtime checks] in
        # refcomp/runtime.py).
        self.checks: list = []
        # The node count at the first check of a raising branch (Note [Raising branches],
        # refcomp/tracer/raise_checks.py): no random draw may follow it.
        self.raise_check_at: Optional[int] = None
        # Note [Replayed side effects] (refcomp/tracer/effects.py): effects in program
        # order, and what the trace reads back after writing an attribute or a global.
        self.effects: list = []
        self.real_cells: dict = {}  # id(closure cell) -> (cell, its one CellVar)
        self.container_claims: dict = {}  # id(list/dict) -> ("read" | "mutated", name, obj)
        self.attr_writes: dict = {}  # (id(object), name) -> VT written
        self.global_writes: dict = {}  # (id(globals dict), name) -> VT written
        self.context_tokens: list = []  # ContextTokenVars of traced ContextVar.set calls
        self.context_reset_real: set = set()  # ids of ContextVars reset by a real token
        self.add_guard(G.GRAD_MODE, None, self.grad_enabled)
        self.entry_grad_enabled = self.grad_enabled  # Note [Raising branches]
        self.add_guard(G.DEFAULT_DTYPE, None, torch.get_default_dtype())
        self.global_state = global_state.snapshot()  # See Note [Global state]
        self.add_guard(G.GLOBAL_STATE, None, self.global_state)

    # --- guards -----------------------------------------------------------------------------
    def add_guard(self, kind, source: Optional[Source], expected, sources=()) -> None:
        key = (kind, source.name() if source is not None else None)
        if key not in self.guards:
            self.guards[key] = G.Guard(kind, source, expected, tuple(sources))

    def guard_identity(self, vt) -> None:
        """The trace compared `vt`'s object by `is`/`==` or used its identity: guard it."""
        if (isinstance(vt, ConstVar) and vt.source is not None
                and not isinstance(vt.value, CONSTANT_TYPES + (sympy.Basic,))
                and (G.ID_MATCH, vt.source.name()) not in self.guards):
            self.add_guard(G.ID_MATCH, vt.source, (id(vt.value), _describe(vt.value)))
            self.id_objects.append(vt.value)

    def guard_fact(self, base, fn, label: str, value) -> None:
        """Guard a fact computed from a sourced object (`hasattr(o, 'gain')`, `k in s`,
        `bool(o)`): EQUALS_MATCH on a DerivedSource; `label` has `{}` for the base."""
        if base is not None:
            self.add_guard(G.EQUALS_MATCH, DerivedSource(base, fn, label), value)

    def guard_no_hooks(self, base) -> None:
        """The module at `base` was called with no hooks of its own and no global ones: a
        hook registered later changes what the call runs, so it must recompile."""
        if base is not None and not isinstance(base, ModuleSliceSource):  # (made fresh)
            self.add_guard(G.NO_HOOKS, DictOfSource(base), None)
        self.add_guard(G.NO_GLOBAL_HOOKS, None, None)

    def guard_not_overridden(self, base, name: str) -> None:
        """`name` was resolved on the class of the object at `base`: no instance attribute
        may shadow it (an instance-level `forward`, a method replaced on the object)."""
        if base is not None and (base.name(), name) not in self.checked_by_caller and \
                not isinstance(base, ModuleSliceSource):  # (made fresh, by its class)
            self.add_guard(G.NOT_IN_DICT, DictOfSource(base), name)

    def guard_module_keys(self, vt) -> None:
        """A module container (ModuleList/Sequential/ModuleDict) was iterated, indexed or
        measured: guard its submodules' names, in order.  A slice made in the frame is
        pinned by the guard on the container it was cut from (Note [Sliced module
        containers], refcomp/tracer/containers.py)."""
        if vt.source is not None and not isinstance(vt.source, ModuleSliceSource):
            if vt.source.name() in self._module_keys_guarded:  # once per container
                return
            self._module_keys_guarded.add(vt.source.name())
            modules = vt.value._modules
            source = ModuleDictSource(vt.source, MODULE)
            if tuple(modules) == tuple(str(i) for i in range(len(modules))):
                # Numbered 0..n-1 (a ModuleList/Sequential: append, insert and del keep it
                # so): the length pins the names, and each submodule is loaded by name.
                self.add_guard(G.LENGTH_CHECK, source, (type(modules), len(modules)))
            else:
                self.add_guard(G.DICT_KEYS, source, (type(modules), tuple(modules)))

    # --- reading real values ------------------------------------------------------------------
    def wrap(self, value, source: Optional[Source]) -> VT:
        """A symbolic view of a real value read from `source` (guards installed)."""
        if source is not None and source.name() in self.objects:
            return self.objects[source.name()]
        vt = self._wrap(value, source)
        if source is not None:
            self.objects[source.name()] = vt
        return vt

    def _wrap(self, value, source):
        if isinstance(value, torch.Tensor):
            return self._wrap_tensor(value, source)
        if source is None:
            return self._wrap_unsourced(value)
        if type(value) is int and self._number_is_symbol(source, value):
            return self._number_symbol(value, source)
        if type(value) is float and self._float_is_dynamic(source):
            return self._dynamic_float(value, source)
        if isinstance(value, CONSTANT_TYPES) and not isinstance(value, enum.Enum):
            self.add_guard(G.EQUALS_MATCH, source, value)
            return ConstVar(value, source)
        if type(value) in (set, frozenset) and all(constant_key(v) for v in value):
            # Membership and iteration read the contents: guard them (a copy, so that the
            # expected value does not change with the user's set).
            copy = type(value)(value)
            self.add_guard(G.EQUALS_MATCH, source, copy)
            return ConstVar(copy, source)
        if type(value) in (list, dict):
            self.claim_container(value, "read", source)
        if type(value) in (list, tuple, torch.Size) or _is_namedtuple(value):
            # A torch.Size argument is a tuple of ints: each size read is guarded by value
            # (guarding only its type would bake the traced sizes in).
            self.add_guard(G.LENGTH_CHECK, source, (type(value), len(value)))
            items = [self.wrap(v, ItemSource(source, i)) for i, v in enumerate(value)]
            if type(value) is list:
                return ListVar(items, source)
            return TupleVar(items, source, cls=type(value))
        if type(value) is dict:
            if not all(constant_key(k) for k in value):
                raise Unsupported(NON_TENSOR_RESULT, f"dict {source.name()} has non-constant keys")
            self.add_guard(G.DICT_KEYS, source, (dict, tuple(value)))
            return DictVar({k: self.wrap(v, ItemSource(source, k)) for k, v in value.items()},
                           source)
        if isinstance(value, (torch.dtype, torch.device)):
            self.add_guard(G.EQUALS_MATCH, source, value)
            return ConstVar(value, source)
        if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
            # A bound method is a new object at every attribute read (`self.chunk` passed
            # to a compiled frame: an identity guard failed at every call, and its object
            # was read without a source).  Its function and its object are guarded, as for
            # one left on the stack at a break (refcomp/break_trace.py).
            self.add_guard(G.TYPE_MATCH, source, types.MethodType)
            self.wrap(value.__func__, AttrSource(source, "__func__"))
            return MethodVar(value.__func__, self.wrap(value.__self__,
                                                       AttrSource(source, "__self__")),
                             value.__func__.__name__)
        if isinstance(value, types.FunctionType) and value.__code__.co_name in COMPREHENSIONS:
            # A comprehension's function is made anew at every call (3.11), and one on the
            # stack at a break reaches the resumed code as an argument: guarded by identity
            # it failed at every call (transformers' backbone wrapper recompiled per call).
            # Nothing can see it but its one call: its code decides, and the cells it reads
            # are guarded through this source when the call is inlined.
            self.add_guard(G.TYPE_MATCH, source, types.FunctionType)
            self.wrap(value.__code__, AttrSource(source, "__code__"))
            return ConstVar(value, source)
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.ModuleType,
                              type, torch.nn.Module, types.MethodType,
                              types.MethodWrapperType, types.WrapperDescriptorType,
                              types.MethodDescriptorType, types.BuiltinMethodType,
                              types.CodeType, enum.Enum)):
            # Enum members are singletons: `mode is Mode.ADD` and `==` both compare identity.
            self.add_guard(G.ID_MATCH, source, (id(value), _describe(value)))
            self.id_objects.append(value)
            return ConstVar(value, source)
        # Any other object: its exact type, then each attribute read is guarded on its own.
        self.add_guard(G.TYPE_MATCH, source, type(value))
        return ConstVar(value, source)

    def claim_container(self, value, how: str, source) -> None:
        """One list/dict object is either read (wrapped, its contents traced) or mutated
        unseen (an OpaqueVar whose mutations are replayed), never both under two names:
        the trace would not see the mutations (Note [Replayed side effects])."""
        seen = self.container_claims.setdefault(id(value), (how, source.name(), value))
        if seen[0] != how:
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                              f"{source.name()} is the same {type(value).__name__}"
                                       f" as {seen[1]}, which the frame "
                                       f"{'mutates' if how == 'read' else 'reads'}")

    def _wrap_unsourced(self, value):
        if isinstance(value, torch.Tensor):
            raise Unsupported(NON_TENSOR_RESULT,
                              "a tensor reached without a source (cannot be an input)")
        if type(value) in (list, tuple):
            items = [self._wrap_unsourced(v) for v in value]
            return (ListVar if type(value) is list else TupleVar)(items)
        return ConstVar(value)

    def _wrap_tensor(self, t: torch.Tensor, source: Optional[Source]) -> TensorVar:
        if source is None:
            raise Unsupported(NON_TENSOR_RESULT,
                              "a tensor reached without a source (cannot be an input)")
        if t.is_sparse or t.is_quantized or t.layout != torch.strided:
            raise Unsupported(INEXPRESSIBLE_OP, f"{source.name()} is a {t.layout}/{t.dtype} tensor")
        if t.dtype == torch.complex32:
            raise Unsupported(COMPLEX_UNSUPPORTED, f"{source.name()} is a torch.complex32 tensor")
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            raise Unsupported(INEXPRESSIBLE_OP,
                              f"{source.name()} is a tensor subclass {type(t).__name__}")
        first = self.parameter_vars.get(id(t)) if type(t) is torch.nn.Parameter else None
        if first is not None:
            # One parameter at two sources (the module's and the optimizer's param_groups,
            # or a list of model.parameters()): one traced value, so a step's writes into it
            # are seen through both; the guard pins that both still read one object.
            self.add_guard(G.EQUALS_MATCH, IdentitySource(first.source, source), True)
            return first
        dynamic_dims = self._dynamic_dims(t, source)
        facts = G.tensor_facts(t, dynamic_dims)
        self.add_guard(G.TENSOR_MATCH, source, facts)
        shape = list(t.shape)
        for d in dynamic_dims:
            shape[d] = self._size_symbol(int(t.shape[d]), source, d)
            kind, why = self._symbol_why.pop((source.name(), d))
            if kind == "automatic dynamic":
                self.automatic_symbols.add(shape[d])
            first = self.sym_sources[shape[d]][0]
            if first != (source, d):  # duck sizing: the guard says they stay equal
                why += f"; equal to {first[0].name()}.size({first[1]}), so one symbol"
            self.notes.append(f"{kind}: {source.name()}.size({d}) is {shape[d]} ({why})")
        ttype = TensorType(ir_dtype(t.dtype), tuple(shape), ir_device(t.device))
        value = self.builder.input(value_name(source), ttype)
        self.input_sources.append(source)
        # Inputs that share storage (one tensor at two sources, or views of one base) share
        # an alias, so an in-place op on one sees the other (Note [In-place]).
        ptr = t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() else None
        alias = self.storage_alias.setdefault(ptr, object()) if ptr is not None else None
        if alias is not None and any(self.input_vars[src.name()].alias is alias
                                     for src, _ in self.mutated.values()):
            # its value would miss the write (and NO_ALIASING would fail right after the
            # trace, running the whole frame eagerly): the graph ends before this read
            raise Unsupported(INPLACE_ON_ALIAS, f"{source.name()} shares storage with an"
                                                " input the frame wrote")
        var = TensorVar(value, meta_like(t, t.requires_grad), requires_grad=t.requires_grad,
                        alias=alias, source=source)
        var.inference = t.is_inference()
        self.input_vars[source.name()] = var
        if type(t) is torch.nn.Parameter:
            self.parameter_vars[id(t)] = var
        self.input_aliases.add(var.alias)
        self.examples[source.name()] = t  # for the C++ tensor check; dropped after compile
        return var

    # --- dynamic sizes (See Note [Dynamic batch]) ---------------------------------------
    def _dynamic_dims(self, t: torch.Tensor, source: Source) -> tuple:
        """The dims of `t` that become size symbols (See Note [Dynamic batch])."""
        marked = set(getattr(t, MARK_ATTR, ()))
        pinned = set(getattr(t, STATIC_ATTR, ()))  # refcomp.mark_static
        for d, why in self.pinned.get(source.name(), {}).items():
            if d not in pinned:
                pinned.add(d)
                self.notes.append(f"dynamic: {source.name()}.size({d}) == {t.shape[d]} is"
                                  f" specialised: {why}")
        auto = self.auto_dims.get(source.name(), ())
        # (a number's VALUE or FLOAT where the source held a number before: no dims)
        auto = set(auto) - marked if isinstance(auto, tuple) else set()
        every = set(range(t.dim())) if self.dynamic else set()  # dynamic=True: every dim
        requested = set() if self.static else (marked | auto | every) - pinned
        for d in sorted((pinned - set(self.pinned.get(source.name(), {})))
                        & (marked | auto | every)):
            self.notes.append(f"dynamic: {source.name()}.size({d}) == {t.shape[d]} stays"
                              " static (refcomp.mark_static)")
        wanted = requested
        if not wanted:
            return ()
        why = None
        if not t.is_contiguous():
            why = "the tensor is not contiguous (its strides would be symbolic)"
        # Arguments, their items and attributes (a KV cache object's tensors), not module
        # state: what is read through a module's _parameters/_buffers/_modules, or any
        # Parameter, stays static, as in torch.
        src = source
        while src is not None:
            if isinstance(src, AttrSource) and src.where != ATTR:
                why = "it is module state (parameters and buffers stay static)"
            src = src.base()
        if isinstance(t, torch.nn.Parameter):
            why = "it is a parameter (parameters and buffers stay static)"
        dims = []
        for d in sorted(wanted):
            if not -t.dim() <= d < t.dim():
                continue  # a mark for another rank: this tensor has no such dim
            d %= t.dim()
            if why is None and t.shape[d] >= 2:
                dims.append(d)
                self.requested |= d in requested
                self.requested_explicit |= d in requested and d not in auto
                # Why it is a symbol, said once the symbol is known (_wrap_tensor).
                self._symbol_why[(source.name(), d)] = (
                    ("automatic dynamic", "its size changed since an earlier compile")
                    if d in auto else ("dynamic", "refcomp.mark_dynamic" if d in marked
                                       else "dynamic=True"))
            elif d in requested and why is None:
                self.notes.append(f"dynamic: {source.name()}.size({d}) == {t.shape[d]} stays"
                                  " static (sizes 0 and 1 are specialized, as in torch)")
        explicit = requested - every  # dynamic=True alone does not ask for module state
        if why is not None and explicit:
            self.notes.append(f"dynamic: {source.name()} dims {sorted(explicit)} stay static:"
                              f" {why}")
        return tuple(sorted(set(dims)))

    # --- Python ints as size symbols (Note [Number symbols]) -------------------------------
    def _number_is_symbol(self, source: Source, value: int) -> bool:
        if self.static or self.auto_dims.get(source.name()) != VALUE:
            return False
        if value < 2:
            self.notes.append(f"automatic dynamic: {source.name()} == {value} stays static"
                              " (values below 2 are specialized, as in torch)")
            return False
        if value >= NUMBER_SYMBOL_LIMIT:
            self.notes.append(f"automatic dynamic: {source.name()} == {value} stays static"
                              f" (a size symbol is below {NUMBER_SYMBOL_LIMIT})")
            return False
        return True

    def _number_symbol(self, value: int, source: Source) -> ConstVar:
        """Note [Number symbols]: an int argument whose value changed between calls
        (automatic dynamic) is a size symbol of its own (no duck sizing with tensor dims).
        The graph binds it from an extra input, `NumberAsSize`: a tensor of shape
        [n, 0] made from the argument by the guard check (no elements, never read), so
        the backends' symbol binding from input shapes serves it unchanged.  Guards: the
        exact type int and `n >= 2`; Python code sees the symbol (`x[:n]`, `x * n`,
        `x.view(-1, n)` stay symbolic; `range(n)` or a comparison specialize or decide
        with a guard, as for tensor sizes)."""
        self.add_guard(G.TYPE_MATCH, source, int)
        # Its carrier must be a tensor every backend can hold (the interpreter's numpy
        # array of shape [n, 0] has a size limit): a larger value recompiles, static.
        self.guard_fact(source, _below_symbol_limit, f"{{}} < {NUMBER_SYMBOL_LIMIT}", True)
        carrier = NumberAsSize(source)
        sym = size_symbol(f"s{len(self.sym_values)}")
        while sym in self.sym_values:
            sym = size_symbol(f"{sym}_")
        self.sym_values[sym] = value
        self.sym_sources[sym] = [(carrier, 0)]
        ttype = TensorType(ir_dtype(torch.int64), (sym, 0), "cpu")
        self.builder.input(value_name(source) + "_size", ttype)
        self.input_sources.append(carrier)
        self.notes.append(f"automatic dynamic: {source.name()} is {sym} (its value changed"
                          " since an earlier compile)")
        return ConstVar(sym, source)

    # --- Python floats as graph inputs (Note [Dynamic floats]) -------------------------------
    def _float_is_dynamic(self, source: Source) -> bool:
        name = source.name()
        mode = self.auto_dims.get(name)
        if isinstance(mode, str) and mode.startswith(FLOAT_STATIC):
            why = mode[len(FLOAT_STATIC) + 2:]
            self.notes.append(f"automatic dynamic: {name} stays static: {why}")
            return False
        if self.static or mode != FLOAT:
            return False
        why = self.pinned.get(name, {}).get(FLOAT)
        if why is not None:
            self.notes.append(f"automatic dynamic: {name} stays static: {why}")
            return False
        return True

    def _dynamic_float(self, value: float, source: Source):
        """Note [Dynamic floats] (refcomp/tracer/dynamic_floats.py): a float whose value
        changed between calls is a 0-d float64 graph input, made from it by the guard check
        (`NumberAsTensor`) and guarded by its exact type instead of its value."""
        self.add_guard(G.TYPE_MATCH, source, float)
        carrier = NumberAsTensor(source)
        ttype = TensorType(ir_dtype(torch.float64), (), "cpu")
        value_ir = self.builder.input(value_name(source), ttype)
        self.input_sources.append(carrier)
        self.dynamic_floats.append(source.name())
        self.notes.append(f"automatic dynamic: {source.name()} is a graph input (its value"
                          " changed since an earlier compile)")
        tensor = TensorVar(value_ir, torch.empty((), dtype=torch.float64, device="meta"))
        return DynamicFloatVar(tensor, value, source, roots=(source.name(),))

    def _size_symbol(self, size: int, source: Source, dim: int):
        sym = self.sym_by_size.get(size)
        if sym is None:
            sym = size_symbol(f"s{len(self.sym_values)}")
            self.sym_by_size[size] = sym
            self.sym_values[sym] = size
            self.sym_sources[sym] = []
        self.sym_sources[sym].append((source, dim))
        return sym

    def real_cell(self, cell, contents_source, cell_source):
        """The one CellVar of a real closure cell, shared by the frame and every closure
        inlined that holds the cell, so a store into it (replayed after the graph) is
        what each of them reads next; contents None for an empty cell."""
        from refcomp.tracer.values import CellVar

        known = self.real_cells.get(id(cell))
        if known is not None:
            return known[1]
        try:
            contents = self.wrap(cell.cell_contents, contents_source)
        except ValueError:
            contents = None
        var = CellVar(contents)
        var.real, var.cell_source, var.cell = True, cell_source, cell
        self.real_cells[id(cell)] = (cell, var)  # holds the cell: its id stays its own
        return var

    def concrete(self, expr) -> int:
        """The value a size expression had while tracing (no guard)."""
        return int(sympy.sympify(expr).subs(self.sym_values))

    def decide(self, relation) -> bool:
        """Evaluate a relation between sizes at trace time and guard that it stays so."""
        value = bool(sympy.sympify(relation).subs(self.sym_values))
        if relation.free_symbols:
            self.shape_facts.append((relation, value))
        return value

    def specialize(self, expr) -> int:
        """Turn a size expression into its traced value, guarding the equality."""
        value = self.concrete(expr)
        if sympy.sympify(expr).free_symbols:
            self.shape_facts.append((sympy.Eq(expr, value), True))
        return value

    def _shape_guards(self) -> None:
        for sym, uses in self.sym_sources.items():
            text = " == ".join(size_text(s, d) for s, d in uses) + " >= 2"
            check = (lambda *sizes: sizes[0] >= 2 and all(x == sizes[0] for x in sizes))
            self.guards[(G.SHAPE_ENV, text)] = G.Guard(G.SHAPE_ENV, None,
                                                       (text, check, list(uses)))
        for relation, value in self.shape_facts:
            symbols = sorted(relation.free_symbols, key=str)
            fn = sz.int_function(symbols, relation)
            text = f"({relation}) is {value}  where " + ", ".join(
                f"{s} = {size_text(*self.sym_sources[s][0])}" for s in symbols)
            key = (G.SHAPE_ENV, text)
            if key not in self.guards:
                self.guards[key] = G.Guard(G.SHAPE_ENV, None, (
                    text, (lambda f, v: lambda *sizes: bool(f(*sizes)) == v)(fn, value),
                    [self.sym_sources[s][0] for s in symbols]))

    def shares_storage_with_live(self, tv: TensorVar) -> bool:
        """Could mutating `tv` be seen through another tensor?  (See Note [In-place].)"""
        if tv.alias in self.input_aliases and self.input_vars.get(
                tv.source.name() if tv.source is not None else None) is not tv:
            return True  # a view of the caller's tensor: eager mutates the caller's storage
        return any(v is not tv and v.alias is tv.alias for v in self.live_tensors())

    def live_tensors(self) -> list:
        """Every TensorVar the frames hold (locals, stacks, inside containers)."""
        seen, out = set(), []
        todo = [v for frame in self.frames for v in frame.live_values()]
        while todo:
            v = todo.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            if isinstance(v, TensorVar):
                out.append(v)
            elif isinstance(v, (TupleVar, ListVar)):
                todo.extend(v.items)
            elif isinstance(v, DictVar):
                todo.extend(v.items.values())
            elif hasattr(v, "items") and isinstance(getattr(v, "items"), list):
                todo.extend(v.items)  # iterators
        return out

    def saved_for_backward(self, tv: TensorVar) -> bool:
        """Does eager's backward of an op recorded so far save `tv` (or a tensor sharing
        its storage)?  Eager raises at backward if it is then modified in place, so such
        an in-place op breaks the graph: it runs in eager on the graph's output, which the
        compiled graph saves as eager would (Note [Saved by eager], ir/ops/registry.py)."""
        if not self.grad_enabled or not isinstance(tv.value, Value):
            return False
        from ir.autodiff import SavedSoFar

        if self._saved_so_far is None:
            self._input_wants: list = []
            self._saved_so_far = SavedSoFar(self.eager_saves)
        if len(self._input_wants) != len(self.input_sources):  # inputs are only appended
            self._input_wants = [
                src.name() in self.input_vars and self.input_vars[src.name()].requires_grad
                for src in self.input_sources]
        return self._saved_so_far.shares_storage(self.builder.inputs, self._input_wants,
                                                 self.builder.nodes, tv.value)

    def set_grad_enabled(self, enabled: bool) -> None:
        self.grad_enabled = bool(enabled)
        self.used_grad_toggle = True

    # --- mutation ---------------------------------------------------------------------------
    def add_check(self, condition, message: str, result_shape) -> None:
        """Raise `message` after the graph when the bool IR value `condition` has a true
        element (Note [Runtime checks] in refcomp/runtime.py).  ATen checks as it computes
        each element of the result, so a result of `result_shape` with no element (a
        static 0; symbolic sizes are >= 2) raises nothing, and gets no check (corpus
        index_out_of_bounds_into_empty_result, int_div_by_zero_into_empty_result)."""
        if any(isinstance(d, int) and d == 0 for d in result_shape):
            return
        self.checks.append((self.builder.op("any", condition, dims=[], keepdim=False),
                            message))

    def add_raise_check(self, condition, cls: type, args: tuple) -> None:
        """Raise `cls(*args)` after the graph when the 0-d bool IR value `condition` is
        true (Note [Raising branches], refcomp/tracer/raise_checks.py)."""
        if self.raise_check_at is None:
            self.raise_check_at = len(self.builder.nodes)
        self.checks.append((condition, (cls, tuple(args))))

    def record_mutation(self, old: TensorVar, new: TensorVar) -> None:
        """`old` (a graph input) now holds `new`'s value; written back after the graph runs."""
        if old.source is None or old.source.name() not in self.input_vars:
            raise Unsupported(INPLACE_ON_ALIAS, "in-place op on a tensor that is not a graph input")
        self.mutated[old.source.name()] = (old.source, new)

    def finish_guards(self) -> list:
        self._shape_guards()
        if self.mutated and len(self.input_sources) > 1:
            # a written-back input shares no storage with another input; inputs that are
            # only read may share (one module's weight at two sources of a Sequential)
            written = [src for src, _ in self.mutated.values()]
            others = [s for s in self.input_sources
                      if s.name() in self.input_vars and s.name() not in self.mutated]
            self.add_guard(G.NO_ALIASING, None, len(written), written + others)
        return list(self.guards.values())


def module_attr_source(module: torch.nn.Module, base: Source, name: str) -> Source:
    """Where `module.name` lives, so guards read the right dict directly."""
    if name in module.__dict__:
        return AttrSource(base, name)
    for where in (PARAM, BUFFER, MODULE):
        if name in module.__dict__.get(where, {}):
            return AttrSource(base, name, where)
    return AttrSource(base, name)


COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})


def _describe(value) -> str:
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if isinstance(value, (type, types.FunctionType, types.ModuleType, types.BuiltinFunctionType,
                          types.MethodType, types.CodeType)):
        name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        if name:
            return name
    return type(value).__name__


def constant_key(k) -> bool:
    """A dict key the DICT_KEYS guard can compare by value: a constant, a dtype or device,
    a class or a `typing` special form (equal only to itself: `{list: ..., Union: ...}`),
    or a tuple of those (`{("cpu", torch.float16): ...}`)."""
    if isinstance(k, (torch.dtype, torch.device, type, typing._SpecialForm, *CONSTANT_TYPES)):
        return True
    return type(k) is tuple and all(constant_key(i) for i in k)


def _is_namedtuple(value) -> bool:
    """A collections.namedtuple / typing.NamedTuple instance: read item by item, its class
    kept (fields by name through TupleVar.field)."""
    cls = type(value)
    return isinstance(value, tuple) and hasattr(cls, "_fields") and hasattr(cls, "_make")
