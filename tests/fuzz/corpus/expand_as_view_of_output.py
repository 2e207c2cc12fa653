"""`v3.expand_as(v6)` returned beside `v3` (an intermediate): eager returns a view sharing
v3's storage; the interp backend returned independent copies (`expand_as` takes a second
tensor, so its view step was not replayable).  Found by a 150-s interp soak of Nov 24
once interp's outputs were compared strictly.  Fixed: `x.expand_as(y)` replays as
`x.expand(y's sizes)` (view_step in refcomp/tracer/torch_table.py; Note [Views of outputs])."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias: out[0] shares storage with: [], eager ['out[2]']"
SOURCE = '''
def f(x0, x1):
    v3 = x1.argmax(dim=-1)
    v6 = x0.sum(dtype=torch.float64)
    v11 = v3.expand_as(v6)
    return [v3, v11]
'''
INPUTS = [
    [((1, 1, 1), 'bool', 'transposed', 124), ((), 'int32', 'contiguous', 331)],
    [((2, 3, 1), 'bool', 'transposed', 125), ((4,), 'int32', 'contiguous', 332)],
]
