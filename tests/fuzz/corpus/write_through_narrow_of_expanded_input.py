"""`x0.narrow(0, 0, 1).mul_(2)` of an expanded (stride-0) int64 input: eager writes the
shared elements once through the view (it has no internal overlap); refcomp, writing
through views of graph inputs since 7d3465f, wrote the input back whole with `copy_`,
which raises "more than one element of the written-to tensor refers to a single memory
location" (found by the forward soak `--seed 1821` on 7d3465f, program 1,516, on every
backend).  Fixed: an input whose elements share memory is no base for a write through a
view (the break stays, refcomp/tracer/mutation.py `_input_base`)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: RuntimeError: unsupported operation: more than one element of the written-to tensor refers"
SOURCE = '''
def f(x0):
    v1 = torch.where(x0 > x0, x0, x0)
    x0.narrow(0, 0, 1).mul_(2)
    v2 = torch.roll(v1, shifts=-1)
    w3 = v1.clone(memory_format=torch.contiguous_format)
    w3.select(-1, 0).mul_(2)  # must capture
    v4 = torch.count_nonzero(w3, dim=2)
    v5 = v2 * v2.max().item()
    v7 = torch.full_like(v2, 2.0)
    v8 = w3.clone()
    for i in range(2):
        v8.mul_(2)
    return v7, v4,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 4, 1), 'int64', 'expanded', 200)],
    [((1, 4, 1), 'int64', 'expanded', 201)],
    [((3, 3, 1), 'int64', 'expanded', 202)],
]
