"""The registry of reasons a frame (later: a graph) cannot be captured.

Owns: reason ids (`RB001`...), each with a title, an explanation and a hint, and
`Unsupported`, the exception the tracer raises with a reason id, a detail and
the source location.  explain(), the logs, `fullgraph=True` errors, the spec and
the tests all use these ids; tests assert ids, not wording.  Spec: spec/tracer.md,
"Why a frame falls back".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Reason:
    id: str
    title: str
    explanation: str
    hint: str


REASONS: dict[str, Reason] = {}


def _reason(rid, title, explanation, hint) -> str:
    """Register a reason; returns its id, bound to a named constant below."""
    REASONS[rid] = Reason(rid, title, explanation, hint)
    return rid


UNSUPPORTED_OPCODE = _reason("RB001", "unsupported opcode",
        "The tracer has no handler for this bytecode instruction.",
        "Rewrite the construct with plain tensor ops, or keep the function eager.")
TENSOR_TO_PYTHON = _reason("RB002", "Tensor.item() / tensor to Python value",
        "The value of a tensor is needed on the host (item, tolist, int(), float(), bool()).",
        "Return the tensor instead and read it outside the compiled function.")
TENSOR_CONTROL_FLOW = _reason("RB003", "control flow on a tensor's value",
        "A Python `if`/`while` (or `and`/`or`) depends on data inside a tensor.",
        "Use torch.where(cond, a, b) so both branches stay in the graph.")
UNSUPPORTED_CALL = _reason("RB004", "call to an unsupported function",
        "The function is neither a user function the tracer can inline nor in the torch "
        "table.", "Use a supported torch op, or move the call outside the compiled code.")
UNSUPPORTED_TENSOR_METHOD = _reason("RB005", "unsupported tensor method or attribute",
        "This Tensor method, attribute or argument combination is not in the torch table.",
        "Use an equivalent supported op (see spec/tracer.md, 'Torch coverage').")
TRY_BLOCK_RETIRED = _reason("RB006", "try/except or try/finally in the frame (retired)",
        "No longer raised: try blocks are traced, and a break inside one runs in CPython "
        "inside the frame's own handlers (spec/runtime.md).",
        "Nothing to do.")
UNSUPPORTED_PYTHON = _reason("RB007", "unsupported Python version",
        "The tracer interprets CPython 3.11 bytecode only.", "Run on CPython 3.11.")
UNREPLAYABLE_SIDE_EFFECT = _reason(
    "RB008", "side effect that cannot be replayed, or a read of state the frame mutates unseen",
        "Mutations of outliving objects are replayed after the graph; this one needs a value"
        " the replay cannot be handed (a view of an input), or the trace reads a number,"
        " list or dict that the frame itself writes (spec/runtime.md, \"Side effects\").",
        "Return the new value instead of mutating state inside forward.")
TRAINING_MODE_STATE = _reason("RB009", "module in training mode with state updates or randomness",
        "Training-mode BatchNorm and Dropout are captured (spec/autograd.md, \"Training-mode "
        "modules\"); these are the cases that are not: batch_norm with momentum=None, "
        "without running statistics in eval mode, over a dynamic batch or one value per "
        "channel, and dropout off the CPU or of a non-float tensor.",
        "Call model.eval() for inference, or keep training steps eager.")
INPLACE_ON_ALIAS = _reason("RB010", "in-place op on an aliased tensor",
        "An in-place op or item assignment whose effect on aliases or autograd a "
        "functional value cannot say (a view it cannot invert, a view of an input, a leaf "
        "that requires grad, a tensor a backward saved, overlapping memory): spec/"
        "correctness.md, \"Mutation and write-back\", lists what is captured.",
        "Use the out-of-place op (x = x + 1) or clone() first.")
GRADIENT_CUT = _reason("RB011", "gradient cut inside a differentiable graph",
        "A detach() or no_grad() value is written in place into a tensor that requires "
        "grad.",
        "Keep detach()/no_grad() results as outputs only, or run the step eagerly.")
NON_TENSOR_RESULT = _reason("RB012", "graph result is not a tensor or Python constant",
        "The frame returns or builds a value the runtime cannot reconstruct.",
        "Return tensors, tuples/lists/dicts of tensors, or constants.")
INEXPRESSIBLE_OP = _reason("RB013", "torch op the IR cannot express with these arguments",
        "The op is known but this dtype, shape or argument is outside what the IR models.",
        "See spec/tracer.md for the supported argument forms.")
GENERATOR_FRAME = _reason("RB014", "generator, coroutine or async frame",
        "Generators suspend mid-frame; the tracer captures whole calls only.",
        "Return a list instead of yielding.")
TOO_DEEP = _reason("RB015", "recursion or inlining too deep",
        "Inlining stopped at the depth limit (recursive user functions).",
        "Use a loop, or decorate the helper with refcomp.disable.")
DISABLED_FUNCTION = _reason("RB016", "function marked refcomp.disable",
        "The user asked for this function to stay eager.", "Remove @refcomp.disable.")
TRACE_EXCEPTION = _reason("RB017", "exception raised while tracing",
        "A Python-level operation raised during tracing (the eager run will raise it too).",
        "Fix the error in the eager program first.")
INTERNAL_ERROR = _reason("RB018", "internal error in the tracer",
        "refcomp's tracer failed on this frame (a refcomp bug); the frame runs eagerly so "
        "the result stays correct.", "Please report it with the function that triggered it.")
LOOP_ACROSS_BREAK = _reason("RB019", "loop continues across a graph break",
        "An earlier break left the loop's iterator a real Python object, so each step of "
        "the loop is taken by CPython, outside the graph.",
        "Move the break (print, .item()...) out of the loop, or accept one graph per loop "
        "iteration.")
CHANGING_NUMBER = _reason("RB020", "Python number that changes between calls",
        "A number live at a resume point changed between calls, so it is not baked into "
        "the graph; the instruction that needs its value runs outside the graph.",
        "Keep the value in a tensor (e.g. do not call .item()), or accept the break.")
UNMODELLED_TORCH_STATE = _reason("RB021", "global torch state refcomp does not model",
        "torch.autocast, a TorchFunctionMode (torch.set_default_device installs one) or a "
        "TorchDispatchMode is active at the call: the traced graph would not apply it, so "
        "the frame runs eagerly under it (guarded by that state: leaving it compiles).",
        "Call the compiled function outside the autocast/mode block, or cast explicitly.")

DATA_DEPENDENT_SHAPE = _reason("RB022", "op with a data-dependent output shape",
        "The op's result shape depends on the values in a tensor (nonzero, unique, "
        "masked_select, boolean-mask indexing, torch.where(cond)); a graph's shapes are "
        "fixed by its inputs' shapes, so the op runs in torch at a break and the code after "
        "it is compiled again (the result is a tensor, not a Python number).",
        "Keep the shape static: torch.where(mask, x, 0) instead of x[mask], or accept the "
        "break.")

OP_BY_OP_AUTOGRAD = _reason("RB023", "graph runs op by op under autograd",
        "The graph's outputs require grad and its backward cannot be derived (an op on a "
        "differentiable path has no VJP: an opaque ATen call such as torch.einsum or "
        "scaled_dot_product_attention with dropout; a VJP needs static "
        "sizes; an input is mutated with a value that requires grad), so the graph is "
        "captured but runs on the eager backend, each IR op a torch op that autograd "
        "records: eager's gradients, without fused kernels.",
        "Use ops with IR rules on the differentiable path (spec/autograd.md), or accept "
        "the op-by-op run.")

INFERENCE_TENSOR_UNDER_GRAD = _reason("RB024", "inference tensor meets a tensor that requires grad",
        "A tensor made under torch.inference_mode() is an operand of an op, recorded by "
        "autograd, whose other operand requires grad: eager raises \"Inference tensors "
        "cannot be saved for backward\" where the op saves it, even when its result is "
        "unused, so the op runs in torch at a break and eager decides "
        "(refcomp/tracer/torch_table.py, Note [Inference tensors under grad]).",
        "Use torch.no_grad() instead of torch.inference_mode(), or .clone() the tensor.")

COMPLEX_UNSUPPORTED = _reason("RB025", "complex value the IR does not compute",
        "The IR computes complex64 and complex128 values with the ops that have a complex "
        "form (spec/ir.md, \"Complex values\"); this one is a complex32 argument (torch.chalf, "
        "whose CPU kernels are few; a chalf() result is an extern-only c32), or a "
        "complex result of an opaque ATen call that requires grad (the graph's gradients "
        "are derived from IR rules), so it runs in torch at a break.",
        "Compute in complex64, or accept the break.")

class Unsupported(Exception):
    """Raised by the tracer: this construct cannot be captured (reason id + detail)."""

    def __init__(self, rid: str, detail: str = ""):
        if rid not in REASONS:
            raise ValueError(f"unknown reason id {rid!r}")
        self.rid = rid
        self.detail = detail
        self.filename: Optional[str] = None
        self.lineno: Optional[int] = None
        self.instruction: Optional[str] = None
        # raised at a call whose callee runs as a frame of its own (a module with FSDP2's
        # hooks: refcomp/distributed.py), though nothing inside it was traced
        self.in_callee = False
        # (function, file, line) of each traced frame the failure passed through,
        # innermost first: the inlined call stack a fullgraph error shows.
        self.frames: list = []
        super().__init__(self.message())

    @property
    def reason(self) -> Reason:
        return REASONS[self.rid]

    def locate(self, filename, lineno, instruction) -> None:
        # The innermost frame locates first; outer frames keep that location.
        if self.filename is None:
            self.filename, self.lineno, self.instruction = filename, lineno, instruction
            self.args = (self.message(),)

    def add_frame(self, function: str, filename: str, lineno) -> None:
        self.frames.append((function, filename, lineno))

    def call_stack(self) -> str:
        """The inlined call stack, outermost first, as a traceback lists it."""
        return "\n".join(f'  File "{f}", line {n}, in {fn}'
                         for fn, f, n in reversed(self.frames))

    def message(self) -> str:
        r = REASONS[self.rid]
        where = f" at {self.filename}:{self.lineno} ({self.instruction})" if self.filename else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"[{self.rid}] {r.title}{detail}{where}. Hint: {r.hint}"


class Raised(Unsupported):
    """An exception the traced code raises as eager would (`exc`, a real exception object):
    a missing key of a guarded dict, a `raise` of a constant exception, a status query that
    raises on this build.  Note [Exceptions inside inlined frames] (refcomp/tracer/frame.py):
    an inlined frame whose exception table covers the instruction jumps to its handler;
    anywhere else it is the break it always was (RB017, or the id given)."""

    def __init__(self, exc: BaseException, detail: str, rid: str = TRACE_EXCEPTION):
        self.exc = exc
        super().__init__(rid, detail)


class CaptureError(RuntimeError):
    """fullgraph=True: the frame could not be captured as one graph."""

    def __init__(self, unsupported: Unsupported):
        self.unsupported = unsupported
        self.rid = unsupported.rid
        text = unsupported.message()
        if unsupported.frames:  # where the user's code was when it stopped
            text += "\nTraced call stack (most recent call last):\n" + \
                unsupported.call_stack()
        super().__init__(text)
