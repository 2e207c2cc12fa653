"""Symbolic values on the tracer's stack: tensors record IR, the rest are real objects.

Owns: `TensorVar` (an IR value plus a meta tensor holding torch's own idea of its
dtype and shape), `ConstVar` (a real Python object), the containers
`TupleVar`/`ListVar`/`DictVar`, `IteratorVar`, `CellVar`, `FunctionVar` (a function
made by MAKE_FUNCTION while tracing), `MethodVar` (a method bound to a symbolic
self) and `NullVar` (the NULL that 3.11 pushes below a callable).  Each may carry
the `Source` it was read from, so guards can name it.  Must not know opcodes or
the torch table.  Spec: spec/tracer.md, "Values".
"""

from __future__ import annotations

from typing import Any, Optional

from refcomp.reasons import INEXPRESSIBLE_OP, Raised, Unsupported
from refcomp.sources import Source


class VT:
    """A value on the symbolic stack."""

    source: Optional[Source] = None

    def python_type(self):
        raise NotImplementedError

    def __repr__(self):  # user-facing (see TensorVar.__repr__)
        return _WHAT.get(type(self).__name__, "a value made in the frame")


_WHAT = {"IteratorVar": "an iterator", "GeneratorVar": "a generator", "CellVar": "a cell",
         "PartialVar": "a functools.partial made in the frame",
         "GradModeVar": "a grad-mode context", "ExitVar": "the exit of a `with` block"}


class NullVar(VT):
    def __repr__(self):
        return "NULL"


NULL = NullVar()


class _ViewBase:
    """Marks the viewed tensor's place in a view step's arguments (TensorVar.view_steps)."""

    def __repr__(self):
        return "VIEW_BASE"


VIEW_BASE = _ViewBase()


class TensorVar(VT):
    """A tensor being traced.

    value: the ir.Value that holds it.  meta: a tensor on the meta device with
    torch's dtype, shape and strides (the type oracle).  requires_grad: what
    `t.requires_grad` would be in eager.  grad_cut: made by detach()/no_grad from a
    value that carried gradients.  alias: identity of the storage it views (tensors
    with the same alias object share memory in eager).  is_view: made by a view op.
    view_root: the graph-input TensorVar this is a pure chain of view ops of (reshape,
    permute, slicing, expand...; see Note [Returned views]), else None; view_grad: the
    grad mode those view ops ran under; view_steps: those view ops, replayable on the
    caller's tensor (`(fn, args, kwargs, item)` each: `fn(*args, **kwargs)` with the
    viewed tensor where args hold VIEW_BASE, then `[item]` when item is not None; args
    may hold symbolic sizes), or None when one of them cannot be replayed.  view_base:
    for a view of an intermediate instead, the (TensorVar, its ir.Value then) that the
    chain `view_steps` starts from, else None; view_made: this view's own ir.Value when
    its view op made it (an in-place op on the view since then replaces `value`, and the
    chain no longer describes it).
    """

    view_root = None
    view_grad = True
    inference = False  # an input made under torch.inference_mode() (Note [Inference
                       # tensors under grad], refcomp/tracer/torch_table.py)
    view_steps = None
    view_base = None
    view_made = None
    written_without_grad = False  # Note [Parameters written under no_grad]

    def __init__(self, value, meta, *, requires_grad=False, grad_cut=False, alias=None,
                 is_view=False, source=None):
        self.value = value
        self.meta = meta
        self.requires_grad = requires_grad
        self.grad_cut = grad_cut
        self.alias = alias if alias is not None else object()
        self.is_view = is_view
        self.source = source

    def python_type(self):
        import torch

        return torch.Tensor

    # Reprs are user-facing: break reasons interpolate values with {!r} (issue 12: no
    # refcomp-internal names in a reason); debugging reads the attributes.
    def __repr__(self):
        return f"tensor {self.source.name()}" if self.source is not None else "a tensor"


class ConstVar(VT):
    """A real Python object (number, string, module, function, dtype...)."""

    def __init__(self, value: Any, source: Optional[Source] = None):
        self.value = value
        self.source = source

    def python_type(self):
        return type(self.value)

    def __repr__(self):
        if self.source is not None:
            return self.source.name()
        text = repr(self.value)
        return text if len(text) <= 80 else f"a {type(self.value).__name__}"



