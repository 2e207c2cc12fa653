"""The numpy executor for Kernels: the oracle that tests lowering without LLVM.

Owns: `run_kernel(kernel, buffers)`.  Must not know: graphs, LLVM.  Spec:
spec/codegen.md, "Kernel model".

Instead of looping, it evaluates each stage over its whole iteration grid at once
(outer dims then stage dims, as numpy axes): a loop variable is an `arange`
shaped to broadcast along its axis, a load gathers at the evaluated index, a
store scatters, and a reduce folds the stage axes.  The scalar ops are
`NumpyScalarOps`, the same vocabulary the backends implement.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import sympy

from codegen.kernel import Buffer, DivMod, Index, Kernel, Let, Reduce, Stage, Store
from codegen.scalar import NumpyScalarOps
from ir.types import round_to_dtype

_OPS = NumpyScalarOps()

_FOLD = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
         "any": np.logical_or, "all": np.logical_and}


def reduce_init(op: str, dtype) -> np.ndarray:
    """The identity each accumulator starts from (max/min: -inf/+inf or the int limits)."""
    np_dtype = dtype.np
    if op in ("sum", "any"):
        return np.zeros((), np_dtype)
    if op in ("prod", "all"):
        return np.ones((), np_dtype)
    if dtype.is_float:
        return np.asarray(-np.inf if op == "max" else np.inf, np_dtype)
    info = np.iinfo(np_dtype) if not dtype.is_bool else None
    if info is None:
        return np.asarray(op == "min", np_dtype)
    return np.asarray(info.min if op == "max" else info.max, np_dtype)


def run_kernel(kernel: Kernel, buffers: dict, values: dict | None = None) -> None:
    """Run `kernel` on flat numpy arrays (buffer name -> array); outputs are written in place.

    `values` binds the kernel's size symbols (symbol or its name -> int), as the
    compiled kernels take them as arguments (Note [Runtime sizes])."""
    values = {sympy.Symbol(str(k), integer=True, positive=True): int(v)
              for k, v in (values or {}).items()}
    missing = set(kernel.params) - set(values)
    if missing:
        raise ValueError(f"run_kernel: no value for size symbol(s) {sorted(map(str, missing))}")
    if values:
        kernel = _bind(kernel, values)
    outer_sizes = [n for _, n in kernel.outer]
    accs = {a.name: np.broadcast_to(reduce_init(a.op, a.dtype), outer_sizes).copy()
            for a in kernel.accs}
    acc_ops = {a.name: a.op for a in kernel.accs}
    with np.errstate(all="ignore"):
        for stage in kernel.stages:
            dims = list(kernel.outer) + list(stage.ranges)
            shape = tuple(n for _, n in dims)
            grid = {}
            for axis, (var, n) in enumerate(dims):
                view = [1] * len(dims)
                view[axis] = n
                grid[var] = np.arange(n, dtype=np.int64).reshape(view)
            stage_axes = tuple(range(len(kernel.outer), len(dims)))
            env: dict = {}
            for s in stage.body:
                if isinstance(s, Let):
                    env[s.name] = _let(s, env, buffers, grid, accs, len(stage.ranges))
                elif isinstance(s, Store):
                    value = np.broadcast_to(env[s.value], shape)
                    index = np.broadcast_to(_index(s.index, grid), shape)
                    out = buffers[s.buf]
                    out[index.reshape(-1)] = round_to_dtype(value.reshape(-1), _dtype_of(
                        kernel, s.buf))
                elif isinstance(s, Reduce):
                    value = np.broadcast_to(env[s.value], shape)
                    fold = _FOLD[acc_ops[s.acc]]
                    acc = accs[s.acc]
                    folded = fold.reduce(value.astype(acc.dtype), axis=stage_axes) \
                        if stage_axes else value
                    accs[s.acc] = fold(acc, folded).astype(acc.dtype)


def _dtype_of(kernel: Kernel, name: str):
    for b in kernel.buffers:
        if b.name == name:
            return b.dtype
    raise KeyError(name)


def _let(s: Let, env, buffers, grid, accs, n_stage_dims):
    attrs = dict(s.attrs)
    if s.op == "load":
        array = buffers[attrs["buf"]]
        return array[_index(attrs["index"], grid)].astype(s.dtype.np)
    if s.op == "acc":
        acc = accs[attrs["acc"]]
        return acc.reshape(acc.shape + (1,) * n_stage_dims)
    args = [env[a] for a in s.args]
    if s.op == "const":
        return np.asarray(attrs["value"]).astype(s.dtype.np)
    if s.op == "size":
        return np.asarray(int(attrs["value"])).astype(s.dtype.np)
    if s.op == "cast":
        x, target = np.asarray(args[0]), attrs["dtype"]
        if target != s.dtype:  # a rounding cast to f16/bf16 (Note [Half casts], lower.py)
            x = _OPS.cast(x.astype(np.float32), target)
        return _OPS.cast(x, s.dtype)
    if s.op == "compare":
        return _OPS.compare(attrs["name"], *args)
    result = getattr(_OPS, s.op)(*args)
    return np.asarray(result).astype(s.dtype.np, copy=False)


def _index(idx: Index, grid) -> np.ndarray:
    total = np.asarray(idx.const, dtype=np.int64)
    for atom, c in idx.terms:
        if isinstance(atom, DivMod):
            value = _index(atom.inner, grid) // atom.div
            if atom.mod is not None:
                value = value % atom.mod
        else:
            value = grid[atom]
        total = total + c * value
    return total


def _bind(k: Kernel, values: dict) -> Kernel:
    """The kernel with its size symbols replaced by `values` (a static kernel)."""
    def ev(x):
        return x if isinstance(x, int) else int(x.subs(values))

    def index(idx: Index) -> Index:
        terms = []
        for atom, c in idx.terms:
            if isinstance(atom, DivMod):
                atom = DivMod(index(atom.inner), ev(atom.div),
                              None if atom.mod is None else ev(atom.mod))
            terms.append((atom, ev(c)))
        return Index(tuple(terms), ev(idx.const))

    def stmt(s):
        if isinstance(s, Store):
            return Store(s.buf, index(s.index), s.value)
        if isinstance(s, Let) and s.op in ("load", "size"):
            attrs = dict(s.attrs)
            if s.op == "load":
                attrs["index"] = index(attrs["index"])
            else:
                attrs["value"] = ev(attrs["value"])
            return Let(s.name, s.op, s.args, tuple(sorted(attrs.items())), s.dtype)
        return s

    return dataclasses.replace(
        k, buffers=tuple(Buffer(b.name, b.dtype, ev(b.numel), b.is_output) for b in k.buffers),
        outer=tuple((v, ev(n)) for v, n in k.outer),
        stages=tuple(Stage(tuple((v, ev(n)) for v, n in st.ranges),
                           tuple(stmt(s) for s in st.body)) for st in k.stages))
