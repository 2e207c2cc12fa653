"""A wrong value on interp: `F.instance_norm` (an opaque `aten` node) of a bfloat16 tensor
far from 0 differed from eager by ~0.3.  interp carries bfloat16 values in float32 arrays
and its aten executor built each torch operand with the array's dtype, so torch ran the
op on float32 tensors; eager runs it on bfloat16 (whose CPU kernel is that far off: the
contract is eager's answer, which an aten node gives bitwise).  Found by fuzzfix probing
half-precision numerics, Nov 27 (main 12190b9).  Fixed: the interpreter passes each aten
operand's IR dtype to the executor, which builds the torch operand in it
(codegen/opaque.py)."""
STATUS = "fixed"
BACKENDS = ["interp"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    v1 = x0 + 100
    return F.instance_norm(v1.unsqueeze(0))
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((8, 64), 'bfloat16', 'contiguous', 0)],
]