class MadeObjectVar(ConstVar):
    """An object the tracer made for the trace's own use where the program makes a new
    one at every call (`torch.nn.CrossEntropyLoss()` inside forward): it may be read and
    called, but never leave the frame as that object (a result, a replayed effect or a
    value live at a break that holds it is refused)."""

    def __repr__(self):
        return f"a {type(self.value).__name__} made in the frame"

class TupleVar(VT):
    """A tuple; `cls` is a tuple subclass torch returns (`torch.return_types.max`: a
    structseq whose fields are `cls.__match_args__`), else `tuple`."""

    def __init__(self, items, source=None, cls=tuple):
        self.items = list(items)
        self.source = source
        self.cls = cls

    def python_type(self):
        return self.cls

    def field(self, name: str):
        """The item a structseq or namedtuple field names, or None."""
        fields = getattr(self.cls, "_fields", None) or getattr(self.cls, "__match_args__", ())
        return self.items[fields.index(name)] if name in fields else None

    def __repr__(self):
        what = self.source.name() if self.source is not None else "a"
        return f"{what} {self.cls.__name__} of {len(self.items)} items"


class ListVar(VT):
    def __init__(self, items, source=None):
        self.items = list(items)
        self.source = source

    def python_type(self):
        return list

    def __repr__(self):
        what = self.source.name() if self.source is not None else "a"
        return f"{what} list of {len(self.items)} items"


class DictVar(VT):
    """A dict with constant keys (Python values) and symbolic values."""

    def __init__(self, items: dict, source=None):
        self.items = dict(items)
        self.source = source

    def python_type(self):
        return dict

    def __repr__(self):
        what = self.source.name() if self.source is not None else "a"
        return f"{what} dict of {len(self.items)} items"


class ModelOutputVar(DictVar):
    """A transformers `ModelOutput` (an OrderedDict subclass and a dataclass) made while
    tracing (Note [Model outputs], refcomp/tracer/constructors.py): `fields` holds every field's
    value (None included, as its attributes), `items` the dict part (the non-None fields,
    in field order, and keys set later).  As a DictVar it iterates, tests `in` and has a
    length like the dict it is."""

    def __init__(self, cls: type, fields: dict, items: dict):
        super().__init__(items)
        self.cls = cls
        self.fields = dict(fields)

    def python_type(self):
        return self.cls

    def __repr__(self):
        return f"{self.cls.__name__}({', '.join(self.items)})"


def make_model_output(cls, fields: dict, items: dict):
    """A `ModelOutput` of class `cls` in exactly the state traced: each field an attribute,
    `items` the dict part in order (its __init__/__post_init__ are not re-run: they would
    decide the same from these values)."""
    import collections

    obj = cls.__new__(cls)
    collections.OrderedDict.__init__(obj)
    for name, value in fields.items():
        object.__setattr__(obj, name, value)
    for key, value in items.items():
        collections.OrderedDict.__setitem__(obj, key, value)
    return obj


class IteratorVar(VT):
    """An iterator over a list of symbolic values known at trace time (loops unroll)."""

    def __init__(self, items):
        self.items = list(items)
        self.pos = 0

    def next(self) -> Optional[VT]:
        if self.pos >= len(self.items):
            return None
        self.pos += 1
        return self.items[self.pos - 1]

    def remaining(self) -> list:
        """The items later steps would give as things stand (nothing is consumed)."""
        return self.items[self.pos:]

    def rest(self) -> list:
        """Every remaining item, consumed (`list(it)`, `sum(it)`...)."""
        return drain(self)


def drain(it) -> list:
    """Every item `it.next()` still gives (an IteratorVar or a GeneratorVar), consumed."""
    items = []
    while (item := it.next()) is not None:
        items.append(item)
    return items


class ListIteratorVar(IteratorVar):
    """`iter(xs)` of a list the trace holds (a `ListVar`): live, like CPython's list
    iterator -- items the loop body appends are visited, and once exhausted it stays so.
    (A snapshot visited 2 of 4 items of `for t in xs: xs.append(...)`.)"""

    def __init__(self, seq: "ListVar"):
        self.seq = seq
        self.pos = 0
        self.exhausted = False

    @property
    def items(self) -> list:
        return [] if self.exhausted else self.seq.items

    def next(self) -> Optional[VT]:
        if self.exhausted or self.pos >= len(self.seq.items):
            self.exhausted = True
            self.pos = 0
            return None
        self.pos += 1
        return self.seq.items[self.pos - 1]


