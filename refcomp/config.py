"""refcomp's options: names, defaults, validation.  Spec: spec/guards.md, "Options".

Owns: `OPTIONS` (every valid option with its default and meaning) and
`resolve_options`, which rejects unknown names with the list of valid ones.
Environment: REFCOMP_CACHE_SIZE_LIMIT overrides the default recompile limit.
"""

from __future__ import annotations

import os

from codegen.backends import available_backends

OPTIONS = {
    "cache_size_limit": (int(os.environ.get("REFCOMP_CACHE_SIZE_LIMIT", "8")),
                         "entries per code object before calls that miss run eagerly"),
    "guard_filter_fn": (None, "fn(list[Guard]) -> list[bool]: keep a guard where True "
                              "(drop the ones whose risk you accept)"),
    "passes": (None, "IR pass names to run on every graph (default: the pass manager's "
                     "DEFAULT_PIPELINE, restricted to registered passes)"),
    "backend_options": ({}, "dict passed to the backend's compile_graph"),
    "freeze": (False, "True: a module's parameters and buffers are compile-time values "
                      "(batch norms folded), guarded by identity and _version; for inference"),
}


def resolve_options(options) -> dict:
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        valid = ", ".join(sorted(OPTIONS))
        raise ValueError(f"unknown refcomp option(s) {unknown}; valid options: {valid}")
    out = {name: default for name, (default, _) in OPTIONS.items()}
    out.update(options)
    limit = out["cache_size_limit"]
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"cache_size_limit must be a positive int, got {limit!r}")
    if out["guard_filter_fn"] is not None and not callable(out["guard_filter_fn"]):
        raise ValueError("guard_filter_fn must be callable")
    if out["freeze"] not in (False, True) or not isinstance(out["freeze"], bool):
        raise ValueError(f"freeze must be True or False, got {out['freeze']!r}")
    return out


def default_backend(device: str = "cpu") -> str:
    """The backend used when `compile` is given none, chosen per graph by its device.

    CUDA tensors: "triton" when registered; CPU tensors: "llvm" when registered;
    otherwise "eager".  Resolved when a graph is built, so one compiled function
    follows its inputs' device.
    """
    wanted = "triton" if device.startswith("cuda") else "llvm"
    return wanted if wanted in available_backends() else "eager"
