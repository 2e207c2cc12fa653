"""Classes made inside the traced code, and custom autograd Functions applied there.

Owns: `build_class` (LOAD_BUILD_CLASS + its call: `class Combine(torch.autograd.Function):
...` inside a function, as `torch.masked`'s reductions do), `ClassVar` (such a class,
symbolically: its namespace is what its body stored), and `Fn.apply` of an
autograd.Function subclass.  Spec: spec/tracer.md, "Classes made in the frame".

Note [Classes made in the frame]: the class body is traced like a function whose locals
are the namespace (LOAD_NAME / STORE_NAME); the class never exists as a Python object
while tracing.  What the trace may do with it (attributes, `Fn.apply` under no_grad) and
what breaks: spec/tracer.md, "Classes made in the frame".
"""

from __future__ import annotations

import builtins

import torch

from refcomp.reasons import TRACE_EXCEPTION, UNSUPPORTED_CALL, Unsupported
from refcomp.tracer.values import VT, ConstVar, FunctionVar, TensorVar, TupleVar


class ClassVar(VT):
    """A class created by the traced code: name, real bases and the traced namespace."""

    def __init__(self, name: str, bases: tuple, namespace: dict):
        self.name, self.bases, self.namespace = name, bases, namespace

    def python_type(self):
        return type

    def is_autograd_function(self) -> bool:
        return any(issubclass(b, torch.autograd.Function) for b in self.bases)

    def __repr__(self):
        return f"ClassVar({self.name})"


class StaticMethodVar(VT):
    """`staticmethod(f)` of a function the trace made (a class body's decorator)."""

    def __init__(self, fn: VT):
        self.fn = fn


class ApplyVar(VT):
    """`Fn.apply` of an autograd.Function subclass made in the frame."""

    def __init__(self, cls: ClassVar):
        self.cls = cls


class FunctionCtxVar(VT):
    """The `ctx` a custom Function's forward gets when no input requires grad."""

    def __init__(self, n_inputs: int):
        self.attrs: dict = {"needs_input_grad": TupleVar([ConstVar(False)] * n_inputs)}
        self.dirty: list = []  # mark_dirty(t): t itself is returned (modified in place)

    def call(self, name: str, args: list) -> ConstVar:
        if name == "mark_dirty":
            self.dirty.extend(args)
        return ConstVar(None)


# ctx methods that only prepare the backward: no effect when nothing requires grad.
CTX_NO_OPS = frozenset({"save_for_backward", "mark_non_differentiable", "mark_dirty",
                        "set_materialize_grads", "save_for_forward"})


def build_class(tx, args: list, kwargs: dict) -> ClassVar:
    """`__build_class__(body, name, *bases, **kw)` as LOAD_BUILD_CLASS's call does it."""
    if kwargs:
        raise Unsupported(UNSUPPORTED_CALL, f"class creation with keywords {sorted(kwargs)}"
                                   " (metaclass=...)")
    if len(args) < 2 or not isinstance(args[0], FunctionVar) or not isinstance(
            args[1], ConstVar) or not isinstance(args[1].value, str):
        raise Unsupported(UNSUPPORTED_CALL,
                          "__build_class__ called other than by a class statement")
    body, name = args[0], args[1].value
    bases = []
    for b in args[2:]:
        if not (isinstance(b, ConstVar) and isinstance(b.value, type)):
            raise Unsupported(UNSUPPORTED_CALL, f"class {name}: base {b!r} is not a class the trace"
                                       " read")
        if type(b.value) is not type and not issubclass(b.value, torch.autograd.Function):
            raise Unsupported(UNSUPPORTED_CALL, f"class {name}: base {b.value.__name__} has the"
                                       f" metaclass {type(b.value).__name__}")
        bases.append(b.value)
    if "__class__" in body.code.co_cellvars:
        raise Unsupported(UNSUPPORTED_CALL, f"class {name} uses __class__ or super() in its body")
    cells = dict(zip(body.code.co_freevars, body.closure))
    child = tx.child(body.code, body.f_globals, {}, cells, body.globals_source)
    child.class_body = True
    child.run()
    return ClassVar(name, tuple(bases) or (object,), dict(child.locals))


def class_attr(tx, cls: ClassVar, name: str) -> VT:
    if name in cls.namespace:
        value = cls.namespace[name]
        return value.fn if isinstance(value, StaticMethodVar) else value
    if name == "apply" and cls.is_autograd_function():
        return ApplyVar(cls)
    for base in cls.bases:
        for klass in base.__mro__:
            if name in vars(klass):
                return ConstVar(getattr(base, name))
    raise Unsupported(TRACE_EXCEPTION, f"type object {cls.name!r} has no attribute {name!r}")


def apply(tx, fn: ApplyVar, args: list, kwargs: dict) -> VT:
    """`Fn.apply(*args)`: forward inlined under no_grad (Note [Classes made in the frame])."""
    from refcomp.tracer import torch_table

    cls = fn.cls
    if kwargs:
        raise Unsupported(UNSUPPORTED_CALL, f"{cls.name}.apply with keyword arguments")
    tensors = [a for a in args if isinstance(a, TensorVar)]
    if tx.ctx.grad_enabled and any(t.requires_grad for t in tensors):
        raise Unsupported(UNSUPPORTED_CALL,
                          f"{cls.name}.apply (a custom autograd.Function defined in"
                                   " the frame) with an input that requires grad")
    if "setup_context" in cls.namespace:
        raise Unsupported(UNSUPPORTED_CALL, f"{cls.name}.apply: a forward with setup_context")
    forward = cls.namespace.get("forward")
    if forward is None:
        raise Unsupported(UNSUPPORTED_CALL, f"{cls.name}.apply without its own forward")
    forward = forward.fn if isinstance(forward, StaticMethodVar) else forward
    ctx = FunctionCtxVar(len(args))
    previous = tx.ctx.grad_enabled
    tx.ctx.set_grad_enabled(False)  # eager runs forward under no_grad
    try:
        out = tx.call_function(forward, [ctx] + list(args), {})
    finally:
        tx.ctx.set_grad_enabled(previous)

    def fresh(v):  # an input returned unchanged comes back as a new view of it
        if isinstance(v, TensorVar) and any(v is t for t in tensors) and \
                not any(v is d for d in ctx.dirty):
            return torch_table.call_torch(tx.ctx, torch.Tensor.view_as, [v, v], {})
        return v

    if isinstance(out, TupleVar):
        return TupleVar([fresh(v) for v in out.items], cls=out.cls)
    return fresh(out)


def ctx_attr(ctx: FunctionCtxVar, name: str) -> VT:
    from refcomp.tracer.values import MethodVar

    if name in CTX_NO_OPS:
        return MethodVar(name, ctx, name)
    if name in ctx.attrs:
        return ctx.attrs[name]
    raise Unsupported(UNSUPPORTED_CALL, f"ctx.{name} of a custom autograd.Function's forward")


def staticmethod_call(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported(TRACE_EXCEPTION, "staticmethod() takes one argument")
    if isinstance(args[0], ConstVar):
        return ConstVar(staticmethod(args[0].value))
    return StaticMethodVar(args[0])


BUILD_CLASS = builtins.__build_class__
