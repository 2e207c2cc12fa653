"""Python and torch constructs that library code uses, captured in one graph.

Each case is one group of OpInfo misses (spec/tracer.md, "OpInfo coverage"): it was a
break before, and must now be one graph equal to eager.
"""

import collections
import functools
import itertools
import typing

import pytest
import torch
import torch.nn.functional as F

import refcomp


def explain(fn, *args, backend="llvm"):
    refcomp.reset()
    return refcomp.explain(fn, *args, backend=backend)


def check_one_graph(fn, *args, backend="llvm"):
    want = fn(*args)
    report = explain(fn, *args, backend=backend)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    got = report.result
    if isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want)
    else:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
    return report


def test_vf_functions_behind_python_wrappers_are_opaque_nodes():
    # torch.broadcast_tensors / einsum / meshgrid / atleast_2d are Python wrappers that call
    # torch._VF.<name>; that C function was "not in the torch table" (torch.<name> is the
    # wrapper, so the name did not resolve back to it).
    def f(x, y):
        a, b = torch.broadcast_tensors(x, y)
        gx, gy = torch.meshgrid(x[0], y[:, 0], indexing="ij")
        return torch.einsum("ij,ij->i", a, b), gx + gy, torch.atleast_2d(x[0, 0])

    report = check_one_graph(f, torch.randn(1, 3), torch.randn(4, 1))
    assert "torch._C._VariableFunctions.broadcast_tensors" in report.graphs[0]


def test_loss_functions_that_broadcast_are_one_graph():
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    check_one_graph(lambda x, y: F.mse_loss(x, y) + F.l1_loss(x, y) + F.huber_loss(x, y),
                    x, y)


def test_generator_expressions_are_traced():
    def f(x, sizes):
        assert all(isinstance(s, int) for s in sizes)
        total = sum(x * s for s in sizes)
        return total + len(tuple(d for d in x.shape if d > 1))

    check_one_graph(f, torch.randn(3), [1, 2, 3])


def test_generator_expression_items_a_consumer_skips_are_not_traced():
    # all() stops at the first false item, as in eager: the second item would raise.
    def f(x, items):
        if all(1 / v > 0 for v in items):
            return x + 1
        return x - 1

    check_one_graph(f, torch.randn(3), [-1, 0])


def test_generator_expression_consumed_by_a_loop_keeps_effect_order():
    log = []

    def f(x):
        gen = (x * i for i in range(3))
        out = x
        for t in gen:
            log.append(len(log))
            out = out + t
        return out

    x = torch.randn(3)
    want = f(x)
    expected_log = list(log)
    log.clear()
    report = explain(f, x)
    assert report.graph_break_count == 0
    torch.testing.assert_close(report.result, want)
    assert log == expected_log


def test_generator_function_still_breaks_with_a_reason():
    def gen(x):
        yield x + 1

    x = torch.randn(2)
    report = explain(lambda x: next(gen(x)) * 2, x)
    assert "RB014" in [b["id"] for b in report.break_reasons]
    torch.testing.assert_close(report.result, (x + 1) * 2)


def test_itertools_repeat_and_ntuple_helpers():
    # F.unfold / F.max_unpool2d normalise sizes with `tuple(repeat(x, n))`.
    x = torch.randn(1, 2, 4, 4)
    check_one_graph(lambda x: F.unfold(x, 2), x)
    check_one_graph(lambda x: tuple(itertools.repeat(x, 2))[1] * 2, torch.randn(2))


def test_max_unpool_uses_expect_true_on_sizes():
    x = torch.randn(1, 1, 4, 4)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    check_one_graph(lambda o, i: F.max_unpool2d(o, i, 2), out, idx)


def test_deterministic_flag_is_read_and_guarded():
    # F.pad(mode="reflect") reads torch._C._get_deterministic_algorithms().
    def f(x):
        return F.pad(x, (1, 1), mode="reflect") * 2

    x = torch.randn(1, 2, 5)
    check_one_graph(f, x)
    cf = refcomp.compile(f, backend="llvm")
    torch.testing.assert_close(cf(x), f(x))
    try:
        torch.use_deterministic_algorithms(True)
        torch.testing.assert_close(cf(x), f(x))
    finally:
        torch.use_deterministic_algorithms(False)


