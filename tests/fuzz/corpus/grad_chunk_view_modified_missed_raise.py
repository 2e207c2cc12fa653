"""A missed raise (interp, eager, llvm; gradient mode): `v7 = v1.chunk(2, 0)[-1]` of a
tensor that requires grad (an input of the graph after a break), then `v7.mul_(2)`.
Eager raises "Output 1 of Split is a view and is being modified inplace. This view is
the output of a function that returns multiple views"; refcomp rebuilt the returned view
as `as_strided` of the caller's tensor (Note [Returned views]), on which autograd allows
the in-place op.  Found by the session-12 gradient soak (seed 2116, program 9,733, main
f09c5ba).  Fixed: such a view is rebuilt by replaying its view ops on the caller's
tensor, so it is Split's output as in eager (refcomp/runtime.py; issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "missed-raise: eager raised RuntimeError: Output 1 of Split is a view and is being modified inplace"
SOURCE = '''
def f(x0):
    v1 = x0.exp()
    v6 = v1.sort(dim=0)[1]
    v7 = v1.chunk(2, 0)[-1]
    v7.mul_(2)
    return [v1, v6]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3,), 'float32', 'offset', 141)],
    [((2,), 'float32', 'offset', 142)],
    [((4, 2), 'float64', 'contiguous', 143)],
]