class DictIteratorVar(IteratorVar):
    """`iter(d)` of a dict the trace holds (a `DictVar`): its keys, with CPython's check --
    once the dict's size differs from the size it had when the iterator was made, every
    step raises eager's RuntimeError (sticky, as in CPython).  A dict whose keys changed
    at the same size is not modelled (CPython's answer depends on its entry table): the
    step is RB013, and the iterator cannot cross the break (the frame runs eagerly)."""

    SIZE_CHANGED = "dictionary changed size during iteration"

    def __init__(self, seq: "DictVar", kind: str = "keys"):
        self.seq = seq
        self.kind = kind  # "keys", "values" or "items": what each step gives
        self.keys = list(seq.items)
        self.pos = 0
        self.broken = False  # CPython's di_used = -1: the size error is sticky

    def _item(self, key) -> VT:
        if self.kind == "keys":
            return ConstVar(key)
        if self.kind == "values":
            return self.seq.items[key]
        return TupleVar([ConstVar(key), self.seq.items[key]])

    @property
    def items(self) -> list:
        return [self._item(k) for k in self.keys]

    def remaining(self) -> list:
        return [] if self.broken else [self._item(k) for k in self.keys[self.pos:]]

    def size_changed(self) -> bool:
        return self.broken or len(self.seq.items) != len(self.keys)

    def keys_changed(self) -> bool:
        return list(self.seq.items) != self.keys

    def next(self) -> Optional[VT]:
        if self.size_changed():
            self.broken = True
            raise Raised(RuntimeError(self.SIZE_CHANGED), f"RuntimeError: {self.SIZE_CHANGED}")
        if self.keys_changed():
            raise Unsupported(INEXPRESSIBLE_OP, "a dict whose keys changed (at the same size)"
                              " while a loop iterates it")
        if self.pos >= len(self.keys):
            return None
        self.pos += 1
        return self._item(self.keys[self.pos - 1])


class EnumerateVar(IteratorVar):
    """`enumerate(it, start)`: lazy over the inner iterator (a live list's, a dict's), so
    items the loop body appends are counted as CPython counts them."""

    def __init__(self, inner: IteratorVar, start: int):
        self.inner = inner
        self.count = start  # the number the next item gets

    @property
    def items(self) -> list:
        return self.remaining()

    def next(self) -> Optional[VT]:
        item = self.inner.next()
        if item is None:
            return None
        self.count += 1
        return TupleVar([ConstVar(self.count - 1), item])

    def remaining(self) -> list:
        return [TupleVar([ConstVar(self.count + i), item])
                for i, item in enumerate(self.inner.remaining())]


class DictViewVar(ListVar):
    """`d.keys()`, `d.values()`, `d.items()` of a dict the trace holds: a view, so its
    items are the dict's as they are now, and a loop over it gets the dict's own checks
    (`DictIteratorVar`)."""

    def __init__(self, seq: "DictVar", kind: str):
        self.seq = seq
        self.kind = kind
        self.source = None

    def python_type(self):
        return type(getattr({}, self.kind)())  # dict_keys, dict_values, dict_items

    @property
    def items(self) -> list:
        return DictIteratorVar(self.seq, self.kind).items


class GeneratorVar(VT):
    """A generator expression made while tracing, advanced lazily by whoever consumes it.

    Note [Generator expressions]: `(f(x) for x in xs)` is a generator frame.  Its code is
    traced by a translator of its own (refcomp/tracer/frame.py, `advance`) one item at a
    time, exactly when the consumer asks for the next one -- a `for` loop, `tuple()`,
    `all()`/`any()` (which stop early, as in eager), `sum`, `min`/`max` -- so items a
    short-circuiting consumer never asks for are never traced, and effects happen in the
    order eager has them.  It cannot cross a graph break (recipes refuse it: a half-run
    generator has no bytecode to rebuild it from).  Only generator *expressions* are
    traced; a `def` with `yield` called by the traced code is still RB014.
    """

    def __init__(self, translator):
        self.translator = translator
        self.done = False

    def next(self) -> Optional[VT]:
        if self.done:
            return None
        item = self.translator.advance()
        if item is None:
            self.done = True
        return item

    def rest(self) -> list:
        return drain(self)


