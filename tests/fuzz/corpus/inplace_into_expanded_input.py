"""In-place writes into an expanded (stride-0) input: eager allows fill-like ops
(`fill_`, setitem, `masked_fill_`: every alias of a location gets the value) and raises for
the others; refcomp wrote the functional result back with `copy_`, which raised for all of
them.  Fixed: such a write breaks the graph (RB010) and torch runs it (soak find)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = ("crash: RuntimeError: unsupported operation: more than one element of the "
           "written-to tensor refers to a single memory location")
SOURCE = '''
def f(x0, x1):
    x1.fill_(True)
    x1[1] = 2.0
    v3 = torch.remainder(x1, x0.abs() + 0.5)
    return v3
'''
INPUTS = [
    [((2, 3), 'float32', 'contiguous', 0), ((2, 3), 'float32', 'expanded', 1)],
]
