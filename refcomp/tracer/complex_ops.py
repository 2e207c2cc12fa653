"""Complex tensors in the torch table: the entries only complex values have, and which
existing entries are right for complex operands.

Owns: `COMPLEX_ENTRIES` (the table's callables whose builder computes what torch does
for complex operands too; any other call given a complex operand refuses it, RB013, and
becomes one opaque node) and the entries for view_as_real/view_as_complex, real/imag,
complex/polar, conj_physical and angle.  Spec: spec/ir.md, "Complex values".
"""

from __future__ import annotations

import dataclasses
import operator

import torch

from refcomp.tracer import tensor_layout, torch_ops  # noqa: F401 (their entries first)
from refcomp.tracer.torch_table import TABLE, T, cast, entry, result_dtype

# Entries whose builders are right for complex operands: the same IR ops, each of which
# has its complex form (the `complex` op fact), composed as torch composes them.
COMPLEX_ENTRIES = (
    # arithmetic
    torch.add, T.add, operator.add, T.__radd__, T.add_,
    torch.sub, T.sub, operator.sub, torch.subtract, T.__rsub__, T.sub_,
    torch.mul, T.mul, operator.mul, torch.multiply, T.__rmul__, T.mul_,
    torch.div, T.div, operator.truediv, torch.true_divide, torch.divide, T.__rtruediv__,
    T.div_,
    torch.eq, T.eq, operator.eq, torch.ne, T.ne, operator.ne,
    torch.neg, T.neg, operator.neg, T.negative, torch.negative, T.neg_,
    torch.abs, T.abs, torch.exp, T.exp, T.exp_,
    torch.where, T.where, torch.sum, T.sum, torch.mean, T.mean,
    # layout and copies
    T.reshape, torch.reshape, T.view, T.flatten, torch.flatten, T.unflatten, torch.unflatten,
    T.view_as, T.reshape_as, T.expand, torch.broadcast_to, T.broadcast_to, T.expand_as,
    T.permute, torch.permute, T.transpose, torch.transpose, T.swapaxes, torch.swapaxes,
    T.t, torch.t, T.unsqueeze, torch.unsqueeze, T.squeeze, torch.squeeze, T.contiguous,
    T.clone, torch.clone, T.detach, torch.detach, T.to, T.type, T.type_as, T.float,
    T.double, torch.cat, torch.concat, torch.concatenate, torch.stack, T.split,
    torch.split, T.chunk, torch.chunk, T.narrow, torch.narrow,
)


def _admit(fns) -> None:
    for fn in fns:
        TABLE[fn] = dataclasses.replace(TABLE[fn], complex=True)


@entry(torch.view_as_real, view=True, complex=True)
def _view_as_real(ctx, x):
    torch.view_as_real(x.meta)  # eager's error for a lazily conjugated tensor
    return ctx.builder.view_as_real(x.value)


@entry(torch.view_as_complex, view=True, complex=True)
def _view_as_complex(ctx, x):
    return ctx.builder.view_as_complex(x.value)


def _part(k):
    def build(ctx, x):
        if not x.meta.is_complex():
            return x  # torch.real of a real tensor is the tensor itself (imag raises)
        B, rank = ctx.builder, x.value.type.rank
        pair = B.view_as_real(x.value)
        return B.squeeze(B.slice(pair, dim=rank, start=k, stop=k + 1), dims=[rank])
    return build


entry(torch.real, view=True, complex=True)(_part(0))
entry(torch.imag, view=True, complex=True)(_part(1))


@entry(torch.complex, complex=True, pointwise=True)
def _complex(ctx, real, imag):
    dt = result_dtype(real, imag)
    return ctx.builder.complex(cast(ctx, real, dt), cast(ctx, imag, dt))


@entry(torch.polar, complex=True, pointwise=True)
def _polar(ctx, abs, angle):
    """abs cos(angle) + i abs sin(angle), as torch.polar computes it"""
    B, dt = ctx.builder, result_dtype(abs, angle)
    r, a = cast(ctx, abs, dt), cast(ctx, angle, dt)
    return B.complex(B.mul(r, B.cos(a)), B.mul(r, B.sin(a)))


@entry(torch.conj_physical, T.conj_physical, complex=True, pointwise=True)
def _conj_physical(ctx, x):
    if not x.meta.is_complex():
        raise TypeError("conj_physical of a real tensor")  # RB013: an opaque call
    return ctx.builder.conj(x.value)


@entry(torch.angle, T.angle, complex=True, pointwise=True)
def _angle(ctx, x):
    if not x.meta.is_complex():
        raise TypeError("angle of a real tensor")  # RB013: an opaque call
    return ctx.builder.angle(x.value)


_admit(COMPLEX_ENTRIES)
