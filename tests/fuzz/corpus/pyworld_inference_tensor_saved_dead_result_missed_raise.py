"""A tensor made under `torch.inference_mode()`, multiplied by a value that requires grad,
the product unused: eager raises "Inference tensors cannot be saved for backward" at the
multiplication (autograd would save the inference tensor); the compiled call returns on
every backend (the unused product is not computed, and with it goes eager's check; a used
one raises as in eager: tests/training/test_inference_tensors.py).  Found by the
Python-level fuzzer's soak (seed 3100 on 38abc0d, program 1,863), shrunk by hand.  Fixed:
such an op runs at a break (RB024, Note [Inference tensors under grad],
refcomp/tracer/torch_table.py); tests/training/test_inference_tensors.py."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "missed-raise"
PYTHON = True
GRAD_INPUTS = True
SOURCE = '''
def f(x0, x1):
    with torch.inference_mode():
        v2 = x0 * 2
    v7 = v2 * x1.sum()
    return v2,
'''
BETWEEN = []
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 4), 'float32', 'contiguous', 0), ((2, 4), 'float32', 'contiguous', 1)],
]
