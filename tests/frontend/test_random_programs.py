"""Property: random Python functions built from the torch table, written as real source
code (so the bytecode is ordinary), compiled with "eager" and "interp", equal eager on
random shapes, dtypes and non-contiguous inputs."""

import linecache

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import refcomp

FLOAT_DTYPES = [torch.float32, torch.float64]
HALF_DTYPES = [torch.float16, torch.bfloat16]
INT_DTYPES = [torch.int64, torch.int32]
TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 1e-2,
             torch.bfloat16: 5e-2}

# Statement templates over same-shaped tensors a, b (new value is assigned to the target).
# `{f}` marks templates only valid for floating operands.
BINARY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "torch.maximum({a}, {b})",
          "torch.where({a} > {b}, {a}, {b})", "{a} * 2 + 1", "{a} - 3",
          "torch.add({a}, {b}, alpha=2)", "({a} >= {b}).to({a}.dtype) * {b}",
          "{a}.sum(dim=1, keepdim=True) + {b}", "{a}.amax(dim=0, keepdim=True) - {b}",
          "{a}.t().contiguous().t() * {b}", "abs({a}) + {b}", "-{a}",
          "{a}.clamp(min=-2, max=2)", "torch.cat([{a}, {b}], dim=1)[:, ::2] + {b}",
          "{a}[1:].sum(0, keepdim=True) + {b}",
          "{a} + {b}.sum()", "{a}.flip_free_reshape", "{a} * {b}[0]",
          "torch.stack([{a}, {b}]).amax(0)"]
FLOAT_ONLY = ["torch.relu({a})", "torch.sigmoid({a}) * {b}", "torch.tanh({a} + {b})",
              "{a} / ({b}.abs() + 1)", "torch.exp({a}.clamp(max=5))", "torch.sin({a}) + {b}",
              "torch.softmax({a}, dim=1) * {b}", "{a}.mean(dim=0, keepdim=True) + {b}",
              "torch.sqrt({a}.abs() + 1)", "{a} * 0.5 + {b} * 1.5", "{a} ** 2 - {b}",
              "torch.nn.functional.gelu({a})", "torch.log1p({a}.abs())"]
CONTROL = ["for i in range({k}):\n        {t} = {t} + i", "if {a}.shape[0] > {k}:\n"
           "        {t} = {t} * 2\n    else:\n        {t} = {t} - 1",
           "{t} = {t}.clone()\n    {t}.add_(1)", "{t} = {t}.clone()\n    {t}[0] = 3"]


def _stmt(draw, names, floating):
    pool = BINARY + (FLOAT_ONLY if floating else [])
    kind = draw(st.sampled_from(["op"] * 4 + ["control"]))
    a = draw(st.sampled_from(names))
    b = draw(st.sampled_from(names))
    if kind == "control":
        template = draw(st.sampled_from(CONTROL))
        k = draw(st.integers(0, 4))
        return template.format(a=a, t=a, k=k)
    template = draw(st.sampled_from(pool))
    if template == "{a}.flip_free_reshape":
        return f"{a} = {a}.reshape(-1).view({a}.shape) + 0"
    return f"{a} = {template.format(a=a, b=b)}"


@st.composite
def programs(draw, half=False):
    """(source, dtype, (rows, cols), layouts, seed); half=True adds f16 and bf16."""
    floating = draw(st.booleans())
    floats = FLOAT_DTYPES + (HALF_DTYPES if half else [])
    dtype = draw(st.sampled_from(floats if floating else INT_DTYPES))
    nargs = draw(st.integers(1, 3))
    names = [f"x{i}" for i in range(nargs)]
    body = [f"    {_stmt(draw, names, floating)}"
            for _ in range(draw(st.integers(1, 6)))]
    outs = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
    # Work on fresh tensors first so in-place statements never touch the caller's inputs
    # through a shared name; a separate property below covers write-back.
    prologue = [f"    {n} = {n} * 1" for n in names]
    source = (f"def f({', '.join(names)}):\n" + "\n".join(prologue + body)
              + f"\n    return {', '.join(outs)},\n")
    rows = draw(st.integers(1, 5))
    cols = draw(st.integers(1, 5))
    layouts = [draw(st.sampled_from(["contiguous", "transposed", "strided"]))
               for _ in names]
    seed = draw(st.integers(0, 2**16))
    return source, dtype, (rows, cols), layouts, seed


def _make(shape, dtype, layout, gen):
    rows, cols = shape
    if layout == "transposed":
        base = torch.randn(cols, rows, generator=gen) * 3
        t = base.t()
    elif layout == "strided":
        t = (torch.randn(rows, cols * 2, generator=gen) * 3)[:, ::2]
    else:
        t = torch.randn(rows, cols, generator=gen) * 3
    return t.to(dtype)


