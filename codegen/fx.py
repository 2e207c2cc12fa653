"""FX interop, outward: an ir.Graph as a `torch.fx.GraphModule`, and callable backends.

Owns: `to_fx(graph)` (IR -> GraphModule whose nodes run each op as the "eager" backend
does) and `callable_backend(fn)`, which makes torch.compile's extension point work on
refcomp's frontend: `refcomp.compile(f, backend=fn)` hands every captured graph, exported
to FX, to `fn(gm, example_inputs)` and calls what it returns.

Each IR node becomes one `call_function` node whose target is the eager backend's step
for that node (codegen/eager.py `EAGER_OPS`): the same semantics, already tested
against the interpreter, so the exported module computes what the graph means.  Its
name is the op's (`add`, `softmax`, `fused_pointwise`), so `gm.code` reads like the IR.
Attributes with symbolic sizes are evaluated per call from the input shapes, as the
eager backend does (a `sizes` node holds them).  Spec: spec/codegen.md, "FX interop".
"""

from __future__ import annotations

import operator
import re
from typing import Callable

import torch
import torch.fx as fx

from codegen.backends import Backend
from codegen.eager import EAGER_OPS, _make_step, _symbol_bindings, _symbolic_attr_names
from ir.graph import Graph


def _named(fn: Callable, name: str) -> Callable:
    """`fn` as a module-level-looking function called `name`, for readable gm.code."""
    def step(*args, **kwargs):
        return fn(*args, **kwargs)
    step.__name__ = step.__qualname__ = name
    step.__module__ = "refcomp_ops"
    return step


_PLAIN = (int, float, bool, str, type(None))


class _NotPlain(Exception):
    pass


def _plain(value):
    """`value` as plain Python (sympy integers become ints), or _NotPlain."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, _PLAIN):
        return value
    if getattr(value, "is_Integer", False):
        return int(value)
    raise _NotPlain


def _plain_attrs(node):
    """The node's attributes as plain keywords for gm.code, or None (dtypes, symbols)."""
    try:
        return {k: _plain(v) for k, v in node.attrs.items()}
    except _NotPlain:
        return None


def _step_with_attrs(node) -> Callable:
    """A step taking the node's attributes as keywords, so gm.code shows them and an FX
    pass that edits them changes what runs (the eager maker is called per call)."""
    maker = EAGER_OPS[node.op.name]

    def step(*tensors, **attrs):
        return maker(node, attrs)(*tensors)
    return step


def _ident(name: str, used: set) -> str:
    base = re.sub(r"\W", "_", name or "x").strip("_") or "x"
    if base[0].isdigit():
        base = "v" + base
    out, k = base, 1
    while out in used:
        out, k = f"{base}_{k}", k + 1
    used.add(out)
    return out


def to_fx(graph: Graph) -> fx.GraphModule:
    """The graph as a GraphModule: placeholders in graph-input order, one call per node,
    and a tuple of the graph's outputs (as Dynamo's graphs return)."""
    g = fx.Graph()
    used: set = set()
    env = {}
    for v in graph.inputs:
        env[v] = g.placeholder(_ident(v.name, used))
    bindings = _symbol_bindings(graph)
    symbols = [s for s, _, _ in bindings]
    sizes = None
    if any(_symbolic_attr_names(n) and n.body is None for n in graph.nodes):
        def sizes_of(*xs, _where=tuple((i, d) for _, i, d in bindings)):
            return tuple(xs[i].shape[d] for i, d in _where)
        sizes = g.call_function(_named(sizes_of, "sizes"), tuple(env[v] for v in graph.inputs))
    for node in graph.nodes:
        name = node.op.name if node.body is None else f"fused_{node.attrs.get('kind', '')}"
        args = tuple(env[v] for v in node.inputs)
        kwargs = _plain_attrs(node) if node.body is None and \
            not _symbolic_attr_names(node) else None
        if kwargs is not None:
            step = _step_with_attrs(node)
        else:  # attributes baked in: symbolic sizes, dtypes, a fused body
            step = _make_step(node, symbols, {})
            if sizes is not None and _symbolic_attr_names(node) and node.body is None:
                args += (sizes,)
        call = g.call_function(_named(step, name), args, kwargs or {})
        if len(node.outputs) == 1:
            env[node.outputs[0]] = call
        else:
            for k, v in enumerate(node.outputs):
                env[v] = g.call_function(operator.getitem, (call, k))
    g.output(tuple(env[v] for v in graph.outputs))
    gm = fx.GraphModule(torch.nn.Module(), g, class_name=f"refcomp_{graph.name}")
    gm.recompile()
    return gm


_CALLABLE_BACKENDS: dict = {}


def callable_backend(fn: Callable) -> Backend:
    """A Backend that exports each graph to FX and compiles it with `fn(gm, inputs)`.

    As in torch.compile, `fn` gets the GraphModule and the first call's real input
    tensors, and returns a callable taking those tensors and returning the outputs (a
    tuple or list); `gm` itself is a valid answer.  The graph is handed over at its
    first call.  The result is taken to record autograd like the eager code `gm` runs
    (`differentiable=True`): a backend that computes outside autograd must say so by
    not being used on graphs that need gradients.
    """
    if fn in _CALLABLE_BACKENDS:
        return _CALLABLE_BACKENDS[fn]
    label = getattr(fn, "__name__", type(fn).__name__)

    def compile_graph(graph: Graph, options: dict):
        if options:
            raise ValueError(f"callable backend {label!r} takes no backend options; got "
                             f"{sorted(options)}")
        gm = to_fx(graph)
        state = {"compiled": None}

        def run(*tensors):
            compiled = state["compiled"]
            if compiled is None:
                compiled = state["compiled"] = fn(gm, list(tensors))
                if not callable(compiled):
                    raise TypeError(f"backend {label!r} returned {type(compiled).__name__}, "
                                    "not a callable")
            out = compiled(*tensors)
            return list(out) if isinstance(out, (tuple, list)) else [out]
        run.graph_module = gm
        return run

    backend = Backend(f"callable:{label}", compile_graph, differentiable=True,
                      doc=f"the user backend {label}(gm, example_inputs)")
    _CALLABLE_BACKENDS[fn] = backend
    return backend
