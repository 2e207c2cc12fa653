"""The "interp" backend: run the graph on the numpy reference interpreter.

The executable semantics as a backend: inputs become numpy arrays (detached, on
the CPU), `ir.run` evaluates the graph, and the results become fresh torch
tensors of the graph's declared dtypes on the declared devices.  Not
differentiable: refcomp hands graphs that need gradients to "eager".

Random ops draw from a numpy Generator seeded by one `torch.randint` draw per
call, so `torch.manual_seed` makes runs reproducible -- but the numbers differ
from eager PyTorch's (different generator and algorithm).  A graph without
random ops leaves torch's generator untouched.  Spec: spec/codegen.md, "Backends".
"""

from __future__ import annotations

import numpy as np
import torch

from codegen import opaque  # noqa: F401  (registers the `aten` op's executor)
from codegen.backends import Backend, register_backend
from codegen.torch_bridge import from_numpy, to_numpy
from ir.graph import Graph
from ir.interpreter import InterpreterError, run
from ir.ops.registry import RANDOM

_SEED_BOUND = 2**62


def compile_graph(graph: Graph, options: dict) -> callable:
    if options:
        raise ValueError(f"the interp backend takes no options, got {sorted(options)}")
    needs_rng = any(node.op.category == RANDOM for node in graph.walk())
    out_types = [v.type for v in graph.outputs]
    n_inputs = len(graph.inputs)

    def interp_fn(*tensors) -> list:
        if len(tensors) != n_inputs:
            raise TypeError(f"@{graph.name} takes {n_inputs} tensors, got {len(tensors)}")
        rng = None
        if needs_rng:
            seed = int(torch.randint(0, _SEED_BOUND, (), dtype=torch.int64))
            rng = np.random.default_rng(seed)
        try:
            arrays = run(graph, [to_numpy(t) for t in tensors], rng)
        except InterpreterError as e:
            if isinstance(e.__cause__, IndexError):  # an index out of range: eager's type
                raise IndexError(f"index out of range in self ({e})") from e
            raise
        return [from_numpy(a, t.dtype, t.device) for a, t in zip(arrays, out_types)]

    return interp_fn


INTERP = register_backend(Backend(
    "interp", compile_graph, differentiable=False,
    doc="the numpy reference interpreter (ir.run); slow, exact semantics",
))
