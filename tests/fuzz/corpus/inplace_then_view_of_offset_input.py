"""A view of an input with a storage offset, returned after the function mutated that
input in place: eager returns a view sharing the input's storage; refcomp returned a copy
on every backend (found by the soak of Nov 27, `--seed 1127`, program 1818, as
`x0.abs_(); ...; v10 = x0.split([1, n - 1], -1)[1]; print(end=''); return [v10]`).  The
input's meta has storage offset 0 whatever the caller's is, and the check that the
in-place ops kept the input's layout compared it with the caller's offset.  Fixed
(refcomp/runtime.py, `_Outputs.view_spec`)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias: out[0] shares storage with input: [], eager [0]"
SOURCE = '''
def f(x0):
    x0.abs_()
    v1 = x0.split([1, x0.shape[-1] - 1], -1)[1]
    print(end='')
    return [v1, x0[1:]]
'''
INPUTS = [
    [((4,), 'float64', 'offset', 490)],
]
