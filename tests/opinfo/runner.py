"""Run refcomp over PyTorch's OpInfo database (op_db): float32, first 5 samples of each op.

Each sample is called as `fn(input, args, kwargs) = op.op(input, *args, **kwargs)`,
compiled by refcomp (backend `llvm` on CPU) and by nothing (eager), each on its own
copies of the sample.  An outcome is one of:

- `captured`: one graph, no break, outputs (and inputs, which the op may write) equal
  to eager's;
- `broke`: refcomp broke the graph (or ran the frame eagerly); the first reason's id
  and text are kept.  Outputs must still equal eager's (a break is never a license to
  be wrong);
- `mismatched`: outputs or written inputs differ from eager, or refcomp raised where
  eager did not: a bug (the test demands zero);
- `skipped`: eager itself raises on the sample, the op has no float32 CPU support or
  no sample, or its outputs are undefined (uninitialized memory: `empty*`).

With a `layout` every tensor argument is laid out anew, values unchanged, and each output
tensor's strides must also equal eager's (over the dims of size > 1, and not for a result
with no element, as the fuzzer compares them): the layout oracle for ops the fuzzer does
not generate, and the only one that sees what torch's meta kernels get wrong
(spec/correctness.md, "Output layout").
The layouts: `transposed` (two or more dims: the last two swapped in memory,
`t.mT.contiguous().mT`), `permuted` (all dims reversed in memory: column-major; 2-d as
transposed), `channels_last` (4-d: channels_last, 5-d: channels_last_3d,
others as they are), `step` (one or more dims: every other element of a buffer twice as
long in the last dim, not dense), `offset` (row-major at storage offset 1).

`python -m tests.opinfo.runner [--every N] [--backend B] [--layout L] [--samples N]
[--dtype D]` prints the table (spec/tracer.md, "OpInfo coverage", quotes the latest; tests/opinfo/RUNS.md
logs every run).
"""

from __future__ import annotations

import argparse
import collections
import copy
import itertools
import warnings

import torch

# Ops whose results are uninitialized memory: nothing to compare.
UNDEFINED_OUTPUTS = frozenset({"empty", "empty_like", "new_empty", "new_empty_strided",
                               "empty_strided", "empty_permuted"})


def op_db():
    from torch.testing._internal.common_methods_invocations import op_db as db

    return db


def first_sample(op):
    """The op's first float32 CPU sample, or None."""
    got = first_samples(op, 1)
    return got[0] if got else None


def first_samples(op, n, dtype=torch.float32):
    """The op's first `n` CPU samples of `dtype` (fewer where it has fewer)."""
    if dtype not in op.supported_dtypes("cpu"):
        return []
    return list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False), n))


def _clone(x):
    if isinstance(x, torch.Tensor):
        return _copy_in_place_of(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(i) for i in x) if type(x) in (list, tuple) else copy.copy(x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _copy_in_place_of(t):
    """A copy of `t` laid out as `t`: its whole storage cloned, the same storage offset and
    strides.  `clone()` makes a tensor that is not dense (`step`) or that starts inside its
    storage (`offset`, a view of a larger buffer) row-major at offset 0, so those layouts
    never reached the call (and ops that read storage, `as_strided`, saw other elements)."""
    t = t.detach()
    if t.layout != torch.strided or t.is_quantized or t.is_conj() or t.is_neg():
        return t.clone()
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    return out.set_(t.untyped_storage().clone(), t.storage_offset(), t.shape, t.stride())


def _transposed(t):
    """`t` with its last two dims swapped in memory, values unchanged."""
    return t.mT.contiguous().mT if t.dim() >= 2 else t


def _permuted(t):
    """`t` with all its dims reversed in memory (column-major), values unchanged."""
    rev = tuple(reversed(range(t.dim())))
    return t.permute(rev).contiguous().permute(rev) if t.dim() >= 3 else _transposed(t)


def _channels_last(t):
    """A 4-d (5-d) `t` laid out channels_last (channels_last_3d)."""
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    return t.contiguous(memory_format=fmt) if fmt is not None else t


def _step(t):
    """`t` as every other element of a buffer twice as long in its last dim: not dense."""
    if t.dim() == 0:
        return t
    base = torch.empty(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype)
    out = base[..., ::2]
    out.copy_(t)
    return out


def _offset(t):
    """`t` row-major one element into a larger buffer: a storage offset of 1."""
    base = torch.empty(t.numel() + 1, dtype=t.dtype)
    return base[1:].view(t.shape).copy_(t)


# layout name -> how a tensor argument is laid out (values unchanged)
LAYOUTS = {"transposed": _transposed, "permuted": _permuted, "channels_last": _channels_last,
           "step": _step, "offset": _offset}


def _laid_out(x, how):
    """`x` (a sample's argument, nested) with every strided tensor laid out by `how`."""
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided or x.is_quantized:
            return x
        return how(x.detach()).requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(_laid_out(i, how) for i in x) if type(x) in (list, tuple) else x
    if isinstance(x, dict):
        return {k: _laid_out(v, how) for k, v in x.items()}
    return x


def _dense_strides(t):
    return tuple(st for sz, st in zip(t.shape, t.stride()) if sz > 1)


def _stride_difference(got, want, path="out"):
    """Where an output tensor's strides differ from eager's, or None."""
    if isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor):
        # a result with no element: eager's strides are undefined (spec/testing.md)
        if got.layout == want.layout == torch.strided and want.numel() and \
                _dense_strides(got) != _dense_strides(want):
            return f"{path}: strides {got.stride()}, eager {want.stride()}" \
                   f" (shape {tuple(want.shape)})"
        return None
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
        for i, (g, w) in enumerate(zip(got, want)):
            d = _stride_difference(g, w, f"{path}[{i}]")
            if d:
                return d
    return None


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        # float32 and wider: 1e-4; half precision: assert_close's own tolerances for the
        # dtype (spec/correctness.md, section 1)
        tol = {} if a.dtype in (torch.float16, torch.bfloat16) else \
            {"atol": 1e-4, "rtol": 1e-4}
        try:
            torch.testing.assert_close(a, b, equal_nan=True, **tol)
            return True
        except AssertionError:
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b) or abs(a - b) <= 1e-4 * max(1.0, abs(b))
    return a == b