class OpaqueVar(VT):
    """A real value the tracer must not look into: a Python number that changed between calls
    at a resume point (Note [Opaque numbers], refcomp/recipes.py), or a list/dict the code
    mutates (Note [Replayed side effects], refcomp/tracer/effects.py).

    The tracer only moves it around: any handler that needs its value fails, and the
    instruction becomes a break that runs concretely.  Only its exact type is guarded.
    """

    def __init__(self, value, source):
        self.kind = type(value)
        self.source = source
        self.real = value  # only for guards on it (a key `del` removes), never traced

    def python_type(self):
        return self.kind

    def __repr__(self):
        if self.kind in (list, dict):
            return f"{self.source.name()}, a {self.kind.__name__} the frame mutates"
        return f"{self.source.name()}, a {self.kind.__name__} whose value is not traced"


class CellVar(VT):
    """A closure cell created during tracing (MAKE_CELL) or read from a real closure:
    `real`, with `cell_source` naming the cell object where a store into it can be
    replayed (None: such a store is RB008)."""

    def __init__(self, contents: Optional[VT] = None):
        self.contents = contents
        self.real = False
        self.cell = self.cell_source = None  # a real cell: the object, a Source for it


class FunctionVar(VT):
    """A function created by MAKE_FUNCTION inside the traced code (inlined when called)."""

    def __init__(self, code, f_globals, defaults, kwdefaults, closure, name,
                 globals_source=None):
        self.code = code
        self.f_globals = f_globals
        # Where its globals are read from (None: the root function's, G): a function made
        # inside an inlined function of another module reads that module's globals.
        self.globals_source = globals_source
        self.defaults = defaults  # tuple of VT
        self.kwdefaults = kwdefaults  # dict name -> VT
        self.closure = closure  # tuple of CellVar
        self.name = name

    def __repr__(self):
        return f"function {self.code.co_name} (made in the frame)"


class MethodVar(VT):
    """`obj.method` where obj is symbolic: a function plus the self it is bound to."""

    def __init__(self, fn, self_vt: VT, name: str):
        self.fn = fn  # a Python function or a tensor-method name (str) for TensorVar
        self.self_vt = self_vt
        self.name = name

    def __repr__(self):
        return f"method {self.name} of {self.self_vt!r}"


class ObjectVar(VT):
    """An object of a plain Python class made while tracing (Note [Objects made in the
    frame], refcomp/tracer/objects.py): its class, the class as the trace read it
    (`cls_vt`: class attributes are read through it, under its guards) and the instance
    attributes stored so far."""

    def __init__(self, cls: type, cls_vt: VT, attrs: dict | None = None):
        self.cls, self.cls_vt = cls, cls_vt
        self.attrs = dict(attrs or {})

    def python_type(self):
        return self.cls

    def __repr__(self):
        return f"a {self.cls.__name__} made in the frame"


class PartialVar(VT):
    """`functools.partial(fn, *args, **kwargs)` made inside the trace: a call prepends
    `args` and merges `kwargs` (a partial read from a source is unpacked into one of
    these with its parts guarded)."""

    def __init__(self, fn: VT, args: list, kwargs: dict):
        self.fn, self.args, self.kwargs = fn, list(args), dict(kwargs)


class SuperVar(VT):
    """`super()` (or `super(cls, obj)`) made inside the trace: attribute reads look `name`
    up in `type(obj).__mro__` after `cls` and bind what they find to `obj`."""

    def __init__(self, cls: type, obj: VT):
        self.cls, self.obj = cls, obj

    def __repr__(self):
        return f"super({self.cls.__name__}, {self.obj!r})"


class ContextTokenVar(VT):
    """The Token of a `ContextVar.set(value)` the trace recorded (Note [Context variables],
    refcomp/tracer/methods.py): `effect` is the recorded set, `reset` marks it undone."""

    def __init__(self, var: VT, value: VT, effect):
        self.var, self.value, self.effect = var, value, effect
        self.reset = False

    def __repr__(self):
        return "ContextVar token"


