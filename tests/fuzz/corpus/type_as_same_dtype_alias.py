"""A dtype conversion to the tensor's own dtype (`x.to(torch.float32)`, `x.float()`,
`x.type_as(y)`) returns x itself in eager; refcomp returns a copy."""
STATUS = "fixed"  # fixed on main by the "fixes" engineer (issue 11); replayed on every backend
BACKENDS = ["interp", "eager"]
SYMPTOM = "alias: out is not input x0, eager returns x0 itself"
SOURCE = '''
def f(x0):
    return x0.to(torch.float32)
'''
INPUTS = [
    [((2, 3), 'float32', 'contiguous', 0)],
]
