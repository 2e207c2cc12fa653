"""refcomp as a torch.compile backend: `torch.compile(model, backend="refcomp")`.

Owns: `refcomp_backend(gm, example_inputs)`, registered under the name "refcomp" through
the `torch_dynamo_backends` entry point (setup.cfg), so Dynamo finds it without an
import.  Spec: spec/codegen.md, "FX interop".

Design: Dynamo hands over a `torch.fx.GraphModule`, whose `forward` is ordinary Python
generated from the FX graph (placeholders become arguments, get_attr attribute loads,
call_function/call_method/call_module calls, output the return).  refcomp's frontend
already turns Python into IR, so the FX graph is imported by compiling that module with
`refcomp.compile`: one importer (the bytecode tracer) for user code and FX code alike,
with its torch table, decompositions and guards.  A node refcomp cannot capture becomes
a graph break inside the module (it then runs eagerly there), never a wrong answer.
Dynamo has already guarded the frame; refcomp's own guards on the module's inputs are
the price of reusing the frontend (a few microseconds a call).
"""

from __future__ import annotations


def refcomp_backend(gm, example_inputs, **options):
    """Dynamo backend: compile `gm` with refcomp; `options` as refcomp.compile's."""
    import refcomp

    # Dynamo's modules are lazy (torch.fx._lazy_graph_module): their forward generates
    # the code on first call.  Generate it now, so refcomp traces the real forward.
    if hasattr(gm, "real_recompile"):
        gm.real_recompile()
    backend = options.pop("backend", None)
    return refcomp.compile(gm, backend=backend, dynamic=options.pop("dynamic", None),
                           options=options or None)
