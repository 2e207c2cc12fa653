"""The LLVM JIT: host target machine, O3 pipeline, MCJIT engines, the kernel cache.

Owns: the one host `TargetMachine` (created once: it is slow to make), optimizing
and compiling an `llvmlite.ir.Module` into machine code (`compile_module`), and
the in-memory cache from a kernel's printed form to its compiled entry point.
Must not know: Kernels' meaning, graphs, torch.  Spec: spec/codegen.md, "LLVM".

Engines are kept alive for the life of the process (their code is referenced by
cached entry points); one engine holds every new kernel of one graph.
"""

from __future__ import annotations

import ctypes
import threading

import llvmlite.binding as llvm
import llvmlite.ir as lir

from codegen import diskcache, dumps
from codegen.stats import stage

_lock = threading.Lock()
_state: dict = {}
_engines: list = []  # keeps compiled code alive
_cache: dict = {}  # printed kernel -> (symbol, address)
# Note [Vector width by the narrowest type]: LLVM's loop vectorizer sizes its vectors
# by the widest type in a loop by default.  A tiled outer reduction (Note [Outer
# reductions], emit.py) keeps f64 lane accumulators (Note [Wide sums]) beside f32
# math, so its loop runs 8 floats per vector where a pointwise loop runs 16 (the GELU
# gradient with its bias gradient: 2.5 ms for [1024, 1024] against 1.2 ms for the
# gradient alone).  `-vectorizer-maximize-bandwidth` picked the width by the narrowest
# type (1.6 ms there), but it made LLVM's optimizer run for minutes on small `any`
# reductions (`x.any(0)` of a float32 [4, 2]: 91 s; found by the fuzzer's soak), so it
# is off: a compile that hangs is worse than a slower outer reduction.  Options here
# are process-wide for LLVM and part of the disk cache key.
LLVM_OPTIONS: tuple = ()

# Note [Full-width AVX-512]: LLVM tunes Intel server CPUs with AVX-512 (skylake-avx512 ..
# emeraldrapids) to prefer 256-bit vectors (the `prefer-256-bit` tuning feature), against
# the clock drop 512-bit code once caused; AMD's znver4/5 prefer 512.  Refcomp's kernels
# are memory- or vector-math-bound loops that gain from the full width: on an
# emeraldrapids host (1 thread), softmax [4096, 1024] 3.9 -> 3.0 ms and the 14-op
# transcendental chain on 4M f32 45 -> 26 ms.  So where the host has AVX-512F the
# target machine is made with that tuning feature off.  The same operations run, only in
# wider vectors (sums are reassociated as before: Note [Wide sums] in emit.py).
FULL_WIDTH_TUNING = "-prefer-256-bit"


def host_has_avx512() -> bool:
    """Whether the host has AVX-512F (Note [Full-width AVX-512], Note [exp's 2^n])."""
    return "+avx512f" in llvm.get_host_cpu_features().flatten().split(",")


def host_features() -> str:
    """The host CPU's features for the target machine (Note [Full-width AVX-512])."""
    features = llvm.get_host_cpu_features().flatten()
    if host_has_avx512():
        features += "," + FULL_WIDTH_TUNING
    return features


def target_machine() -> llvm.TargetMachine:
    """The host target machine: its CPU name and features, O3, JIT code model."""
    if "tm" not in _state:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        for option in LLVM_OPTIONS:
            llvm.set_option("", option)
        target = llvm.Target.from_default_triple()
        _state["tm"] = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=host_features(),
            opt=3, codemodel="jitdefault")
        _state["triple"] = llvm.get_process_triple()
    return _state["tm"]


def new_module(name: str) -> lir.Module:
    tm = target_machine()
    module = lir.Module(name=name)
    module.triple = _state["triple"]
    module.data_layout = str(tm.target_data)
    return module


def cached(key: str):
    """The (symbol, address) of an already compiled kernel with this printed form, or None."""
    return _cache.get(key)