def run_one(op, backend="llvm", layout=None, sample=None):
    """(outcome, detail) for `op`'s first float32 sample, or `sample` (`layout`: None or
    a name in LAYOUTS, see the module's docstring)."""
    import refcomp

    if op.name in UNDEFINED_OUTPUTS:
        return "skipped", "uninitialized outputs"
    if sample is None:
        sample = first_sample(op)
    if sample is None:
        return "skipped", "no float32 CPU sample"
    f = op.op

    def fn(inp, args, kwargs):
        return f(inp, *args, **kwargs)

    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"layout must be None or one of {sorted(LAYOUTS)}, not {layout!r}")
    if layout is not None:
        sample = sample.transform(lambda x: _laid_out(x, LAYOUTS[layout]))
    eager_in = _clone((sample.input, tuple(sample.args), dict(sample.kwargs)))
    try:
        want = fn(*eager_in)
    except Exception as e:
        return "skipped", f"eager raises {type(e).__name__}"
    comp_in = _clone((sample.input, tuple(sample.args), dict(sample.kwargs)))
    refcomp.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ex = refcomp.explain(fn, *comp_in, backend=backend)
    except Exception as e:
        return "mismatched", f"refcomp raises {type(e).__name__}: {str(e)[:200]}"
    if not _equal(ex.result, want) or not _equal(comp_in, eager_in):
        return "mismatched", "values differ from eager"
    if layout is not None:
        diff = _stride_difference(ex.result, want)
        if diff:
            return "mismatched", diff
    if ex.graph_break_count or ex.graph_count != 1:
        if ex.break_reasons:
            r = ex.break_reasons[0]
            return "broke", f"{r['id']} {r['reason']}"
        return "broke", f"{ex.graph_count} graphs"
    return "captured", ""


def run(ops, backend="llvm", layout=None, samples=1, dtype=torch.float32):
    """{key: (outcome, detail)} for the first `samples` samples of each op (of `dtype`); a
    sample after the first has the key `name#i`."""
    results = {}
    for op in ops:
        key = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
        try:
            found = first_samples(op, samples, dtype) if samples > 1 or \
                dtype != torch.float32 else [None]
            if not found:
                results[key] = ("skipped", f"no {dtype} CPU sample")
                continue
        except Exception as e:  # the runner itself must not stop on one op
            results[key] = ("mismatched", f"runner error {type(e).__name__}: {e}")
            continue
        for i, sample in enumerate(found):
            k = f"{key}#{i}" if i else key
            try:
                results[k] = run_one(op, backend, layout, sample)
            except Exception as e:  # the runner itself must not stop on one op
                results[k] = ("mismatched", f"runner error {type(e).__name__}: {e}")
    return results


def summary(results) -> str:
    counts = collections.Counter(outcome for outcome, _ in results.values())
    considered = counts["captured"] + counts["broke"] + counts["mismatched"]
    rate = counts["captured"] / considered if considered else 0.0
    lines = [f"samples: {len(results)}  skipped: {counts['skipped']}  considered: {considered}",
             f"captured in one graph and equal to eager: {counts['captured']}"
             f" ({100 * rate:.1f}%)",
             f"broke: {counts['broke']}  mismatched: {counts['mismatched']}"]
    by_reason = collections.Counter(
        detail.split(":")[0] + ": " + _short(detail) for outcome, detail in results.values()
        if outcome == "broke")
    lines.append("breaks by reason:")
    lines += [f"  {n:4d}  {r}" for r, n in by_reason.most_common()]
    mism = [f"  {k}: {d}" for k, (o, d) in results.items() if o == "mismatched"]
    if mism:
        lines.append("mismatches:")
        lines += mism
    return "\n".join(lines)


def _short(detail: str) -> str:
    text = detail.split(":", 1)[1].strip() if ":" in detail else detail
    return text[:110]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=int, default=1, help="run every N-th op")
    parser.add_argument("--backend", default="llvm")
    parser.add_argument("--only", default=None, help="comma-separated op names")
    parser.add_argument("--layout", choices=sorted(LAYOUTS), default=None,
                        help="lay tensor arguments out so; compare strides too")
    parser.add_argument("--samples", type=int, default=5,
                        help="the first N samples of each op (users' calls vary)")
    parser.add_argument("--dtype", default="float32", help="the samples' dtype")
    parser.add_argument("--list", action="store_true", help="print each op's outcome")
    a = parser.parse_args(argv)
    ops = op_db()[::a.every]
    if a.only:
        names = set(a.only.split(","))
        ops = [o for o in op_db() if o.name in names]
    results = run(ops, a.backend, a.layout, a.samples, getattr(torch, a.dtype))
    if a.list:
        for k, (o, d) in sorted(results.items()):
            print(f"{o:10s} {k:40s} {d[:150]}")
    print(summary(results))


if __name__ == "__main__":
    main()
