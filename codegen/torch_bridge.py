"""The seam between refcomp's IR types and torch: dtypes, devices, numpy <-> torch.

Owns: the one table mapping IR `DType` to `torch.dtype` (and back), `tensor_type`
(the IR type of a concrete tensor), and array conversion both ways, including
bf16, which the reference semantics store in float32 numpy arrays (ir/types.py).
Must not know: graphs, ops, backends.  Spec: spec/codegen.md, "Backends".
"""

from __future__ import annotations

import numpy as np
import torch

from ir.types import ALL_DTYPES, COMPLEX_DTYPES, EXTERN_DTYPES, DType, TensorType, bf16, c32

_TO_TORCH: dict[DType, torch.dtype] = {d: getattr(torch, d.torch_name)
                                       for d in ALL_DTYPES + COMPLEX_DTYPES + EXTERN_DTYPES}
_FROM_TORCH: dict[torch.dtype, DType] = {t: d for d, t in _TO_TORCH.items()}


def torch_dtype(dtype: DType) -> torch.dtype:
    """The torch dtype of an IR dtype (bf16 -> torch.bfloat16)."""
    return _TO_TORCH[dtype]


def dtype_of(dtype: torch.dtype) -> DType:
    """The IR dtype of a torch dtype; torch dtypes refcomp lacks raise a ValueError."""
    try:
        return _FROM_TORCH[dtype]
    except KeyError:
        valid = ", ".join(str(t) for t in _FROM_TORCH)
        raise ValueError(f"refcomp has no dtype for {dtype}; supported: {valid}") from None


def device_name(device: torch.device) -> str:
    """The IR's device string: "cpu", or the type and index ("cuda:0") for others."""
    if device.type == "cpu":
        return "cpu"
    return str(device) if device.index is not None else device.type


def tensor_type(t: torch.Tensor) -> TensorType:
    """The IR type of a concrete tensor: dtype, static shape, device."""
    return TensorType(dtype_of(t.dtype), tuple(int(s) for s in t.shape), device_name(t.device))


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy array holding the tensor's values in the IR's storage dtype.

    Detaches and moves to the CPU; any strides are fine.  bf16 becomes a float32
    array (exact: every bf16 value is a float32 value).  The result may share
    memory with `t`; callers must not write to it.
    """
    t = t.detach().resolve_conj().resolve_neg()  # numpy reads no lazy conjugate
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    elif t.dtype == torch.complex32:  # stored as complex64, as bf16 is as float32
        t = t.to(torch.complex64)
    return t.numpy()


def from_numpy(array, dtype: DType, device="cpu") -> torch.Tensor:
    """A fresh tensor (never sharing memory with `array`) of `dtype` on `device`.

    bf16 values arrive as float32 storage; the conversion to torch.bfloat16
    rounds to nearest even, which is exact for values already rounded to bf16.
    """
    array = np.array(array, dtype=dtype.np, copy=True, order="C")
    # numpy's strides of an empty array are not row-major (torch.from_numpy keeps them)
    t = torch.from_numpy(array) if array.size else torch.empty(array.shape,
                                                               dtype=torch.from_numpy(array).dtype)
    if dtype is bf16:
        t = t.to(torch.bfloat16)
    elif dtype is c32:
        t = t.to(torch.complex32)
    if torch.device(device).type != "cpu":
        t = t.to(device)
    return t
