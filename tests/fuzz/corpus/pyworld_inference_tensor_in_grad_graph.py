"""A tensor made under `torch.inference_mode()` from an input that requires grad, then
used by the graph after the block (`v7 = v2 * 2 - v4`): the compiled call raised
"RuntimeError: Inference tensors do not track version counter." on interp and llvm (the
autograd Function recorded every input's `_version`); eager runs.  Found by the
Python-level fuzzer's soak (seed 3100 on 38abc0d, program 1,001, GRAD_INPUTS), shrunk by
statement deletion.  Fixed: refcomp/autograd.py `_version` (None for an inference tensor,
which cannot change in place outside inference mode); tests/training/test_inference_tensors.py."""
STATUS = "fixed"
BACKENDS = ["interp", "llvm"]
SYMPTOM = "crash: RuntimeError: Inference tensors do not track version counter."
PYTHON = True
GRAD_INPUTS = True
SOURCE = '''
LOG = []


def f(x0, k=2.0, acc=[], *, mode='add'):
    v2 = x0 * 2 - x0
    with torch.inference_mode():
        v4 = x0 * 2
    v7 = v2 * 2 - v4
    acc.append(1)
    v9 = v7 + len(acc)
    return v2,
'''
BETWEEN = [  # code run in the module before each call after the first
]
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 4), 'float32', 'transposed', 662)],
]
