"""refcomp: a small, heavily specified reference compiler for PyTorch programs.

The user-facing compiler (frontend, guards, cache, backends glue) lives here; it
imports ir/ and codegen/, never the other way round.  Spec: spec/architecture.md.

    model = refcomp.compile(model)        # lazy: the first call traces
    print(refcomp.explain(model, x))      # Graph Count: 1 ...
"""

from refcomp.api import (
    compile,
    disable,
    guard_profile,
    mark_dynamic,
    mark_static,
    maybe_mark_dynamic,
    reset,
    stats,
)
from refcomp.config import default_backend
from refcomp.explain import explain
from refcomp.logs import set_logs
from refcomp.reasons import REASONS, CaptureError, Unsupported
from refcomp.stance import RecompileError, set_stance

__all__ = ["REASONS", "CaptureError", "RecompileError", "Unsupported", "compile",
           "default_backend", "disable", "explain", "guard_profile", "mark_dynamic",
           "mark_static", "maybe_mark_dynamic", "reset", "set_logs", "set_stance", "stats"]
