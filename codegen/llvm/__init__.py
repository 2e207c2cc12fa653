"""The LLVM CPU backend: Kernels -> llvmlite.ir -> O3 machine code for the host -> ctypes.

Modules: emit.py (Kernel -> LLVM IR), scalar.py (ScalarOps on the IR builder),
vmath.py (vectorizable f32 exp/log/tanh/sigmoid/erf), jit.py (target machine,
optimization, MCJIT, kernel cache), backend.py (the registered "llvm" backend).
Spec: spec/codegen.md, "LLVM".
"""
