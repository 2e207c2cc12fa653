"""F.normalize(dim=-1) of 0-d tensors around a graph break and an in-place clamp_: llvm
raises IndexError "Dimension out of range (expected to be in range of [-1, 0], but got 1)"
where eager works (soak program, not minimized)."""
STATUS = "fixed"  # passes since graph breaks run through generated code (issue 12)
BACKENDS = ["llvm"]
SYMPTOM = "crash: IndexError: Dimension out of range (expected to be in range of [-1, 0], but got 1)"
SOURCE = '''
def f(x0):
    v1 = torch.sinh(x0.clamp(-3, 3))
    v2 = OPAQUE(x0)
    v4 = torch.isnan(v2.sqrt())
    v6 = F.normalize(x0, dim=-1)
    x0.clamp_(min=-1)
    v8 = F.normalize(v1, dim=-1)
    return [v8, v8]
'''
INPUTS = [
    [((), 'float32', 'contiguous', 761)],
]