def test_zip_strict():
    def f(x, ys):
        return sum(t * y for t, y in zip(x, ys, strict=True))

    check_one_graph(f, torch.randn(2, 3), [1.0, 2.0])
    check_one_graph(lambda x: F.adaptive_avg_pool2d(x, (2, 3)), torch.randn(1, 2, 4, 6))


def test_device_predicates_come_from_the_device_not_the_meta_tensor():
    # Regression: `is_cuda` was read off the meta tensor (always False there), and
    # `is_cpu` was RB005.
    def f(x):
        return x + (1 if x.is_cpu else 2) + (10 if x.is_cuda else 20) + (
            100 if x.is_meta else 200)

    check_one_graph(f, torch.zeros(2))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_is_cuda_on_a_cuda_tensor():
    def f(x):
        return x + (10 if x.is_cuda else 20)

    x = torch.zeros(2, device="cuda")
    report = explain(f, x, backend=None)
    assert report.graph_break_count == 0
    torch.testing.assert_close(report.result, f(x))


def test_filter_and_tensor_getitem_by_name():
    def f(x, sizes):
        kept = list(filter(lambda s: s > 1, sizes))
        return torch.Tensor.__getitem__(x, slice(0, len(kept)))

    check_one_graph(f, torch.randn(5), [1, 2, 3])
    check_one_graph(lambda x: functools.reduce(lambda a, b: a * b, x.shape, 2) * x,
                    torch.randn(3, 2))


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_complex_values_live_between_opaque_nodes(backend):
    # fft, view_as_complex, complex arithmetic and .real/.imag: c64 values are operands
    # and results of `aten` nodes only; IR ops see the real views.
    def f(x):
        c = torch.fft.fft(x)
        y = c * 2 + c - (-c) / (c + 1)
        return y.real, torch.view_as_real(y), y.conj().imag.relu(), (2 * c == c * 2), y

    report = check_one_graph(f, torch.randn(6), backend=backend)
    assert "c64[6]" in report.graphs[0]


