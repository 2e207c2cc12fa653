"""A wrong value on every backend: `torch.linalg.vector_norm`, `x.norm` and `F.normalize`
of a float16 tensor whose sum of squares exceeds float16's range (65504) came back inf
(normalize: 0) where eager's is finite: the tracer wrote the 2-norm as
sqrt(sum(x * x)) in the input's dtype, and ATen reduces a float16 norm in float32 and
rounds the result once.  Found by fuzzfix probing half-precision numerics, Nov 27 (main
12190b9); the fuzzer's inputs (2 * randn, at most 4096 elements) rarely get there.  Fixed: the tracer's vector_norm reduces an f16/bf16 input in float32
and casts the norm back (refcomp/tracer/torch_ops.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    v1 = x0 * 60
    return torch.linalg.vector_norm(v1, dim=-1), v1.norm(dim=-1), F.normalize(v1, dim=-1)
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((4, 64), 'float16', 'contiguous', 0)],
    [((3, 64), 'bfloat16', 'contiguous', 1)],
]
