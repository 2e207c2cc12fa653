"""`x * 1` is folded to `x`, and the output is returned as the input itself (llvm) or a
tensor sharing its storage (eager backend), where eager returns a fresh tensor.  The fuzzer
first showed it as `torch.zeros_like(x) + x` on bool tensors."""
STATUS = "fixed"  # fixed on main by the "fixes" engineer (issue 11); replayed on every backend
BACKENDS = ["eager", "llvm"]
SYMPTOM = "alias: out is input x0 / shares storage with x0, eager: a fresh tensor"
SOURCE = '''
def f(x0):
    return x0 * 1
'''
INPUTS = [
    [((2, 3), 'float32', 'contiguous', 0)],
]
