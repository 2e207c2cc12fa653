"""A missed raise (interp, eager, llvm; gradient mode): `w5 = v4.clone()` of a result that
eager's node saved (`v4 = x1.norm()`: LinalgVectorNorm saves its result), both live at a
graph break, then `v4.abs_()` after it.  Eager's backward of w5 reaches the norm node,
whose saved v4 changed: "one of the variables needed for gradient computation has been
modified by an inplace operation".  The IR folds the clone, so the graph returns one
value at two outputs of different alias identity; Note [Saved by eager] leaves such
"unsure" outputs out of its version checks (either may be the clone, whose version is
its own), so nothing checks v4 and the compiled backward runs.  Pre-existing (the base
of session 17 misses it too); found by the session-17 gradient soak (seed 1751, program
810, on 95701b3, with `w5[None] *= 3` between), shrunk by hand.  Fixed: the tracer
marks the alias of each tensor a folded copy made (TraceContext.copy_aliases), so of one
value's outputs the one that is not a copy is the op's own tensor and stays checked
(issue 33)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0, x1):
    v4 = x1.norm()
    w5 = v4.clone()
    s8 = v4.sum().item()
    v4.abs_()
    return w5, x0
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 3), 'float32', 'contiguous', 177), ((), 'float32', 'contiguous', 853)],
    [((2, 3), 'float32', 'contiguous', 178), ((), 'float32', 'contiguous', 854)],
]
