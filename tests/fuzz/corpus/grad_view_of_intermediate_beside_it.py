"""Aliasing (every backend) when the inputs require grad: `v2 = x1 @ x1; v3 = v2[...]`
returned as `[v2, v3, x0]`: eager's v3 is a view of v2 (shared storage), refcomp's was
a separate tensor.  Without requires_grad the forward fuzzer passes it (corpus
view_as_of_intermediate_beside_it).  Found by the first gradient soak (`--grad --seed
1`, eager backend, Nov 27), beside a stride class of the same cause (`v2.select(1, -1)`
of an intermediate: strides (1, 1), eager (4, 1)).  Cause: Note [Views of outputs]
replayed a returned view on its base only when nothing required grad.  Fixed: the rule
holds with grad too (the view ops are recorded by autograd on the compiled Function's
output; refcomp/runtime.py, `_Outputs.output_view_spec`)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias"
SOURCE = '''
def f(x0, x1):
    v2 = x1 @ x1
    v3 = v2[...]
    v4 = torch.cat([p.sum(0, keepdim=True) for p in x0.unbind(0)])
    v5 = v4.select(1, -1)
    return [v2, v3, x0, v5]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 1, 1, 4), 'float32', 'transposed', 563), ((4,), 'float32', 'contiguous', 126)],
]
