"""Loading generated Triton modules and launching their kernels.

Owns: the module cache directory (`cache_dir`), `load_module` (source -> the
imported module, in interpreter mode when refcomp runs Triton on the CPU),
`compile_kernel` (Kernel -> `Launcher`, cached by the kernel's printed form; counted
in codegen.stats as kernels compiled or cache hits) and
`Launcher` (`launcher(*tensors)` launches the kernel on the buffers, inputs
then outputs).  Must not know: graphs.  Spec: spec/codegen.md, "Triton".

Why files: `triton.jit` reads its function's source with `inspect.getsource`
(both the GPU compiler and the interpreter do), so a kernel must live in a real
file.  Each module is written once to `<cache_dir>/<name>.py`, named by a hash
of its source (atomically: write a temporary file, then rename), and imported
from there with importlib.  `REFCOMP_TRITON_CACHE` overrides the directory.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
import tempfile
from pathlib import Path

from codegen import stats
from codegen.kernel import Kernel, print_kernel
from codegen.triton import check_interpreted, interpret_scope, load_triton
from codegen.triton.emit import MAX_RBLOCK, TritonKernel, emit_kernel

log = logging.getLogger("refcomp.codegen.triton")

_KERNELS: dict = {}  # (printed kernel, max_rblock) -> Launcher


def cache_dir() -> Path:
    """Where generated modules are written (created on first use)."""
    default = Path(tempfile.gettempdir()) / f"refcomp-triton-{os.getuid()}"
    path = Path(os.environ.get("REFCOMP_TRITON_CACHE", default))
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_module(name: str, source: str):
    """Write `source` to `<cache_dir>/<name>.py` (if not there yet) and import it."""
    load_triton()
    path = cache_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    module_name = f"refcomp_triton_{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    with interpret_scope():
        spec.loader.exec_module(module)
    sys.modules[module_name] = module
    return module


class Launcher:
    """`launcher(*tensors)`: run the kernel on contiguous buffers (inputs, then outputs)."""

    def __init__(self, emitted: TritonKernel, fn):
        self.emitted = emitted
        self.fn = fn
        self.sizes = [v for _, v in emitted.sizes]
        self.blocks = dict(emitted.blocks)
        self.grid = (emitted.grid,)

    @property
    def source(self) -> str:
        return self.emitted.source

    def __call__(self, *tensors) -> None:
        if self.emitted.grid == 0:
            return  # an empty iteration space: nothing to compute
        self.fn[self.grid](*tensors, *self.sizes, **self.blocks)


def compile_kernel(kernel: Kernel, max_rblock: int = MAX_RBLOCK) -> Launcher:
    """The launcher of `kernel`; the same printed kernel is emitted and loaded once.

    Raises NotImplementedError (from emission) for kernels Triton code is not
    generated for; the caller falls back.
    """
    key = (print_kernel(kernel), max_rblock)
    hit = _KERNELS.get(key)
    if hit is not None:
        stats.STATS.kernel_cache_hits += 1
        return hit
    digest = hashlib.sha1(repr(key).encode()).hexdigest()[:16]
    name = f"k_{digest}"
    emitted = emit_kernel(kernel, name, max_rblock)
    log.debug("triton kernel %s:\n%s", name, emitted.source)
    module = load_module(name, emitted.source)
    fn = getattr(module, name)
    check_interpreted(fn)
    launcher = Launcher(emitted, fn)
    _KERNELS[key] = launcher
    stats.STATS.kernels_compiled += 1
    return launcher