def _disk_key(text: str) -> str:
    """Everything that decides the machine code of `text` (See Note [Disk cache safety])."""
    import llvmlite

    tm = target_machine()
    return "\n".join(["llvm-object", llvmlite.__version__, _state["triple"],
                      tm.target_data.__str__(), llvm.get_host_cpu_name(),
                      host_features(), *LLVM_OPTIONS, text])


def compile_module(module: lir.Module, keys: dict) -> tuple[dict, bool]:
    """Optimize (O3, host features) and JIT `module`; return ({symbol: address}, from_disk).

    `keys` maps each function symbol to its kernel's printed form, for the cache.  The
    object code is also kept in the on-disk cache (codegen/diskcache.py), keyed by the
    module's text and the target: a later process loads it instead of optimizing and
    generating code again, and `from_disk` says so.
    """
    tm = target_machine()
    with _lock, stage("llvm"):
        text = str(module)
        dumps.emit("llvm_ir", module.name, text)
        parsed = llvm.parse_assembly(text)
        parsed.verify()
        disk_key = _disk_key(text) if diskcache.enabled() else None
        stored = diskcache.get(disk_key) if disk_key is not None else None
        if stored is not None:
            # MCJIT asks the object cache before generating code: the stored object is
            # loaded as it is, so neither the O3 pipeline nor codegen runs.
            engine = llvm.create_mcjit_compiler(parsed, tm)
            engine.set_object_cache(getbuffer_func=lambda _module: stored)
            engine.finalize_object()
            dumps.emit("llvm_ir_opt", module.name, "; loaded from the disk cache: not optimized"
                       " in this process")
            return _addresses(engine, keys, parsed), True
        pto = llvm.PipelineTuningOptions(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pto.loop_interleaving = True
        builder = llvm.create_pass_builder(tm, pto)
        builder.getModulePassManager().run(parsed, builder)
        if dumps.wanted("llvm_ir_opt"):
            dumps.emit("llvm_ir_opt", module.name, str(parsed))
        if dumps.wanted("asm"):
            dumps.emit("asm", module.name, tm.emit_assembly(parsed))
        engine = llvm.create_mcjit_compiler(parsed, tm)
        if disk_key is not None:
            engine.set_object_cache(
                notify_func=lambda _module, obj: diskcache.put(disk_key, bytes(obj)))
        engine.finalize_object()
        return _addresses(engine, keys, parsed), False


def _addresses(engine, keys: dict, parsed) -> dict:
    """Keep `engine` alive, cache and return each kernel's entry point (under _lock)."""
    _engines.append(engine)
    out = {}
    for symbol, key in keys.items():
        address = engine.get_function_address(symbol)
        if not address:
            raise RuntimeError(f"LLVM produced no code for {symbol}")
        _cache[key] = (symbol, address)
        out[symbol] = address
    _state["last_ir"] = parsed
    return out


def optimized_ir() -> str:
    """The last optimized module as text (for debugging and the vectorization test)."""
    return str(_state.get("last_ir", ""))


# Note [Row bounds as pointers]: ctypes converts an int argument declared c_void_p in
# ~0.06 us and one declared c_int64 in ~0.15 us, per call, twice per launch.  On a 64-bit
# host a pointer and an i64 are passed alike (one integer register or stack slot, in the
# SysV and Windows x64 ABIs and AAPCS64), so the row bounds are declared as pointers
# there; elsewhere they stay c_int64.  Bounds are never negative.
_ROW = ctypes.c_void_p if ctypes.sizeof(ctypes.c_void_p) == 8 else ctypes.c_int64


def cfunc(address: int, n_buffers: int, n_sizes: int = 0):
    """A ctypes callable for `void kernel(ptr * n_buffers, i64 * n_sizes, i64 start, i64 end)`.

    ctypes releases the GIL during the call, so threads can run kernels in parallel.
    See Note [Row bounds as pointers]: the size arguments (never negative) are passed
    the same way.
    """
    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * n_buffers), *([_ROW] * n_sizes),
                             _ROW, _ROW)
    return proto(address)


def cache_size() -> int:
    return len(_cache)
