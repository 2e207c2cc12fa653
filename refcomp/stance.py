"""`refcomp.set_stance`: what a compiled function does on a miss (like torch.compiler's).

Owns: the current stance and `set_stance`, usable as a call and as a context manager.
The call path (refcomp/api.py) reads `FORCE_EAGER[0]` on every call (one list read)
and `current()` only on a miss.  Spec: spec/guards.md, "Recompile controls".

- "default": a miss traces a new entry (up to `cache_size_limit`);
- "fail_on_recompile": a miss on a frame that already has entries raises
  `RecompileError` naming the failing guards (expected and actual); first compiles
  are allowed;
- "eager_on_recompile": such a miss runs the function eagerly, without tracing;
  existing entries still serve calls whose guards hold;
- "force_eager": every call runs the original function eagerly; nothing is looked
  up or compiled.
"""

from __future__ import annotations

STANCES = ("default", "fail_on_recompile", "eager_on_recompile", "force_eager")
_STANCE = ["default"]
FORCE_EAGER = [False]  # read by every call: See refcomp/api.py CompiledFunction.__call__


class RecompileError(RuntimeError):
    """A miss under set_stance("fail_on_recompile")."""


def current() -> str:
    return _STANCE[0]


def _set(name: str) -> None:
    _STANCE[0] = name
    FORCE_EAGER[0] = name == "force_eager"


class set_stance:  # noqa: N801 - used like a function, as torch.compiler.set_stance
    """Set the stance now; as a context manager, restore the previous one on exit."""

    def __init__(self, stance: str = "default"):
        if stance not in STANCES:
            raise ValueError(f"refcomp.set_stance: unknown stance {stance!r}; valid stances:"
                             f" {', '.join(STANCES)}")
        self.previous = current()
        self.stance = stance
        _set(stance)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(self.previous)
        return False