class GradModeVar(VT):
    """`torch.no_grad()` / `torch.enable_grad()` / `set_grad_enabled(b)` as a context."""

    def __init__(self, enabled: bool, applied: bool = False, previous: bool = True):
        self.enabled = enabled
        self.applied = applied  # set_grad_enabled(b) takes effect at the call, not at `with`
        self.previous = previous


class ExitVar(VT):
    """The `__exit__` that BEFORE_WITH leaves on the stack: restores grad mode."""

    def __init__(self, previous: bool):
        self.previous = previous


def is_const(vt: VT) -> bool:
    return isinstance(vt, ConstVar)


def make_tuple(cls, items: tuple):
    """A tuple of class `cls` holding `items`: a namedtuple takes them as arguments, a
    structseq (`torch.return_types.max`) or torch.Size as one sequence."""
    if cls is tuple:
        return tuple(items)
    if hasattr(cls, "_fields") and hasattr(cls, "_make"):
        return cls._make(items)
    return cls(items)


def size_type() -> type:
    """torch.Size (imported late: this module does not need torch otherwise)."""
    import torch

    return torch.Size


def sequence_of(vt: VT):
    """A TupleVar/ListVar, or a ConstVar holding a tuple/list (`(2,)` from LOAD_CONST, a
    static torch.Size) as one of constants; else None."""
    if isinstance(vt, (TupleVar, ListVar)):
        return vt
    if isinstance(vt, ConstVar) and type(vt.value) in (tuple, list, size_type()):
        items = [ConstVar(v) for v in vt.value]
        return ListVar(items) if type(vt.value) is list else TupleVar(items, cls=type(vt.value))
    return None


def as_python(vt: VT, keep_tensors: bool = False):
    """The Python value of a constant or a container of constants; TypeError otherwise.

    With `keep_tensors`, TensorVars stay as they are (arguments for a torch call).
    """
    if keep_tensors and isinstance(vt, TensorVar):
        return vt
    if keep_tensors and hasattr(vt, "as_argument"):  # Note [Dynamic floats]
        return vt.as_argument()
    if isinstance(vt, ConstVar):
        return vt.value
    if isinstance(vt, TupleVar):
        items = tuple(as_python(i, keep_tensors) for i in vt.items)
        if vt.cls is tuple or vt.cls is size_type() and any(type(i) is not int
                                                            for i in items):
            return items  # a torch.Size with symbolic sizes: a tuple while tracing
        return make_tuple(vt.cls, items)
    if isinstance(vt, ListVar):
        return [as_python(i, keep_tensors) for i in vt.items]
    if isinstance(vt, ModelOutputVar):
        raise TypeError(f"{vt!r} is not a constant")
    if isinstance(vt, DictVar):
        return {k: as_python(v, keep_tensors) for k, v in vt.items.items()}
    raise TypeError(f"{vt!r} has no constant Python value")


# --- automatic dynamic floats (Note [Dynamic floats], refcomp/tracer/dynamic_floats.py) ---
class PinFloat(BaseException):
    """Trace again with the dynamic floats at `roots` (source names) static.  A
    BaseException, so that no `except Exception` of the tracer takes it for a failure of
    the program: `CompiledFunction._build_entry` catches it."""

    def __init__(self, roots, why: str):
        super().__init__(why)
        self.roots = tuple(roots)
        self.why = why


class DynamicFloatVar(ConstVar):
    """A Python float whose value is the 0-d float64 TensorVar `tensor` (Note [Dynamic
    floats]).  `traced`: its value while tracing (for dtypes only, never for a result);
    `roots`: the names of the dynamic float sources it is computed from."""

    def __init__(self, tensor: TensorVar, traced: float, source=None, roots=()):
        self.tensor = tensor
        self.traced = traced
        self.source = source
        self.roots = tuple(roots)

    @property
    def value(self):
        raise PinFloat(self.roots, f"a use of {self!r} that needs its value")

    def python_type(self):
        return float

    def as_argument(self):
        return FloatArg(self)

    def __repr__(self):
        if self.source is not None:
            return self.source.name()
        return "a float computed from " + ", ".join(self.roots)


class FloatArg:
    """A DynamicFloatVar as an argument of a torch call (`unwrap`): the binary builders
    make it an operand (`binary_operands`); any other builder refuses it (PinFloat)."""

    def __init__(self, var: DynamicFloatVar):
        self.var = var
        self.traced = var.traced
