"""The reference interpreter: run a graph on numpy arrays.  The oracle; needs no torch.

Each node runs its op's `ref` on numpy arrays; the result is stored as the
node's declared dtype (bf16 rounded, see ir/types.py) and its shape is checked,
so a wrong type rule cannot hide.  Random ops draw from `rng` (a numpy Generator), or
through `draw` when given (the interp backend draws from torch's generator, so its
numbers are eager's: codegen/interp.py).  A fused node runs its body.
Spec: spec/ir.md, "Semantics".
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from ir.graph import Graph
from ir.ops.registry import RANDOM
from ir.types import is_symbolic, round_to_dtype


class InterpreterError(RuntimeError):
    pass


def run(graph: Graph, args: Sequence, rng: Optional[np.random.Generator] = None,
        draw: Optional[Callable[[str, dict], np.ndarray]] = None) -> list:
    """Evaluate `graph` on `args` (array-likes matching its inputs); return output arrays.

    `draw(op name, attrs)`, when given, makes each random node's result instead of the
    op's numpy reference drawing from `rng`.
    """
    if len(args) != len(graph.inputs):
        raise InterpreterError(f"@{graph.name} takes {len(graph.inputs)} inputs,"
                               f" got {len(args)}")
    env = {}
    sizes: dict = {}  # symbol -> bound size, checked for consistency
    for value, arg in zip(graph.inputs, args):
        array = round_to_dtype(np.asarray(arg), value.type.dtype)
        _bind_shape(value, array.shape, sizes)
        env[value] = array
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            operands = [env[v] for v in node.inputs]
            if node.body is not None:
                results = run(node.body, operands, rng, draw)
            else:
                extra = {"rng": rng} if node.op.category == RANDOM else {}
                if node.op.name == "aten":  # bf16 operands are f32 arrays: name their dtype
                    extra = {"operand_dtypes": tuple(v.type.dtype for v in node.inputs)}
                attrs = _concrete_attrs(node, sizes)
                try:
                    if draw is not None and node.op.category == RANDOM:
                        result = draw(node.op.name, attrs)
                    else:
                        result = node.op.ref(*operands, **attrs, **extra)
                except Exception as e:  # name the node, keep the cause
                    raise InterpreterError(f"{node.op.name} failed: {e}") from e
                results = list(result) if isinstance(result, tuple) else [result]
            for value, array in zip(node.outputs, results):
                array = round_to_dtype(np.asarray(array), value.type.dtype)
                _check_shape(node.op.name, value, array.shape, sizes)
                env[value] = array
    return [env[v] for v in graph.outputs]


def _concrete_attrs(node, sizes) -> dict:
    """Attributes with symbolic sizes evaluated at the sizes bound by the inputs."""
    attrs = dict(node.attrs)
    for name, spec in node.op.attrs.items():
        if spec.kind == "dims" and any(is_symbolic(d) for d in attrs[name]):
            attrs[name] = tuple(int(d.subs(sizes)) if is_symbolic(d) else d
                                for d in attrs[name])
        elif spec.kind == "dim" and is_symbolic(attrs[name]):
            attrs[name] = int(attrs[name].subs(sizes))
    return attrs


def _bind_shape(value, shape, sizes) -> None:
    expected = value.type.shape
    if len(shape) != len(expected):
        raise InterpreterError(f"input %{value.name} expects {value.type}, got shape {shape}")
    for dim, actual in zip(expected, shape):
        if is_symbolic(dim) and dim.is_Symbol:
            bound = sizes.setdefault(dim, actual)
            if bound != actual:
                raise InterpreterError(f"input %{value.name}: size {dim} is {bound} elsewhere,"
                                       f" {actual} here")
        elif not is_symbolic(dim) and dim != actual:
            raise InterpreterError(f"input %{value.name} expects {value.type}, got {shape}")


def _check_shape(op_name, value, shape, sizes) -> None:
    expected = value.type.shape
    concrete = []
    for dim in expected:
        concrete.append(int(dim.subs(sizes)) if is_symbolic(dim) else dim)
    if tuple(concrete) != tuple(shape):
        raise InterpreterError(f"{op_name} produced shape {tuple(shape)}, but its type is"
                               f" {value.type} (= {tuple(concrete)})")