def test_complex_values_of_opaque_calls_reach_ir_ops():
    # Slicing and scaling an FFT's result are IR ops on c64 values (spec/ir.md, "Complex
    # values"); an op without a complex form (sigmoid) is an opaque call.
    def f(x):
        y = torch.fft.fft(x)[1:] * 2
        return y, torch.sigmoid(y)

    x = torch.randn(4)
    report = explain(f, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert "slice" in report.graphs[0] and 'fn="torch.sigmoid"' in report.graphs[0]
    for got, want in zip(report.result, f(x)):
        torch.testing.assert_close(got, want)


def test_complex_results_that_require_grad_break():
    # Regression: a complex graph output requiring grad came back detached (the IR's
    # autograd is real-valued), so backward() failed.
    def g(x):
        return torch.fft.irfft(torch.fft.rfft(x) * 2).sum()

    x = torch.randn(8, requires_grad=True)
    report = explain(g, x)
    assert "complex tensor that requires grad" in report.break_reasons[0]["reason"]
    report.result.backward()
    got = x.grad.clone()
    x.grad = None
    g(x).backward()
    torch.testing.assert_close(got, x.grad)


def test_adjoint_of_real_tensors_and_torch_size():
    def f(x):
        return x.H + x.mH, torch.Size(list(x.shape)[::-1])

    want = f(torch.ones(2, 3).T)
    report = explain(f, torch.ones(2, 3).T)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    torch.testing.assert_close(report.result[0], want[0])
    assert report.result[1] == want[1] and type(report.result[1]) is torch.Size


def test_next_on_a_generator_expression_then_the_rest():
    def f(x, ys):
        gen = (y * 2 for y in ys)
        first = next(gen)
        return x + first + sum(gen) + next(gen, x)

    check_one_graph(f, torch.randn(3), [torch.randn(3) for _ in range(3)])


TABLE = {("cpu", torch.float16): 2.0, ("cpu", torch.float32): 3.0}


def test_dict_with_tuple_keys_of_dtypes_is_read_and_guarded():
    # F.linear_cross_entropy reads a module dict keyed by (device type, dtype): it was
    # RB012 "non-constant keys".
    def f(x):
        return x * TABLE.get((x.device.type, x.dtype), 1.0)

    x = torch.randn(3)
    check_one_graph(f, x)
    cf = refcomp.compile(f, backend="llvm")
    torch.testing.assert_close(cf(x), f(x))
    try:
        TABLE[("cpu", torch.float32)] = 5.0
        torch.testing.assert_close(cf(x), f(x))
        del TABLE[("cpu", torch.float32)]
        torch.testing.assert_close(cf(x), f(x))
    finally:
        TABLE[("cpu", torch.float32)] = 3.0


DTYPES = frozenset({torch.float16, torch.bfloat16})
PAIRS = {("a", 1), ("b", 2)}
OBJECTS = {object()}


def test_iterating_module_sets_of_dtypes_and_tuples():
    # Regression: iterating a global set recursed forever (RB018, an internal error).
    def f(x):
        n = sum(1 for d in DTYPES if d.is_floating_point) + sum(v for _, v in PAIRS)
        return x * n + (x.dtype in DTYPES)

    check_one_graph(f, torch.randn(3))

    def g(x):
        return x * len([o for o in OBJECTS])

    x = torch.randn(3)
    report = explain(g, x)
    assert [b["id"] for b in report.break_reasons] == ["RB013"]
    torch.testing.assert_close(report.result, g(x))


def test_set_displays_of_constants():
    def f(x, n):
        low = {torch.float16, torch.bfloat16}
        return x * (2 if x.dtype in low else 3) + len({n, 1, 1})

    check_one_graph(f, torch.randn(3), 1)
    check_one_graph(f, torch.randn(3), 5)

    def g(x):  # a set of sizes: {s0, 3} collapses or not by value
        return x * len({x.shape[0], 3})

    cg = refcomp.compile(g, backend="llvm", dynamic=True)
    for n in (3, 4, 3, 5):
        x = torch.randn(n)
        torch.testing.assert_close(cg(x), g(x))


class Config(typing.NamedTuple):
    scale: torch.Tensor
    k: int = 2


CONFIG = Config(torch.ones(3), 4)
Pair = collections.namedtuple("Pair", "a b")


def test_namedtuples_read_unpacked_and_built():
    # A module-level NamedTuple unpacked (F.linear_cross_entropy's _AUTO_FALLBACK) and a
    # namedtuple built in the frame: one graph; fields by name; the class comes back.
    def f(x, p):
        a, b = p
        scale, k = CONFIG
        return Pair(x * a + b + scale * k, b=p.b * CONFIG.k), Config(x)

    x, p = torch.randn(3), Pair(2.0, torch.randn(3))
    report = explain(f, x, p)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    got, want = report.result, f(x, p)
    assert type(got[0]) is Pair and type(got[1]) is Config and got[1].k == 2
    for g, w in zip(got[0] + got[1][:1], want[0] + want[1][:1]):
        torch.testing.assert_close(g, w)
    cf = refcomp.compile(f, backend="llvm")
    q = Pair(3.0, p.b)
    torch.testing.assert_close(cf(x, p)[0].a, f(x, p)[0].a)
    torch.testing.assert_close(cf(x, q)[0].a, f(x, q)[0].a)  # a new value of p.a: guarded


def test_builtins_that_drain_a_generator_expression():
    cases = [lambda x: x * len("-".join(str(d) for d in x.shape)),
             lambda x: x * sorted(d for d in x.shape)[0],
             lambda x: x * dict((str(i), i) for i in range(3))["2"],
             lambda x: x * len(set(d for d in x.shape)),
             lambda x: x * len("{}x{}".format(*x.shape))]
    for fn in cases:
        check_one_graph(fn, torch.randn(2, 3))


def test_sets_and_sorting_of_dynamic_sizes_are_not_folded():
    def f(x):
        return x * len(set(d for d in x.shape)) + sorted(x.shape)[0]

    cf = refcomp.compile(f, backend="llvm", dynamic=True)
    for shape in ((3, 4), (4, 4), (5, 2), (3, 3)):
        x = torch.randn(*shape)
        torch.testing.assert_close(cf(x), f(x))


# --- session 5: frozen dataclasses, custom ops, ops typed on zeros, advanced indexing ----
@__import__("dataclasses").dataclass(frozen=True)
class _Options:
    chunk: int = 4
    policy: str = "auto"

    def __post_init__(self):
        if self.policy not in {"auto", "exact"}:
            raise ValueError(f"bad policy {self.policy!r}")


def test_frozen_dataclass_of_constants_is_made_and_its_post_init_traced():
    # F.linear_cross_entropy remakes its options with dataclasses.replace.
    import dataclasses

    def f(x, opts):
        opts = dataclasses.replace(opts, chunk=2)
        return x.reshape(opts.chunk, -1) * 2

    check_one_graph(f, torch.randn(8), _Options())

    def bad(x):
        return x * _Options(policy="wrong").chunk   # __post_init__ raises: eager's error

    refcomp.reset()
    with pytest.raises(ValueError, match="bad policy"):
        refcomp.compile(bad)(torch.randn(2))


_lib_op_calls = []


@torch.library.custom_op("refcomp_test::scaled_add", mutates_args=())
def _scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    _lib_op_calls.append(1)
    return x + alpha * y


@_scaled_add.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)


