"""refcomp's options: names, defaults, validation.  Spec: spec/guards.md, "Options".

Owns: `OPTIONS` (every valid option with its default and meaning) and
`resolve_options`, which rejects unknown names with the list of valid ones.
Environment: REFCOMP_CACHE_SIZE_LIMIT overrides the default recompile limit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from codegen.backends import available_backends, get_backend
from ir.passes.registry import all_passes

OPTIONS = {  # name -> (default, what it does): spec/guards.md's table "Options" is rendered from it
    "cache_size_limit": (int(os.environ.get("REFCOMP_CACHE_SIZE_LIMIT", "8")),
                         "entries per code object (default 8, env `REFCOMP_CACHE_SIZE_LIMIT`); "
                         "past it, calls that miss run eagerly"),
    "guard_filter_fn": (None, "`fn(guards) -> list[bool]`: keep a guard where True; dropping "
                              "one accepts its risk: a changed fact then reuses a stale graph"),
    "passes": (None, "IR passes run on every graph (default: the pass manager's "
                     "`DEFAULT_PIPELINE`, restricted to registered passes)"),
    "backend_options": ({}, "a dict handed to the backend's `compile_graph`"),
    "freeze": (False, "True: a module's parameters and buffers are compile-time values, "
                      "guarded by identity and `_version`, for inference (default False; "
                      "\"Freezing\" below)"),
}


def resolve_options(options, backend=None) -> dict:
    """The options with defaults filled in; a clear error naming any option that is
    unknown or has a value of the wrong kind.  `backend`: the backend name given to
    compile (None: the default backends), whose declared options `backend_options` may
    use."""
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"options must be a dict of option name -> value, got"
                        f" {type(options).__name__}; valid options: {', '.join(sorted(OPTIONS))}")
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
    _check_passes(out["passes"])
    _check_backend_options(out["backend_options"], backend)
    return out


def _check_passes(passes) -> None:
    """None, "fold,dce", or a list of registered pass names and callables Graph -> Graph."""
    if passes is None:
        return
    names = passes.split(",") if isinstance(passes, str) else passes
    if not isinstance(names, (list, tuple)):
        raise TypeError(f"options['passes'] must be a list of pass names (or one string"
                        f" 'fold,dce'), got {type(passes).__name__}")
    valid = all_passes()
    for name in names:
        if isinstance(name, str) and name.strip() in valid or \
                not isinstance(name, str) and callable(name):
            continue
        raise ValueError(f"options['passes']: unknown pass {name!r}; valid passes:"
                         f" {', '.join(sorted(valid))} (or a callable Graph -> Graph)")


def _check_backend_options(backend_options, backend) -> None:
    """Each key must be an option the backend declares (`Backend.options`)."""
    if not isinstance(backend_options, Mapping):
        raise TypeError(f"options['backend_options'] must be a dict, got"
                        f" {type(backend_options).__name__}")
    if not backend_options or (backend is not None and not isinstance(backend, str)):
        return  # a callable backend takes what its author decides
    names = [backend] if backend is not None else \
        [b for b in ("llvm", "triton") if b in available_backends()]
    valid = sorted({o for name in names for o in get_backend(name).options})
    unknown = sorted(set(backend_options) - set(valid))
    if unknown:
        raise ValueError(f"options['backend_options']: unknown option(s) {unknown} for"
                         f" backend {' or '.join(repr(n) for n in names)}; valid:"
                         f" {', '.join(valid) or 'none'}")


def default_backend(device: str = "cpu") -> str:
    """The backend used when `compile` is given none, chosen per graph by its device.

    CUDA tensors: "triton" when registered; CPU tensors: "llvm" when registered;
    otherwise "eager".  Resolved when a graph is built, so one compiled function
    follows its inputs' device.
    """
    wanted = "triton" if device.startswith("cuda") else "llvm"
    return wanted if wanted in available_backends() else "eager"
