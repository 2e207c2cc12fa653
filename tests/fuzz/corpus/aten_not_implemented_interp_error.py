"""`torch.clamp(b, min=True)` of a bool tensor: eager raises NotImplementedError
("clamp_min_scalar_cpu" not implemented for 'Bool'); the interp backend raised its own
InterpreterError (a RuntimeError).  Found by a 150-s interp soak of Nov 24.  Fixed: an
error torch raises inside an `aten` node keeps its type (codegen/interp.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "wrong-exception: InterpreterError: aten failed: \"clamp_min_scalar_cpu\" not implemented for 'Bool'"
SOURCE = '''
def f(x0, x1, x2):
    v2 = x1 * 1
    v4 = torch.clamp(x2, min=True)
    return x0,
'''
INPUTS = [
    [((), 'bool', 'contiguous', 542), ((), 'bool', 'contiguous', 270), ((), 'bool', 'contiguous', 413)],
]
