"""torch's distributed wrappers around a compiled module: DDP's forward, FSDP2's hooks.

Owns: which modules' calls run torch's own code eagerly around a compiled forward (a
`DistributedDataParallel`; a module carrying hooks of `torch.distributed`, as `fully_shard`
installs), and the call that does it.  torch.compile does the same (DDP's forward and FSDP's
hooks are skipped; the user module's frame is compiled).  Spec: spec/autograd.md,
"DistributedDataParallel and FSDP2".
"""

from __future__ import annotations

import torch

_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")


def ddp_inner(mod):
    """The module a `DistributedDataParallel` runs in its forward, else None.  A subclass
    that overrides forward is compiled as it is."""
    if not torch.distributed.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel as DDP

    if isinstance(mod, DDP) and type(mod).forward is DDP.forward:
        return mod._modules["module"]
    return None


def has_distributed_hooks(mod) -> bool:
    """Does `mod` carry a hook of torch.distributed (FSDP2's pre/post-forward hooks, which
    all-gather and free the parameters)?  The tracer does not enter that code
    (inlining.INLINE_SKIP), so such a module runs its hooks eagerly around a compiled
    forward instead of running eagerly as a whole."""
    for name in _HOOK_DICTS:
        for hook in mod.__dict__[name].values():
            fn = getattr(hook, "func", hook)  # a functools.partial
            if (getattr(fn, "__module__", None) or "").startswith("torch.distributed"):
                return True
    return False


def call_with_forward(mod, forward, args, kwargs):
    """`mod(*args, **kwargs)` as Module.__call__ runs it, hooks included, with `forward`
    (a compiled frame of the module's forward) as its forward for this call only."""
    d = mod.__dict__
    held = d.get("forward", _MISSING)
    d["forward"] = forward
    try:
        return mod(*args, **kwargs)
    finally:
        if held is _MISSING:
            d.pop("forward", None)
        else:
            d["forward"] = held


def call_with_inner(wrapper, compiled_inner, args, kwargs):
    """`wrapper(*args, **kwargs)` (a DDP) with its inner module's place held by
    `compiled_inner` (the module's OptimizedModule) for this call only: DDP's forward runs
    eagerly (its reducer's bookkeeping, buffer broadcasts) and calls the compiled module."""
    modules = wrapper._modules
    inner = modules["module"]
    modules["module"] = compiled_inner
    try:
        return wrapper(*args, **kwargs)
    finally:
        modules["module"] = inner


_MISSING = object()
