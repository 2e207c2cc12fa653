"""`torch.cat` (and `torch.stack`) of channels_last inputs: eager keeps the inputs' memory
format (cat: strides (120, 1, 30, 6) for shape (2, 6, 4, 5); stack: the unsqueezed inputs'
order), every backend returned row-major.  The tracer types cat and stack from the IR
(`ir_meta`, Note [IR-typed meta]) and that meta is row-major.  Found by fuzzfix probing
output layouts, Nov 27 (main c463093).  Fixed: cat and stack skip the IR-typed meta only
while no operand is channels_last; otherwise torch's meta kernel gives eager's strides and
Note [Output layout] restrides to them (refcomp/tracer/torch_table.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    return torch.cat([x0, x0 * 2], 1), torch.stack([x0, x0], 2)
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 3, 4, 5), 'float32', 'channels_last', 0)],
    [((3, 3, 5, 6), 'float32', 'channels_last', 1)],
]
