"""The Triton GPU backend: Kernels -> Triton source -> launches on CUDA, or on the CPU
through Triton's interpreter.

Modules: scalar.py (ScalarOps as tl.* expressions, jit helpers), emit.py (Kernel ->
one @triton.jit function per module), launch.py (module files, loading, kernel
cache, launchers), backend.py (the registered "triton" backend).  This file owns
the one decision every other module defers to: whether kernels run on a GPU or
in the interpreter (`interpreting`, `interpret_scope`), and importing triton with
a clear error when it is missing (`load_triton`).  Spec: spec/codegen.md, "Triton".

Note [Interpreter mode]: Triton 3.x reads `TRITON_INTERPRET` through
`triton.knobs.runtime.interpret` each time `@triton.jit` decorates a function,
not when triton is imported: a function decorated while it is "1" becomes an
`InterpretedFunction`, which runs each program with numpy on host memory.  So
refcomp never changes the process environment for good: it sets
`TRITON_INTERPRET=1` only while it imports a generated module (`interpret_scope`),
whether or not triton was imported before, and checks that the kernels it got
are interpreted (a Triton version that read the flag at import time would fail
that check with an explanation, not run GPU code on CPU pointers).

Mode: interpreter when `TRITON_INTERPRET=1` is already set, or when torch sees
no CUDA device; otherwise kernels compile for the GPU.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os

INSTALL_HINT = ("the 'triton' backend needs the triton package: pip install -e '.[test]'"
                " (or pip install triton)")


def interpreting() -> bool:
    """True when Triton kernels run in Triton's interpreter (no GPU, or asked for)."""
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        return True
    import torch

    return not torch.cuda.is_available()


def load_triton():
    """Import and return triton; a clear ImportError naming the install extra if missing."""
    if importlib.util.find_spec("triton") is None:
        raise ImportError(INSTALL_HINT)
    import triton

    return triton


@contextlib.contextmanager
def interpret_scope(interpret: bool | None = None):
    """While active, `@triton.jit` makes interpreted functions if `interpret` (default:
    `interpreting()`), GPU-compiled ones otherwise."""
    interpret = interpreting() if interpret is None else interpret
    before = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = before


def check_interpreted(fn) -> None:
    """Raise if interpreter mode was wanted but `fn` was compiled for a GPU."""
    if not interpreting():
        return
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(fn, InterpretedFunction):
        raise RuntimeError(
            "refcomp needs Triton's interpreter (no CUDA device) but this Triton version"
            " decided the mode when it was imported: start Python with TRITON_INTERPRET=1"
            " in the environment (export TRITON_INTERPRET=1)")
