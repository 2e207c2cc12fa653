"""Sweep the f32 vector-math functions (codegen/llvm/vmath.py) over every STRIDE-th float32
bit pattern of both signs (subnormals, normals of every binade, +-inf and NaN included) and
measure their error in ulps against float64, beside eager's torch op on the same inputs.

Run as `PYTHONPATH=. python -m tests.codegen.vmath_sweep [stride]` to print the table kept in
spec/codegen.md ("Numerics"); tests/codegen/test_vmath_ulps.py runs a sparser sweep and
fails above the bounds recorded there.

Error in ulps: |got - exact| / ulp(exact), ulp(v) the spacing of float32 at v's magnitude,
over inputs whose exact result is a normal float32 (a subnormal exact result may come
back as 0: Note [exp underflows to 0]; those are counted as flushed, and any other value
there is an error).  Results where the exact value is +-inf, NaN or 0 must match it.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

import ir
from codegen.backends import get_backend

CHUNK = 1 << 22
TINY = float(np.finfo(np.float32).tiny)
F32_MAX = float(np.finfo(np.float32).max)


def _float64(fn):
    """torch's float64 kernel as the reference (within an ulp of float64, far below the
    float32 ulps measured; scipy is not a test dependency)."""
    return lambda x: fn(torch.from_numpy(np.asarray(x, np.float64))).numpy()


_sigmoid64 = _float64(torch.sigmoid)


# name: (float64 reference, eager's op)
FUNCTIONS = {
    "exp": (np.exp, torch.exp),
    "log": (np.log, torch.log),
    "tanh": (np.tanh, torch.tanh),
    "sigmoid": (_sigmoid64, torch.sigmoid),
    "erf": (_float64(torch.erf), torch.erf),
}


def sweep_inputs(stride: int) -> np.ndarray:
    """Every stride-th bit pattern from +0 to +inf, both signs, and a quiet NaN."""
    bits = np.arange(0, 0x7F800000, stride, dtype=np.uint32)
    bits = np.concatenate([bits, [0x7F800000, 0x7FC00000]]).astype(np.uint32)
    pos = bits.view(np.float32)
    return np.concatenate([pos, -pos])


def _kernel(name: str):
    text = f"func @f(%x: f32[{CHUNK}]) -> f32[{CHUNK}] {{\n  %0 = {name} %x : f32[{CHUNK}]\n" \
           f"  return %0\n}}"
    return get_backend("llvm").compile_graph(ir.parse(text), {})


class Errors:
    """The running maximum (and where) of one candidate's error over chunks."""

    def __init__(self):
        self.max_ulp, self.at, self.flushed, self.bad_special = 0.0, None, 0, []

    def add(self, x, got, want):
        got = got.astype(np.float64)
        with np.errstate(all="ignore"):
            want32 = want.astype(np.float32)
        exact_normal = np.isfinite(want) & (np.abs(want) >= TINY) & (np.abs(want) <= F32_MAX)
        ulp = np.spacing(np.abs(want32[exact_normal])).astype(np.float64)
        err = np.abs(got[exact_normal] - want[exact_normal]) / ulp
        err[np.isnan(err)] = np.inf
        if err.size and err.max() > self.max_ulp:
            i = int(err.argmax())
            self.max_ulp, self.at = float(err[i]), float(x[exact_normal][i])
        sub = (np.abs(want) < TINY) & (want != 0)
        ok_sub = (got[sub] == 0) | (np.abs(got[sub] - want[sub]) <= 2.0 ** -149 * 2)
        self.flushed += int((got[sub] == 0).sum())
        special = ~exact_normal & ~sub
        # exact +-inf, NaN, 0, or beyond FLT_MAX (rounds to inf): the same float32
        s_got, s_want = got[special], want32[special].astype(np.float64)
        match = (s_got == s_want) | (np.isnan(s_got) & np.isnan(s_want))
        bad = np.concatenate([x[sub][~ok_sub], x[special][~match]])
        self.bad_special.extend(float(v) for v in bad[:4])


def measure(name: str, stride: int, eager: bool = True) -> dict:
    """{"refcomp": Errors, "eager": Errors} for `name` over the sweep of `stride`."""
    ref, op = FUNCTIONS[name]
    fn = _kernel(name)
    xs = sweep_inputs(stride)
    result = {"refcomp": Errors(), "n": len(xs)}
    if eager:
        result["eager"] = Errors()
    buf = np.zeros(CHUNK, np.float32)
    for lo in range(0, len(xs), CHUNK):
        x = xs[lo:lo + CHUNK]
        buf[:len(x)] = x
        buf[len(x):] = 1.0
        with np.errstate(all="ignore"):
            want = ref(x.astype(np.float64))
        (got,) = fn(torch.from_numpy(buf))
        result["refcomp"].add(x, got.numpy()[:len(x)], want)
        if eager:
            result["eager"].add(x, op(torch.from_numpy(x)).numpy(), want)
    return result


def main(stride: int = 61):
    torch.set_num_threads(1)
    print(f"every {stride}th float32 bit pattern, both signs, +-inf and NaN")
    print("| function | values | refcomp max ulp (at x) | eager max ulp | flushed subnormal "
          "results | special values wrong |")
    for name in FUNCTIONS:
        r = measure(name, stride)
        ours, eager = r["refcomp"], r["eager"]
        print(f"| {name} | {r['n']:,} | {ours.max_ulp:.2f} ({ours.at:.6g}) | "
              f"{eager.max_ulp:.2f} ({eager.at:.6g}) | {ours.flushed:,} (eager "
              f"{eager.flushed:,}) | {ours.bad_special[:4]} (eager {eager.bad_special[:4]}) |",
              flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 61)
