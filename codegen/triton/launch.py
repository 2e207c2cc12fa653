"""Loading generated Triton modules and launching their kernels.

Owns: the module cache directory (`cache_dir`), `load_module` (source -> the
imported module, in interpreter mode when refcomp runs Triton on the CPU),
`compile_kernel` (Kernel -> `Launcher`, cached by the kernel's printed form; counted
in codegen.stats as kernels compiled or cache hits), `compile_for_gpu` (ahead-of-time
compilation for an NVIDIA target with no GPU present: the tests' check) and
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

from codegen import dumps, stats
from codegen.kernel import Kernel, print_kernel
from codegen.triton import check_interpreted, interpret_scope, interpreting, load_triton
from codegen.triton.emit import MAX_RBLOCK, SplitKernel, TritonKernel, emit_kernel, emit_split

log = logging.getLogger("refcomp.codegen.triton")

_KERNELS: dict = {}  # (printed kernel, max_rblock) -> Launcher


def cache_dir() -> Path:
    """Where generated modules are written (created on first use)."""
    default = Path(tempfile.gettempdir()) / f"refcomp-triton-{os.getuid()}"
    path = Path(os.environ.get("REFCOMP_TRITON_CACHE", default))
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_module(name: str, source: str, interpret: bool | None = None):
    """Write `source` to `<cache_dir>/<name>.py` (if not there yet) and import it, its
    functions interpreted if `interpret` (default: `interpreting()`)."""
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
    with interpret_scope(interpret):
        spec.loader.exec_module(module)
    if (interpreting() if interpret is None else interpret) and hasattr(module, "_sum_tree"):
        # Note [Interpreted sums]: Triton's interpreter folds a `tl.reduce` left to right in
        # Python, one call per element (n eps rounding error, and slow), unless its combiner
        # is Triton's own add, which it computes with numpy's pairwise sum (it never calls
        # it).  On a GPU both are the same tree, so an interpreted module's reductions name
        # Triton's add; `_sum`, called elementwise, stays the module's own.
        import triton.language as tl

        module._sum_tree = tl.standard._sum_combine
    sys.modules[module_name] = module
    return module


class Launcher:
    """`launcher(*tensors, values=())`: run the kernel on contiguous buffers (inputs, then
    outputs); `values` are the ints of the kernel's size symbols (`params`), in order."""

    def __init__(self, emitted: TritonKernel, fn):
        self.emitted = emitted
        self.fn = fn
        self.params = emitted.params
        self.sizes = [v for _, v in emitted.sizes]
        self.blocks = dict(emitted.blocks)
        self.grid = (emitted.grid,)

    @property
    def source(self) -> str:
        return self.emitted.source

    def __call__(self, *tensors, values=()) -> None:
        if not self.params:
            if self.emitted.grid == 0:
                return  # an empty iteration space: nothing to compute
            self.fn[self.grid](*tensors, *self.sizes, **self.blocks)
            return
        sizes, blocks, grid = self.emitted.plan(*values)
        if grid > 0:
            self.fn[(grid,)](*tensors, *sizes, *values, **blocks)


class SplitLauncher:
    """A split reduction's launches (Note [Split reductions] in emit.py), the same call as
    `Launcher`'s: `launcher(*tensors)`, buffers inputs then outputs (static kernels only)."""

    def __init__(self, emitted: SplitKernel, module, buffers: list):
        self.emitted = emitted
        self.params = ()
        self.buffers = buffers
        self.calls = [(getattr(module, launch.fn), launch) for launch in emitted.launches]

    @property
    def source(self) -> str:
        return self.emitted.source

    def __call__(self, *tensors, values=()) -> None:
        import torch

        from codegen.torch_bridge import torch_dtype

        device = tensors[0].device if tensors else None
        env = dict(zip(self.buffers, tensors))
        for name, dtype, numel in self.emitted.workspace:
            env[name] = torch.empty(numel, dtype=torch_dtype(dtype), device=device)
        for fn, launch in self.calls:
            fn[(launch.grid,)](*[env[a] for a in launch.args], **dict(launch.blocks))


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
    split = emit_split(kernel, name, max_rblock)  # Note [Split reductions]
    emitted = split or emit_kernel(kernel, name, max_rblock)
    log.debug("triton kernel %s:\n%s", name, emitted.source)
    dumps.emit("triton", name, emitted.source)
    module = load_module(name, emitted.source)
    if split is not None:
        for launch in split.launches:
            check_interpreted(getattr(module, launch.fn))
        launcher = SplitLauncher(split, module, [b.name for b in kernel.buffers])
    else:
        fn = getattr(module, name)
        check_interpreted(fn)
        launcher = Launcher(emitted, fn)
    _KERNELS[key] = launcher
    stats.STATS.kernels_compiled += 1
    return launcher


# Triton's signature names of refcomp's storage dtypes (pointers to them).
_SIGNATURE = {"bool": "*i1", "u8": "*u8", "i8": "*i8", "i16": "*i16", "i32": "*i32",
              "i64": "*i64", "f16": "*fp16", "bf16": "*bf16", "f32": "*fp32", "f64": "*fp64"}


def compile_for_gpu(kernel: Kernel, max_rblock: int = MAX_RBLOCK, arch: int = 90):
    """Compile `kernel` ahead of time for an NVIDIA GPU of compute capability `arch`
    (sm_90: H100) with Triton's real compiler, down to a cubin; no GPU is needed.

    The interpreter accepts programs a GPU compiler rejects (loop-carried values
    whose type changes, for one), so tests use this to hold every generated kernel
    to the compiler that a GPU run would use.  Returns Triton's compiled kernel
    (`.asm` holds ttir, ttgir, llir, ptx, cubin).
    """
    triton = load_triton()
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    digest = hashlib.sha1(repr((print_kernel(kernel), max_rblock)).encode()).hexdigest()[:16]
    emitted = emit_kernel(kernel, f"k_{digest}", max_rblock)
    module = load_module(f"k_{digest}_gpu", emitted.source, interpret=False)
    signature = {b.name: _SIGNATURE[b.dtype.short] for b in kernel.buffers}
    signature.update({name: "i32" for name, _ in emitted.sizes})
    signature.update({str(p): "i32" for p in emitted.params})
    signature.update({name: "constexpr" for name, _ in emitted.blocks})
    source = ASTSource(getattr(module, emitted.name), signature,
                       constexprs=dict(emitted.blocks))
    return triton.compile(source, target=GPUTarget("cuda", arch, 32))


def compile_split_for_gpu(kernel: Kernel, max_rblock: int = MAX_RBLOCK, arch: int = 90):
    """`compile_for_gpu` for each launch of `kernel`'s split form (Note [Split reductions]
    in emit.py): the compiled kernels, in launch order; None when it is not split."""
    triton = load_triton()
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    digest = hashlib.sha1(repr((print_kernel(kernel), max_rblock)).encode()).hexdigest()[:16]
    split = emit_split(kernel, f"k_{digest}", max_rblock)
    if split is None:
        return None
    module = load_module(f"k_{digest}_split_gpu", split.source, interpret=False)
    types = {b.name: _SIGNATURE[b.dtype.short] for b in kernel.buffers}
    types.update({name: _SIGNATURE[dtype.short] for name, dtype, _ in split.workspace})
    compiled = []
    for launch in split.launches:
        signature = {a: types[a] for a in launch.args}
        signature.update({name: "constexpr" for name, _ in launch.blocks})
        source = ASTSource(getattr(module, launch.fn), signature,
                           constexprs=dict(launch.blocks))
        compiled.append(triton.compile(source, target=GPUTarget("cuda", arch, 32)))
    return compiled
