"""Issue 11's `linalg_vector_norm(): argument 'dim' ... not bool`: positional ord, dim,
keepdim.  Passed on every backend when the fuzzer landed; kept as a regression program."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: linalg_vector_norm(): argument 'dim' must be ... not bool"
SOURCE = '''
def f(x0):
    return torch.linalg.vector_norm(x0, 2, 1, True), x0.norm(2, 0), torch.linalg.vector_norm(x0, 1)
'''
INPUTS = [
    [((2, 3), 'float32', 'contiguous', 0)],
]
