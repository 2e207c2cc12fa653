"""Generated-code dumps: backends announce the code they produce; whoever listens gets it.

Owns: the dump kinds (`KINDS`), the listener list, `wanted` and `emit`.  codegen/ must not
import refcomp/ (layering), so refcomp/logs.py subscribes here instead of being called.

Note [Dumps cost nothing when off]: a backend asks `wanted(kind)` before it makes the
text (printing an LLVM module or its assembly costs milliseconds), and `emit` hands the
text to each listener.  A listener that raises is dropped from that call's delivery and
reported on the `refcomp.codegen` logger: a dump never changes what runs.
"""

from __future__ import annotations

import logging
from typing import Callable

KINDS = {
    "llvm_ir": "the LLVM module as emitted, before optimisation",
    "llvm_ir_opt": "the LLVM module after the O3 pipeline",
    "asm": "the host assembly LLVM generated",
    "triton": "the Triton source of each kernel",
}

_listeners: list[Callable[[str, str, str], None]] = []  # listener(kind, name, text)
_wanted: set[str] = set()
_log = logging.getLogger("refcomp.codegen")


def subscribe(listener: Callable[[str, str, str], None], kinds) -> None:
    """Deliver dumps of `kinds` to `listener(kind, name, text)`; replaces all listeners."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown dump kind(s) {sorted(unknown)}; valid: {sorted(KINDS)}")
    _listeners[:] = [listener]
    _wanted.clear()
    _wanted.update(kinds)


def wanted(kind: str) -> bool:
    """Whether some listener takes `kind` (ask before making the text)."""
    return kind in _wanted


def emit(kind: str, name: str, text: str) -> None:
    """Hand `text` (the code of kernel or module `name`) to the listeners of `kind`."""
    if kind not in _wanted:
        return
    for listener in list(_listeners):
        try:
            listener(kind, name, text)
        except Exception as e:  # a dump must never change what runs
            _log.warning("dump listener failed on %s of %s: %r", kind, name, e)