def _load(source, counter=[0]):
    counter[0] += 1
    filename = f"<random program {counter[0]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"torch": torch}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["f"]


def _eager(f, shape, dtype, layouts, gen):
    """(inputs, eager results): inputs of `shape` drawn from `gen`, f run on copies of them;
    results None where eager raises (an invalid program, e.g. a shape mismatch)."""
    args = [_make(shape, dtype, layout, gen) for layout in layouts]
    try:
        return args, f(*[a.clone() for a in args])
    except Exception:
        return args, None


def _assert_equal(got, want, source, dtype):
    """Compiled results equal eager's: dtype, shape and values (within TOLERANCE)."""
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, source
        tol = TOLERANCE.get(dtype, 0)
        torch.testing.assert_close(g, w, rtol=tol, atol=tol, equal_nan=True,
                                   msg=lambda m: f"{source}\n{m}")


def check_compiled_program_equals_eager(program, backend):
    """A drawn program compiled by refcomp.compile with `backend` equals eager (the property
    the kernel backends' tests run: tests/codegen/test_llvm_programs.py and
    test_triton_backend.py)."""
    source, dtype, shape, layouts, seed = program
    f = _load(source)
    args, want = _eager(f, shape, dtype, layouts, torch.Generator().manual_seed(seed))
    if want is None:
        return  # the program is invalid in eager: nothing to compare
    _assert_equal(refcomp.compile(f, backend=backend)(*args), want, source, dtype)


@settings(max_examples=60)
@given(programs(half=True), st.sampled_from(["eager", "interp"]))
def test_random_programs_equal_eager(program, backend):
    source, dtype, shape, layouts, seed = program
    f = _load(source)
    args, want = _eager(f, shape, dtype, layouts, torch.Generator().manual_seed(seed))
    if want is None:
        return  # the program is invalid in eager (e.g. a shape mismatch): nothing to compare
    report = refcomp.explain(f, *args, backend=backend)
    assert not any(r["id"] == "RB018" for r in report.break_reasons), str(report)
    assert report.graph_count == 1, f"{source}\n{report}"
    _assert_equal(report.result, want, source, dtype)


@settings(max_examples=15)
@given(st.integers(1, 4), st.sampled_from(["add_", "mul_", "setitem", "iadd"]),
       st.sampled_from(["eager", "interp"]))
def test_mutations_of_inputs_are_written_back(n, how, backend):
    stmt = {"add_": "x.add_(y)", "mul_": "x.mul_(2)", "setitem": "x[0] = y[0] * 2",
            "iadd": "x += y"}[how]
    f = _load(f"def f(x, y):\n    {stmt}\n    return x.sum()\n")
    x, y = torch.randn(n, 3), torch.randn(n, 3)
    x1, x2 = x.clone(), x.clone()
    want = f(x1, y)
    got = refcomp.compile(f, backend=backend)(x2, y)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(x2, x1)


@settings(max_examples=25)
@given(programs(), st.integers(2, 6))
def test_random_programs_with_dynamic_batch_equal_eager(program, other_rows):
    """dynamic=True: one compiled function called at two batch sizes equals eager at both
    (an unsupported use of a dynamic size may fall back, but never gives a wrong result)."""
    source, dtype, (rows, cols), layouts, seed = program
    f = _load(source)
    cf = refcomp.compile(f, backend="eager", dynamic=True)
    gen = torch.Generator().manual_seed(seed)
    for n in (max(rows, 2), other_rows):
        args, want = _eager(f, (n, cols), dtype, layouts, gen)
        if want is None:
            return
        _assert_equal(cf(*args), want, source, dtype)
    assert not any(e.reason is not None and e.reason.rid == "RB018"
                   for e in cf.cache.entries), source


@settings(max_examples=12, deadline=None)
@given(programs(), st.sampled_from([True, None]),
       st.lists(st.tuples(st.integers(2, 7), st.integers(2, 9)), min_size=2, max_size=3))
def test_random_programs_at_several_sizes_on_llvm_equal_eager(program, dynamic, sizes):
    """Symbolic-size LLVM kernels (Note [Runtime sizes], codegen/kernel.py) at several
    (rows, cols), under dynamic=True and automatic dynamic: equal to eager at each."""
    source, dtype, (rows, cols), layouts, seed = program
    f = _load(source)
    cf = refcomp.compile(f, backend="llvm", dynamic=dynamic)
    gen = torch.Generator().manual_seed(seed)
    for n, m in [(rows, cols)] + sizes:
        args, want = _eager(f, (n, m), dtype, layouts, gen)
        if want is None:
            return
        with torch.no_grad():
            got = cf(*args)
        _assert_equal(got, want, source, dtype)
    assert not any(e.reason is not None and e.reason.rid == "RB018"
                   for e in cf.cache.entries), source
