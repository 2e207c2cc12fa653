"""Global torch state a traced op's semantics depend on: snapshot, check, and what refcomp
does about it.

Owns: `snapshot()` (autocast enabled and dtype per device, the torch function mode
stack — which also holds `torch.set_default_device`'s mode —, the dispatch mode
stack, the deterministic-algorithms flags), the cheap check of the common state
(`is_plain`), a readable difference of two snapshots, and `eager_reason`: the state
under which a frame is not traced but run eagerly (Note [Global state]).  Grad mode
and the default dtype have their own guard kinds (refcomp/guard_kinds.py).  Spec:
spec/guards.md, "Global torch state".

Note [Global state]: a frame called under CPU autocast is traced with autocast's
casting rules applied to each op (Note [Autocast policy], refcomp/tracer/autocast.py)
and its graph runs with autocast off (`autocast_off`).  The tracer models neither
CUDA autocast nor a mode's `__torch_function__`/`__torch_dispatch__`, so a frame
called while one is active runs eagerly (torch applies them), with a reason naming
the state.  Either entry is guarded by the whole state, so leaving the `with` block
compiles again.  Never ignored: a graph traced without autocast is never run under
it, nor one traced under it without.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import torch

# Devices whose autocast state is part of the snapshot (torch keeps one per device type).
AUTOCAST_DEVICES = ("cpu", "cuda")

_any_autocast = torch._C._is_any_autocast_enabled
_len_function_modes = torch._C._len_torch_function_stack
_len_dispatch_modes = torch._C._len_torch_dispatch_stack
_deterministic = torch._C._get_deterministic_algorithms


class GlobalState(NamedTuple):
    autocast: tuple  # ((device, enabled, dtype), ...) for AUTOCAST_DEVICES
    function_modes: tuple  # type names of the torch function mode stack, innermost last
    dispatch_modes: int  # depth of the torch dispatch mode stack
    deterministic: bool
    deterministic_warn_only: bool
    fill_uninitialized: bool = False  # deterministic mode's NaN/max fill of `empty`


def _autocast(device: str) -> tuple:
    try:
        return (device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
    except RuntimeError:  # pragma: no cover - a torch build without this device type
        return (device, False, None)


def _function_modes() -> tuple:
    n = _len_function_modes()
    if not n:
        return ()
    from torch.overrides import _get_current_function_mode_stack

    return tuple(type(m).__name__ for m in _get_current_function_mode_stack())


# Each is falsy exactly when its part of the state is plain (`plain_now`).
PLAIN_CHECKS = (_len_function_modes, _len_dispatch_modes, _deterministic, _any_autocast)


def snapshot() -> GlobalState:
    return GlobalState(tuple(_autocast(d) for d in AUTOCAST_DEVICES), _function_modes(),
                       _len_dispatch_modes(), bool(_deterministic()),
                       bool(torch._C._get_deterministic_algorithms_warn_only()),
                       bool(_deterministic() and
                            torch.utils.deterministic.fill_uninitialized_memory))


def is_plain(state: GlobalState) -> bool:
    """No autocast, no modes, not deterministic: the state `plain_now` checks cheaply."""
    return (not any(on for _, on, _ in state.autocast) and not state.function_modes
            and not state.dispatch_modes and not state.deterministic)


def plain_now() -> bool:
    """`is_plain(snapshot())`, in four C calls (~0.1 us): what a guard checks per call."""
    return not any(f() for f in PLAIN_CHECKS)


def describe(state: GlobalState) -> str:
    parts = []
    for device, on, dtype in state.autocast:
        if on:
            parts.append(f"autocast({device}, {dtype})")
    if not any(on for _, on, _ in state.autocast):
        parts.append("autocast off")
    parts.append(f"torch function modes [{', '.join(state.function_modes)}]")
    parts.append(f"{state.dispatch_modes} dispatch mode(s)")
    parts.append("deterministic algorithms " + ("on" + (" (warn only)" if
                 state.deterministic_warn_only else "") + (", empty filled" if
                 state.fill_uninitialized else "") if state.deterministic else "off"))
    return ", ".join(parts)


def difference(expected: GlobalState, actual: GlobalState) -> tuple[str, str]:
    """(expected, actual) texts of the fields that differ."""
    want, got = [], []
    for a, b in zip(expected.autocast, actual.autocast):
        if a != b:
            want.append(f"autocast({a[0]}) {'on ' + str(a[2]) if a[1] else 'off'}")
            got.append(f"autocast({b[0]}) {'on ' + str(b[2]) if b[1] else 'off'}")
    if expected.function_modes != actual.function_modes:
        want.append(f"torch function modes {list(expected.function_modes)}")
        got.append(f"torch function modes {list(actual.function_modes)}")
    if expected.dispatch_modes != actual.dispatch_modes:
        want.append(f"{expected.dispatch_modes} dispatch mode(s)")
        got.append(f"{actual.dispatch_modes} dispatch mode(s)")
    if (expected.deterministic, expected.deterministic_warn_only) != (
            actual.deterministic, actual.deterministic_warn_only):
        want.append(f"deterministic algorithms {expected.deterministic}")
        got.append(f"deterministic algorithms {actual.deterministic}")
    return "; ".join(want) or describe(expected), "; ".join(got) or describe(actual)


def eager_reason(state: GlobalState):
    """Why a frame called in `state` runs eagerly (Note [Global state]), or None."""
    on = [f"torch.autocast({d!r}, dtype={dtype})" for d, enabled, dtype in state.autocast
          if enabled and d != "cpu"]
    if on:
        return (f"{' and '.join(on)} is active: refcomp applies autocast's casting rules"
                " on the CPU only, so the frame runs eagerly under it")
    if state.function_modes:
        return (f"a TorchFunctionMode is active ({', '.join(state.function_modes)}; "
                "torch.set_default_device installs one): refcomp does not trace through"
                " __torch_function__, so the frame runs eagerly under it")
    if state.dispatch_modes:
        return "a TorchDispatchMode is active: the frame runs eagerly under it"
    return None


@contextlib.contextmanager
def autocast_off():
    """Runs a compiled graph traced under CPU autocast: its casts are explicit IR casts
    (Note [Autocast policy]), so ATen calls inside must not cast a second time."""
    if not torch.is_autocast_enabled("cpu"):
        yield
        return
    with torch.autocast("cpu", enabled=False):
        yield
