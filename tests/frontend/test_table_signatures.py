"""Every torch-table entry against torch's own signature: no argument is silently dropped.

For each callable in `refcomp.tracer.torch_table.TABLE`, torch's parameters (the
aten schemas of its Tensor overloads, or the Python signature of a `torch.nn.functional`
function) are walked.  Each parameter must be handled: the builder has a parameter
at the same position (positional parameters) or of the same name (keyword-only
ones) that its code reads.  A parameter the builder has no slot for makes the builder
call fail, and `call_torch` turns that into a graph break whose reason names the
parameter (checked by calling).  A parameter read but deliberately without effect is
listed in IGNORED with the reason.  (spec/correctness.md, "Arguments".)
"""

import dis
import inspect
import operator

import pytest
import torch

import refcomp
from refcomp.tracer.torch_table import TABLE

# (torch parameter name) -> why a builder may accept it and do nothing with it.
IGNORED = {
    "memory_format": "the IR has no layouts: a memory format changes strides, never values",
    "_stacklevel": "a warning's stack level",
    "non_blocking": "one device per graph: nothing to overlap",
    "pin_memory": "CPU pinning changes no value",
    "layout": "only strided tensors are traced (the meta call refuses others)",
    "implicit": "expand(implicit=True) is a tracing hint of torch.jit",
    "sparse": "embedding(sparse=True) changes only the gradient's layout",
    "scale_grad_by_freq": "changes only the gradient (backward is torch's)",
    "padding_idx": "embedding(padding_idx=) changes only the gradient",
    "norm_type": "embedding(norm_type=) is used only with max_norm, which breaks",
    "momentum": "batch_norm(momentum=) is used only in training mode, which breaks",
}


def _reads(code) -> set:
    names = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_FAST_CHECK"):
            names.add(ins.argval)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _reads(const)
    return names


def _torch_params(fn):
    """[(position or None, name)] for torch's parameters after the first (self/input),
    position None for keyword-only ones; None when torch publishes no signature."""
    if isinstance(fn, type(operator.add)) and getattr(fn, "__module__", "") == "_operator":
        return None  # operator.add(a, b): both positional, fixed arity
    if inspect.isfunction(fn):  # torch.nn.functional and other Python functions
        params = list(inspect.signature(fn).parameters.values())[1:]
        return [(None if p.kind == p.KEYWORD_ONLY else i + 1, p.name) for i, p in
                enumerate(params) if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    name = fn.__name__
    out = set()
    for schema in torch._C._jit_get_schemas_for_operator(f"aten::{name}"):
        args = schema.arguments
        if not args or not str(args[0].type).startswith("Tensor") or \
                any(a.is_out for a in args) or any("Dimname" in str(a.type) for a in args):
            continue
        for i, a in enumerate(args[1:], start=1):
            out.add((None if a.kwarg_only else i, a.name))
    return sorted(out, key=lambda p: (p[0] is None, p[0] or 0, p[1])) if out else None


def _entries():
    seen = {}
    for fn, e in TABLE.items():
        if e.build is None or e.host:
            continue  # python queries answer from meta; host ops always break
        seen.setdefault(id(fn), (fn, e))
    return [pytest.param(fn, e, id=f"{getattr(fn, '__qualname__', fn)}") for fn, e in
            seen.values()]


def _unhandled(fn, e):
    params = _torch_params(fn)
    if params is None:
        return []
    sig = inspect.signature(e.build)
    bparams = list(sig.parameters.values())[1:]  # after ctx
    positional = [p for p in bparams if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_pos = next((p for p in bparams if p.kind == p.VAR_POSITIONAL), None)
    by_name = {p.name: p for p in bparams if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                         p.KEYWORD_ONLY)}
    var_kw = next((p for p in bparams if p.kind == p.VAR_KEYWORD), None)
    reads = _reads(e.build.__code__)
    bad = []
    for pos, name in params:
        if name in IGNORED or name in getattr(e.build, "from_meta", ()):
            continue
        if pos is not None:  # positional in torch: the builder's slot at that position
            if pos < len(positional):
                slot = positional[pos]
                ok = slot.name in reads
            elif var_pos is not None:
                ok = var_pos.name in reads and getattr(e.build, "handles_varargs", False)
            else:
                ok = None  # no slot: the call fails to bind -> break (checked below)
        else:
            slot = by_name.get(name)
            if slot is not None:
                ok = slot.name in reads
            elif var_kw is not None:
                ok = name in getattr(e.build, "handles_kwargs", ())
            else:
                ok = None
        if ok is False:
            bad.append(name)
    return bad


@pytest.mark.parametrize("fn, e", _entries())
def test_every_torch_parameter_is_handled(fn, e):
    assert _unhandled(fn, e) == [], "parameters accepted but not used by the builder"


@pytest.mark.parametrize("fn, e", _entries())
def test_every_builder_parameter_is_read(fn, e):
    """A builder parameter its code never reads is an argument dropped on the floor."""
    reads = _reads(e.build.__code__)
    # After ctx; the first operand is handed to the result marker (clone, casts...).
    params = list(inspect.signature(e.build).parameters.values())[2:]
    unread = [p.name for p in params if p.name not in reads and p.name not in IGNORED
              and p.name not in getattr(e.build, "from_meta", ())]
    assert unread == []


@pytest.mark.parametrize("call, arg", [
    (lambda x: torch.round(x, decimals=3), None),
    (lambda x: x.round(decimals=2), None),
])
@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_round_decimals(call, arg, backend):
    refcomp.reset()
    x = torch.randn(5, 7) * 10
    torch.testing.assert_close(refcomp.compile(call, backend=backend)(x), call(x))


def test_a_parameter_without_a_slot_becomes_an_opaque_call():
    """torch.add(x, other=y): the builder's second slot is positional `b`, so the keyword
    does not bind (RB013 in the table); the call lands in the graph as an opaque torch
    call instead of breaking (spec/tracer.md, "Opaque torch calls")."""
    refcomp.reset()
    f = lambda x, y: torch.add(x, other=y, alpha=2)  # noqa: E731
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(refcomp.compile(f, backend="interp")(x, y), f(x, y))
    report = refcomp.explain(f)(x, y)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert 'fn="torch.add"' in report.graphs[0] and "other=T[1]" in report.graphs[0]
