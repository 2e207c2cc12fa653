"""The backend registry: how refcomp.compile turns an optimized graph into a callable.

A backend is a factory `compile_graph(graph, options) -> CompiledFn`, where
`CompiledFn(*tensors) -> list[torch.Tensor]` takes the graph's inputs as tensors (in
graph-input order) and returns its outputs. `differentiable` says whether the compiled
function records autograd; refcomp hands graphs that need gradients to a differentiable
backend (see spec/runtime.md). `inputs_guarded` says whether `compile_graph` takes the
option of that name: per graph input, whether the caller guarantees its shape, dtype and
contiguity (See Note [Guarded inputs] in codegen/runtime.py). A backend may return
outputs that are new tensors or views of its inputs and of each other (the `interp`
backend's are new, one per distinct value): refcomp rebuilds the outputs that eager
returns as views of other outputs itself (Note [Views of outputs] in
spec/correctness.md). `row_major` says that every output that is no view is row-major
(kernels write row-major buffers); where a backend does not say so (it runs ATen ops,
which follow their operands' memory order), refcomp makes an output row-major where
eager's is (Note [Output layout] in refcomp/runtime.py).
Spec: spec/codegen.md, "Backends".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ir.graph import Graph

CompiledFn = Callable[..., list]


@dataclass(frozen=True)
class Backend:
    name: str
    compile_graph: Callable[[Graph, dict], CompiledFn]
    differentiable: bool = False
    doc: str = ""
    inputs_guarded: bool = False
    row_major: bool = False
    options: tuple = ()  # the `backend_options` names compile_graph accepts


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    if backend.name in _BACKENDS:
        raise ValueError(f"backend {backend.name!r} is registered twice")
    _BACKENDS[backend.name] = backend
    return backend


def get_backend(name) -> Backend:
    """The backend called `name`, or, for a callable `name(gm, example_inputs)`, a backend
    that hands it each graph as a torch.fx.GraphModule (codegen/fx.py)."""
    if not isinstance(name, str):
        if callable(name):
            from codegen.fx import callable_backend

            return callable_backend(name)
        raise TypeError(f"backend must be a name or a callable (gm, example_inputs) -> "
                        f"callable, not {type(name).__name__}")
    _load_builtin()
    try:
        return _BACKENDS[name]
    except KeyError:
        valid = ", ".join(sorted(_BACKENDS))
        raise ValueError(f"unknown backend {name!r}; valid backends: {valid}") from None


def available_backends() -> list[str]:
    _load_builtin()
    return sorted(_BACKENDS)


# Modules under codegen/ that register a backend when imported.
BUILTIN_BACKEND_MODULES = ("codegen.interp", "codegen.eager", "codegen.llvm.backend",
                           "codegen.triton.backend")


def _load_builtin() -> None:
    import importlib

    for module in BUILTIN_BACKEND_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            if not module.startswith(e.name or "\0"):
                raise