def test_custom_op_is_one_opaque_node_typed_by_its_fake_kernel():
    def f(x, y):
        return _scaled_add(x, y, 0.5).relu()

    x, y = torch.randn(4), torch.randn(4)
    report = check_one_graph(f, x, y)
    assert 'fn="torch.ops.refcomp_test.scaled_add.default"' in report.graphs[0]


@pytest.mark.parametrize("fn", [
    lambda x: torch.cov(x) + 1,
    lambda x: torch.corrcoef(x) * 2,
    lambda x: torch.geqrf(x)[1] + torch.geqrf(x)[0].sum(),
    lambda x: torch.combinations(x[0], r=2) - 1,
    lambda x: torch.histogram(x, bins=5)[0] + 1,
    lambda x: torch.histogramdd(x.t(), bins=[3, 2, 4])[1][2] * 2,   # nested results
])
def test_ops_without_meta_kernels_typed_on_zeros(fn):
    # Note [Typed on zeros]: shapes depend only on shapes and constant arguments.
    check_one_graph(fn, torch.randn(3, 5))


def test_tensor_split_by_a_tensor_is_not_typed_on_zeros():
    # its output shapes depend on the index tensor's values: a break, never a guess
    def f(x, idx):
        return torch.tensor_split(x, idx)[0] + 1

    x, idx = torch.randn(6), torch.tensor([1, 4])
    report = explain(f, x, idx)
    assert report.graph_break_count >= 1 and "tensor_split" in report.break_reasons[0]["reason"]
    torch.testing.assert_close(report.result, f(x, idx))


def test_advanced_indexing_beyond_the_ir_is_one_opaque_getitem():
    def f(x, i, j):
        return x[i, :, j] * 2, x[[0, 2]], x[i.view(2, 1), 1:, j]

    x = torch.randn(3, 4, 5)
    i, j = torch.tensor([0, 2]), torch.tensor([4, 1])
    report = check_one_graph(f, x, i, j)
    assert 'fn="torch.Tensor.__getitem__"' in report.graphs[0]


