"""An in-place op whose result type cannot be cast back to its operand (`mul_(2)` on a bool
tensor: Long into Bool) raises RuntimeError in eager; the compiled call returned (all
backends).  Found by the 40-min soak of Nov 24 (/work/soak-11.txt).  Fixed: meta kernels do
not check the cast, so the tracer checks the out-of-place op's result type and breaks to
eager, which raises (refcomp/tracer/torch_table.py, `_refuse_uncastable_result`)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "missed-raise: eager raised RuntimeError: result type Long can't be cast to the desired output type Bool"
SOURCE = '''
def f(x0):
    v1 = x0.clone()
    v1.mul_(2)
    return x0,
'''
INPUTS = [
    [((1, 2, 2), 'bool', 'contiguous', 307)],
]
