"""refcomp: a small, heavily specified reference compiler for PyTorch programs.

The user-facing compiler (frontend, guards, cache, backends glue) lives here; it
imports ir/ and codegen/, never the other way round.  Spec: spec/architecture.md.

    model = refcomp.compile(model)        # lazy: the first call traces
    print(refcomp.explain(model, x))      # Graph Count: 1 ...
"""

from refcomp.api import (
    compile,
    disable,
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

__all__ = ["REASONS", "CaptureError", "Unsupported", "compile", "default_backend", "disable",
           "explain", "mark_dynamic", "mark_static", "maybe_mark_dynamic", "reset", "set_logs",
           "stats"]
