"""The "interp" backend: run the graph on the numpy reference interpreter.

The executable semantics as a backend: inputs become numpy arrays (detached, on
the CPU), `ir.run` evaluates the graph, and the results become fresh torch
tensors of the graph's declared dtypes on the declared devices (one per distinct
value: a value at two outputs is one tensor).  Not
differentiable: refcomp hands graphs that need gradients to "eager".

Random ops (`rand randn dropout_mask`) draw from torch's default generator exactly
as the eager backend draws them (its makers in codegen/eager.py are the one
definition), so a compiled call draws eager's numbers and leaves the generator where
eager leaves it.  Spec: spec/codegen.md, "Backends".
"""

from __future__ import annotations

import numpy as np

from codegen import opaque  # noqa: F401  (registers the `aten` op's executor)
from codegen.backends import Backend, register_backend
from codegen.eager import EAGER_OPS
from codegen.torch_bridge import from_numpy, to_numpy
from ir.graph import Graph
from ir.interpreter import InterpreterError, run

_TORCH_ERRORS = (RuntimeError, NotImplementedError, ValueError, TypeError)


def torch_draw(op_name: str, attrs: dict) -> np.ndarray:
    """A random node's result drawn by torch as the eager backend draws it."""
    return to_numpy(EAGER_OPS[op_name](None, attrs)())


def compile_graph(graph: Graph, options: dict) -> callable:
    if options:
        raise ValueError(f"the interp backend takes no options, got {sorted(options)}")
    out_types = [v.type for v in graph.outputs]
    n_inputs = len(graph.inputs)

    def interp_fn(*tensors) -> list:
        if len(tensors) != n_inputs:
            raise TypeError(f"@{graph.name} takes {n_inputs} tensors, got {len(tensors)}")
        try:
            arrays = run(graph, [to_numpy(t) for t in tensors], draw=torch_draw)
        except InterpreterError as e:
            cause = e.__cause__
            if isinstance(cause, IndexError):  # an index out of range: eager's type
                raise IndexError(f"index out of range in self ({e})") from e
            if str(e).startswith("aten failed") and type(cause) in _TORCH_ERRORS:
                # torch raised it (an `aten` node runs torch itself): eager raises the
                # same type, not the interpreter's RuntimeError subclass
                raise type(cause)(str(cause)) from e
            raise
        # One tensor per distinct value: a value at two outputs is one tensor, as a kernel
        # backend's one buffer, so the graph output a compiled Function saves for its
        # backward is the tensor the caller holds, and autograd's version check sees the
        # caller's in-place change (corpus grad_modified_0d_max_result_missed_raise_interp).
        made: dict = {}
        for v, a, t in zip(graph.outputs, arrays, out_types):
            if v not in made:
                made[v] = from_numpy(a, t.dtype, t.device)
        return [made[v] for v in graph.outputs]

    return interp_fn


INTERP = register_backend(Backend(
    "interp", compile_graph, differentiable=False,
    doc="the numpy reference interpreter (ir.run); slow, exact semantics",
))
