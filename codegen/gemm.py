"""The `matmul` extern: torch.matmul, less the copies it makes of strided batches.

Owns: `matmul(a, b, out=None)`, the function the eager table (and so every extern
`matmul` unit of the kernel backends) calls.  Must not know the IR.
Spec: spec/codegen.md, "LLVM" (Note [Strided batched matmul]).

Note [Strided batched matmul]: torch.matmul of two 4-d (or higher) operands reshapes
each to one batch of matrices; an operand whose batch dims cannot merge without a
copy (attention's `q = (x @ wq).reshape(b, s, h, d).permute(0, 2, 1, 3)`: strides
(s*h*d, d, h*d, 1)) is first copied whole.  Every matrix of such an operand is still
a BLAS matrix (one of its last two strides is 1), so `bmm` on each slice along the
leading batch dims reads it where it lies, and writes the slice of the result
matmul would have written.  Same GEMM calls on the same matrices, other leading
dimensions: equal to torch.matmul on the bench's attention shapes (transformer2's
q @ k and att @ v: tests/codegen/test_gemm.py), and in general within the GEMM's own
rounding.  Taken only where it cannot be slower or differ in kind: CPU, real
floating dtypes, equal batch shapes (no broadcasting), an operand that would be
copied, at most STRIDED_MAX_SLICES bmm calls, and no autograd to record (`out=` of
bmm refuses operands that require grad).
"""

from __future__ import annotations

import itertools
import math

import torch

STRIDED_MAX_SLICES = 64  # bmm calls per product; each costs ~10 us of dispatch


def matmul(a, b, out=None):
    """torch.matmul(a, b[, out=out]); See Note [Strided batched matmul]."""
    if _strided_batches(a, b, out):
        if out is None:
            out = torch.empty(*a.shape[:-1], b.shape[-1], dtype=a.dtype, device=a.device)
        for i in itertools.product(*map(range, a.shape[:-3])):
            torch.bmm(a[i], b[i], out=out[i])
        return out
    if out is None:
        return torch.matmul(a, b)
    return torch.matmul(a, b, out=out)


def _strided_batches(a, b, out) -> bool:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if a.dim() < 4 or a.dim() != b.dim() or a.shape[:-2] != b.shape[:-2]:
        return False
    if (a.device.type != "cpu" or b.device != a.device or a.dtype != b.dtype
            or not a.dtype.is_floating_point):
        return False
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return False
    m, n = a.shape[-2], b.shape[-1]
    if out is not None and not (out.is_contiguous() and out.dtype == a.dtype
                                and tuple(out.shape) == (*a.shape[:-2], m, n)):
        return False
    if math.prod(a.shape[:-3]) > STRIDED_MAX_SLICES or a.numel() == 0 or b.numel() == 0:
        return False
    if _batches_merge(a) and _batches_merge(b):
        return False  # matmul views them as one batch: nothing to save
    return _blas_matrices(a) and _blas_matrices(b)


def _batches_merge(t) -> bool:
    """Whether t's batch dims (all but the last two) merge into one without a copy."""
    dims = [(s, st) for s, st in zip(t.shape[:-2], t.stride()[:-2]) if s != 1]
    return all(dims[i][1] == dims[i + 1][0] * dims[i + 1][1] for i in range(len(dims) - 1))


def _blas_matrices(t) -> bool:
    """Whether each matrix of t is row- or column-major with a leading dim BLAS takes."""
    rows, cols = t.shape[-2:]
    rs, cs = t.stride()[-2:]
    return (cs == 1 and rs >= max(cols, 1)) or (rs == 1 and cs >= max(rows, 1))
