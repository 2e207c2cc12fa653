"""Property: Frontend I's random programs with graph-breaking constructs inserted at random
statement boundaries (print, .item(), a tensor-valued if, a global counter, appends to a
global list and to an argument list, a helper that prints, a print inside no_grad) still
equal eager: the returned tensors, the printed text and every Python side effect, over two
calls (the second reuses the cached segments and resume points)."""

import contextlib
import io
import linecache
import re

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from refcomp.api import CompiledFunction
from refcomp.config import resolve_options
from tests.breaks import graph_break
from tests.frontend.test_random_programs import _make, programs

BREAKS = ["graph_break('b{k}')", "print('p{k}', tuple({a}.shape), {a}.dtype)",
          "ITEMS.append({a}.float().sum().item())",
          "if {a}.float().sum() > 0:\n        {a} = {a} + 1\n    else:\n        {a} = {a} - 1",
          "N += 1\n    {a} = {a} + N",
          "out.append({a} * 2)",
          "{a} = {a} * (2 if {a}.float().mean().item() > 0 else 3)",
          "{a} = HELPER({a}, out)",
          "with torch.no_grad():\n        {a} = {a} * 2\n        print('ng', {a}.dtype)"]
# A user function that breaks inside: the caller breaks at the call, and the helper is
# compiled as a frame of its own.
HELPER = '''
def HELPER(t, out):
    print("helper", tuple(t.shape))
    out.append(t.sum())
    return t + 1
'''


@st.composite
def breaking_programs(draw):
    source, dtype, shape, layouts, seed = draw(programs())
    lines = source.splitlines()
    names = re.match(r"def f\((.*)\):", lines[0]).group(1).split(", ")
    # Statement starts (4-space indent, not `else:`), after the def line, up to the return.
    starts = [i for i, line in enumerate(lines) if i > 0 and re.match(r"    \S", line)
              and not line.startswith("    else")]
    for k in range(draw(st.integers(1, 3))):
        at = draw(st.sampled_from(starts))
        stmt = draw(st.sampled_from(BREAKS)).format(a=draw(st.sampled_from(names)), k=k)
        lines.insert(at, "    " + stmt)
        starts = [s + (s >= at) for s in starts] + [at]  # `lines` items may hold newlines
    lines[0] = f"def f({', '.join(names)}, out):\n    global N"
    return "\n".join(lines) + "\n", dtype, shape, layouts, seed


def _load(source, counter=[0]):
    counter[0] += 1
    filename = f"<random breaking program {counter[0]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"torch": torch, "ITEMS": [], "N": 0, "graph_break": graph_break}
    exec(compile(source + HELPER, filename, "exec"), namespace)
    return namespace["f"], namespace


def _run(fn, args, out):
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        result = fn(*[a.clone() for a in args], out)
    return result, text.getvalue()


def _close(got, want, tol, what):
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, what
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True,
                                   msg=lambda m: f"{what}\n{m}")
    elif isinstance(want, float):
        assert abs(got - want) <= tol * (1 + abs(want)) or got == want, what
    else:
        assert got == want, what


@settings(max_examples=40, deadline=None)
@given(breaking_programs(), st.sampled_from(["eager", "interp"]))
def test_random_programs_with_breaks_equal_eager(program, backend):
    source, dtype, shape, layouts, seed = program
    gen = torch.Generator().manual_seed(seed)
    args = [_make(shape, dtype, layout, gen) for layout in layouts]
    eager_fn, eager_ns = _load(source)
    compiled_fn, compiled_ns = _load(source)
    # A private cache, like explain(): the global table keeps no trace of these programs.
    compiled = CompiledFunction(compiled_fn, backend, False, resolve_options(None),
                                private_cache=True)
    tol = 1e-4 if dtype == torch.float32 else 1e-9
    eager_out, compiled_out = [], []
    for call in range(2):
        try:
            want, want_text = _run(eager_fn, args, eager_out)
        except Exception:
            return  # invalid in eager (e.g. a shape mismatch): nothing to compare
        got, got_text = _run(compiled, args, compiled_out)
        what = f"{source}\n(call {call}, {backend})"
        assert got_text == want_text, what
        for g, w in zip(got, want, strict=True):
            _close(g, w, tol, what)
        assert compiled_ns["N"] == eager_ns["N"], what
        assert len(compiled_ns["ITEMS"]) == len(eager_ns["ITEMS"]), what
        for g, w in zip(compiled_ns["ITEMS"], eager_ns["ITEMS"]):
            _close(g, w, 1e-4, what)  # sums of `.float()`: float32 accumulation order
        assert len(compiled_out) == len(eager_out), what
        for g, w in zip(compiled_out, eager_out):
            _close(g, w, tol, what)
