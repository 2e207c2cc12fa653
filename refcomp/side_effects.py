"""Side effects on Python objects that outlive the frame: where they run, and why once.

Owns: the rule that every mutation of a global, of an attribute, or of a list/dict
the caller can see, and every `print`/logging call, is a graph break executed
concretely by refcomp/resume.py at its place in program order (never traced, so
never lost and never repeated), and `stored_names`, which finds the globals and
attribute names a code object assigns.  Must not know graphs or guards.  Spec:
spec/runtime.md, "Side effects".

Note [Reading what the frame writes]: `COUNT += 1` reads the global before it
writes it.  If the tracer read it, the value would become an EQUALS_MATCH guard and
every call (with a new count) would recompile.  So a read of a global (or of an
attribute name) that the same code object assigns is itself a break point: the
resume machine reads, adds and stores it concretely (see Note [Cheap steps] in
refcomp/concrete.py), and the guards never mention it.
"""

from __future__ import annotations

from refcomp.concrete import instructions

_STORED: dict = {}  # code -> (globals assigned, attribute names assigned)


def stored_names(code) -> tuple:
    """(names of globals the code assigns, attribute names it assigns), as frozensets."""
    cached = _STORED.get(code)
    if cached is None:
        insts, _ = instructions(code)
        globs = frozenset(i.argval for i in insts if i.opname in ("STORE_GLOBAL",
                                                                  "DELETE_GLOBAL"))
        attrs = frozenset(i.argval for i in insts if i.opname in ("STORE_ATTR",
                                                                  "DELETE_ATTR"))
        cached = _STORED[code] = (globs, attrs)
    return cached