def test_a_function_made_inside_another_modules_function_reads_that_modules_globals():
    # Regression (torch.masked.cumsum): `helper`, defined inside a torch.masked function,
    # read its module globals as if they were the compiled function's (G[...]): the guards
    # failed right after tracing and every call ran eagerly.
    import types

    lib = types.ModuleType("refcomp_test_lib")
    exec("SCALE = 3.0\n"
         "def outer(x):\n"
         "    def helper(t):\n"
         "        return t * SCALE\n"
         "    return helper(x) + sum(v for v in (SCALE, 1.0))\n", lib.__dict__)

    def f(x):
        return lib.outer(x)

    report = check_one_graph(f, torch.randn(3))
    assert not any("guards fail" in n for n in report.notes)
    refcomp.reset()
    cf = refcomp.compile(f)
    x = torch.randn(3)
    cf(x)
    lib.SCALE = 5.0                       # the guard on the module global catches it
    torch.testing.assert_close(cf(x), x * 5.0 + 6.0)


@pytest.mark.parametrize("backend", ["interp", "llvm", "eager"])
def test_squeeze_of_a_zero_dim_tensor_along_dim_zero(backend):
    # Regression (F.linear_cross_entropy's chunked path on interp): torch allows dim 0 of a
    # 0-d tensor; the IR's squeeze reference indexed its missing dim 0 and raised.
    check_one_graph(lambda x: x.sum().squeeze(0) * 2 + x.sum().squeeze(-1), torch.randn(3),
                    backend=backend)


def test_lazily_conjugated_opaque_result_on_interp():
    # Regression (OpInfo fft.ifft / fft.ihfft on interp): torch returns a view with the
    # conjugate bit set, which the interp backend's numpy runner could not read.
    check_one_graph(lambda x: torch.fft.ihfft(x).abs() * 2, torch.randn(6),
                    backend="interp")


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_running_stats_written_by_batch_norm_kernels_are_writes(backend):
    # Regression (OpInfo on interp): meta kernels do not bump the versions of the
    # `Tensor(a!) running_mean` they would write (and native_batch_norm's schema has no
    # annotation at all), so the opaque node was functional on paper while ATen wrote the
    # running stats in place: lost on interp, and a hidden write on the other backends.
    def f(x, rm, rv):
        a = torch._native_batch_norm_legit(x, None, None, rm, rv, True, 0.5, 1e-5)[0]
        b = torch.native_batch_norm(x, None, None, rm, rv, True, 0.5, 1e-5)[0]
        return a + b, rm * 1

    x = torch.randn(4, 3, 2)
    args = (x, torch.zeros(3), torch.ones(3))
    eager_args = tuple(t.clone() for t in args)
    want = f(*eager_args)
    report = explain(f, *args, backend=backend)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    for g, w in zip(report.result, want):
        torch.testing.assert_close(g, w)
    for g, w in zip(args, eager_args):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_meta_kernels_that_branch_on_the_device_type_for_cpu(backend):
    # Regression (OpInfo embedding_bag on interp): torch's Python meta kernels ask
    # device_hint(t) and get "cuda" for a plain meta tensor, so embedding_bag's auxiliary
    # results were typed as on CUDA (offset2bag i64[5]) where the CPU kernel's fast path
    # returns i64[0]: interp raised on the declared type, and on llvm `r[1] + 1` ran a
    # kernel over 5 elements of an empty tensor (a segfault).
    def f(w, i, o, psw):
        r = torch.embedding_bag(w, i, o, False, 0, False, psw)
        return r[0], r[1], r[2], r[3], r[1] + 1, F.embedding_bag(
            i, w, o, mode="sum", per_sample_weights=psw)

    args = (torch.randn(10, 5), torch.tensor([1, 2, 4, 5, 4]), torch.tensor([0, 3]),
            torch.randn(5))
    want = f(*args)
    report = explain(f, *args, backend=backend)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert [tuple(g.shape) for g in report.result] == [tuple(w.shape) for w in want]
    for k in (0, 1, 4, 5):  # r[2], r[3] (bag_size, max_indices) may be uninitialized
        torch.testing.assert_close(report.result[k], want[k])
