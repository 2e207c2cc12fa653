"""`masked_fill` of a channels_last bfloat16 input of batch 1, cast to float32 and cloned:
eager's result is row-major (strides (48, 12, 4, 1) for shape (1, 4, 3, 4)); every backend
returned it channels_last ((48, 1, 16, 4)).  Values are equal.  Found x4 on interp and llvm
by the soak of Nov 24 (`--seed 1124`, main 12bf5a9) at program 5015.  Cause: ATen's
out-of-place masked_fill clones its input with MemoryFormat::Contiguous, so its result is
row-major whatever the input's layout, and the tracer's entry said it keeps its operands'
memory order (`pointwise`).  Fixed on interp and llvm (refcomp/tracer/torch_ops.py);
on the eager backend, whose `where` follows the input, by making an output row-major
where eager's is (Note [Output layout] in refcomp/runtime.py; the same fix as
pointwise_of_contiguous_copy_strides)."""
STATUS = "fixed"
BACKENDS = ["eager"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    v1 = x0.masked_fill(x0 > 0, 2.0)
    v2 = v1.to(torch.float32)
    v3 = v2.clone()
    return v3, v3,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((1, 4, 3, 4), 'bfloat16', 'channels_last', 391)],
    [((1, 4, 3, 4), 'bfloat16', 'channels_last', 392)],
]
