"""refcomp/ (tracer, guards, runtime, resume): behaviours no other test pinned, found by
mutation runs (tests/MUTANTS.md).  Each test names the planted bug it kills; all cheap."""

import time

import pytest
import torch

import refcomp


@pytest.mark.parametrize("index", [
    lambda x: x[None, 1],
    lambda x: x[:, None, 2],
    lambda x: x[1, None, 1:3],
    lambda x: x[None, :, None, 0],
])
def test_none_in_an_index_moves_later_items_by_one_dim(index):
    # tensor_layout._basic_index: `None` inserts a dim, so the next item indexes the
    # dim after it (mutant: dim += 2 after None).
    x = torch.arange(24.0).reshape(4, 6)
    got = refcomp.compile(index, backend="eager", fullgraph=True)(x)
    torch.testing.assert_close(got, index(x))


def star_unpack(x):
    first, *middle, last = x.unbind(0)
    a, *rest = [first, last]
    return first * 10 + sum(middle) + last * 100 + a - rest[0] + len(middle)


def test_starred_unpacking_splits_like_python():
    # UNPACK_EX (opcodes.py): the starred target gets items[before:len - after]
    # (mutant: len + after).
    x = torch.arange(15.0).reshape(5, 3)
    cf = refcomp.compile(star_unpack, backend="eager", fullgraph=True)
    torch.testing.assert_close(cf(x), star_unpack(x))


def calls_a_c_builtin(x):
    t = time.perf_counter()
    return x + (t > 0)


def test_a_c_builtin_outside_the_tables_breaks_naming_it():
    # dispatch.py: a C builtin (not only a torch function) is named as "not in the torch
    # table" (mutant: `or` -> `and`, which reports it as a call of its type).
    report = refcomp.explain(calls_a_c_builtin, torch.ones(2), backend="eager")
    (reason,) = [r for r in report.break_reasons if r["id"] == "RB004"]
    assert "perf_counter is not in the torch table" in reason["reason"], reason


def tuple_checks(x):
    pair, top = (x, x + 1), x.max(0)
    if isinstance(pair, tuple) and isinstance(top, tuple) and hasattr(top, "indices"):
        return pair[1] * 2 + top.values.sum()
    return x


def test_isinstance_and_hasattr_of_traced_tuples_stay_in_the_graph():
    # TupleVar.python_type() is the tuple's class (a structseq for torch.max(dim)):
    # isinstance/hasattr on it compile without a break (mutant: python_type -> None).
    x = torch.arange(6.0).reshape(2, 3)
    cf = refcomp.compile(tuple_checks, backend="eager", fullgraph=True)
    torch.testing.assert_close(cf(x), tuple_checks(x))



@pytest.mark.parametrize("backend", ["eager", "llvm"])
def test_pad_keeps_a_non_zero_fill_value(backend):
    # torch_ops._pad: the fill value reaches the IR (mutant: the `value is None` arms
    # swapped, so a given value became 0.0 and None crashed).
    import torch.nn.functional as F

    def f(x):
        return F.pad(x, (1, 2), value=3.5), F.pad(x, (2, 0))

    x = torch.randn(3, 4)
    for got, want in zip(refcomp.compile(f, backend=backend)(x), f(x)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_index_after_a_slice_reads_the_next_dim(dynamic):
    # tensor_layout._basic_index: after a slice the next item indexes the following dim
    # (mutants: dim += 1 -> -= 1 or += 2, in the static and the bounded-slice branches);
    # 3-d so that dim -1 is not dim 1.
    def f(x):
        return x[1:3, 2], x[1:3, :, 1], x[:2, 1:3, 0], x[1:, 2], x[:, 1:, 3]

    x = torch.arange(120.0).reshape(4, 5, 6)
    cf = refcomp.compile(f, backend="eager", fullgraph=True, dynamic=dynamic)
    for got, want in zip(cf(x), f(x)):
        torch.testing.assert_close(got, want)
    # Symbolic slices must not be retried with static sizes (a failed symbolic trace is,
    # which would hide a wrong dim in the symbolic branches).
    want_type = "f32[s0,s1,s2]" if dynamic else "f32[4,5,6]"
    assert str(cf.last_entry.graph.inputs[0].type) == want_type


def test_the_recompile_limit_suggests_a_tensor_only_for_numbers():
    # cache._suggestion: "pass it as a tensor" is for a changing int/float, not a str or
    # a bool (mutant: `and not isinstance(bool)` -> `or`).
    import warnings

    def by_mode(x, mode):
        return x * 2 if mode == "a" else x - 1

    def by_scale(x, k):
        return x * k if k > 0 else x  # (a branch keeps the float static: Note [Dynamic floats])

    cases = [(by_mode, [f"m{i}" for i in range(10)], False),
             (by_scale, [float(i) + 0.5 for i in range(10)], True)]
    for fn, values, tensor_hint in cases:
        cf = refcomp.compile(fn, backend="eager")
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for v in values:
                cf(torch.ones(2), v)
        (limit,) = [str(w.message) for w in seen if "cache_size_limit" in str(w.message)]
        assert ("pass it as a tensor" in limit) is tensor_hint, limit


# --- the ae9bd43 run's later survivors (tests/MUTANTS.md, refcomp #53-#100) --------------

def promotes_a_zero_dim_tensor(x, s, c):
    return x + s, torch.where(c, x, s), torch.clamp(x, s, s + 10), x * s + 1


def test_a_zero_dim_operand_does_not_promote_a_dimensioned_one():
    # torch_table.result_dtype: a rank-0 tensor of a higher dtype of the same category is
    # weaker than a dimensioned tensor (i32 + i64 0-d is i32); mutant: the promotion loop
    # over `vals[1:]` re-promoted the second operand against a 0-d tensor of the result.
    x, s = torch.arange(4, dtype=torch.int32), torch.tensor(3)
    c = torch.tensor([True, False, True, False])
    cf = refcomp.compile(promotes_a_zero_dim_tensor, backend="eager", fullgraph=True)
    for got, want in zip(cf(x, s, c), promotes_a_zero_dim_tensor(x, s, c)):
        assert got.dtype == want.dtype == torch.int32
        torch.testing.assert_close(got, want)


def rest_of_an_iterator(x):
    it = filter(None, [1, 2, 0, 3, 4])
    first = next(it)
    rest = list(it)
    return x * first * 100 + sum(rest) + len(rest)


def test_list_of_a_partly_consumed_iterator_holds_only_the_rest():
    # calls.iterate: an iterator's items from its position on (mutant: pos + 1).
    x = torch.arange(3.0)
    cf = refcomp.compile(rest_of_an_iterator, backend="eager", fullgraph=True)
    torch.testing.assert_close(cf(x), rest_of_an_iterator(x))


def dict_get(x, d):
    return x * d.get("a") + (d.get("missing") is None) + d.get("b", 5)


def test_dict_get_with_and_without_a_default():
    # calls._container_method: dict.get(key) has no default argument (mutant:
    # `len(args) > 1` -> `> 0` read args[1] of a one-argument call).
    x = torch.arange(3.0)
    cf = refcomp.compile(dict_get, backend="eager", fullgraph=True)
    torch.testing.assert_close(cf(x, {"a": 3.0}), dict_get(x, {"a": 3.0}))


def test_a_rank_change_is_not_a_size_change():
    # guards.changed_dims: automatic dynamic marks dims whose size alone changed, at the
    # same rank; a call of another rank traces static (mutant: `or` -> `and` compared the
    # common prefix of different ranks and made dim 0 symbolic).
    cf = refcomp.compile(lambda x: x * 2, backend="eager")
    types = []
    for shape in [(3, 4), (6, 4, 5), (7, 4, 5)]:
        cf(torch.ones(shape))
        types.append(str(cf.last_entry.graph.inputs[0].type))
    assert types == ["f32[3,4]", "f32[6,4,5]", "f32[s0,4,5]"]


def test_writing_an_input_in_place_needs_no_autograd():
    # runtime.build_entry: a mutated input written back needs no gradient of its own
    # (mutant: its output added with requires_grad=True sent the graph to autograd).
    def f(x):
        x.add_(1)
        return x * 2

    cf = refcomp.compile(f, backend="llvm")
    x = torch.ones(4)
    torch.testing.assert_close(cf(x), torch.full((4,), 4.0))
    torch.testing.assert_close(x, torch.full((4,), 2.0))
    entry = cf.last_entry
    assert entry.backend == "llvm" and entry.training is None, (entry.backend, entry.notes)
    assert not any("autograd" in n for n in entry.notes), entry.notes


def test_long_guard_values_are_cut_to_the_limit():
    # guard_kinds._short: a repr longer than the limit keeps limit - 3 characters and
    # "..." (mutant: limit - 4).
    from refcomp.guard_kinds import _short
    assert _short("x" * 10, limit=12) == repr("x" * 10)
    cut = _short("y" * 100, limit=20)
    assert cut == repr("y" * 100)[:17] + "..." and len(cut) == 20


def reads_an_unused_index(x, i):
    unused = x[i]  # noqa: F841 - eager raises IndexError here all the same
    return x + 1


@pytest.mark.parametrize("backend", ["llvm", "interp"])
def test_an_unused_out_of_bounds_index_still_raises(backend):
    # tensor_layout._check_index_bounds: the runtime check is kept for a static size even
    # when the gather is dead code (mutant: `not` removed, checking only dynamic sizes).
    cf = refcomp.compile(reads_an_unused_index, backend=backend)
    x = torch.ones(4)
    torch.testing.assert_close(cf(x, torch.tensor([3, -4])), x + 1)
    for bad in ([4], [-5]):
        with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 4"):
            cf(x, torch.tensor(bad))


def matmul_is_leaf(x, w):
    m = x @ w
    return m * 2, m.is_leaf, m.requires_grad


def test_an_op_result_that_requires_grad_is_not_a_leaf():
    # torch_table.new_tensor keeps a meta result that has a grad_fn as it is, so
    # `is_leaf` reads False like eager (mutant: `rg and grad_fn is None` -> `or`, which
    # detached it into a leaf).  (Pointwise results, whose meta comes from IR types, still
    # answer True: reported in tests/MUTANTS.md as a known gap, not pinned here.)
    x, w = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3)
    cf = refcomp.compile(matmul_is_leaf, backend="eager", fullgraph=True)
    assert cf(x, w)[1:] == matmul_is_leaf(x, w)[1:] == (False, True)


def diagonal_above(x):
    d = torch.diagonal(x, 1)
    return (d * 2).sum() + d.requires_grad


def test_an_opaque_view_at_an_offset_keeps_its_gradient():
    # opaque._view_meta: a view result is made on the operand's meta at the operand's
    # offset plus the view's (mutant: minus, an invalid offset -1 for diagonal(x, 1), whose
    # fallback meta dropped requires_grad and with it the gradient).
    x = torch.randn(4, 4, requires_grad=True)
    got = refcomp.compile(diagonal_above, backend="eager")(x)
    got.backward()
    grad, x.grad = x.grad.clone(), None
    want = diagonal_above(x)
    want.backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(grad, x.grad)


def test_a_meta_failure_names_the_first_160_characters_of_its_error():
    # opaque.call_opaque: the RB004 reason quotes the meta error's first line, cut at 160
    # characters (mutant: 159).  bincount has no meta kernel; torch's message is long.
    try:
        torch.bincount(torch.arange(4, device="meta"))
    except Exception as err:  # noqa: BLE001 - whatever torch raises is quoted
        first, kind = str(err).split("\n")[0], type(err).__name__
    else:
        pytest.skip("this torch has a meta kernel for bincount")
    if len(first) <= 160:
        pytest.skip("torch's message is short here")
    report = refcomp.explain(lambda t: torch.bincount(t.long()) * 2, torch.arange(4.0))
    (reason,) = [r["reason"] for r in report.break_reasons if r["id"] == "RB004"]
    assert f"{kind}: {first[:160]}" in reason and first[:161] not in reason, reason


def picks(x, a, b):
    return x + 1 if a else x - (1 if b else 2)


def test_guard_profile_counts_the_checks_that_reach_each_line():
    # GuardSet.profile: a line is checked by every call that passed the lines before it
    # (mutant: `sum(fails[:-1])` -> `[:-2]` forgot the failures of the last line).
    cf = refcomp.compile(picks, backend="eager")
    x = torch.ones(2)
    for a, b in [(True, True), (True, False), (False, True), (True, True), (False, False)]:
        cf(x, a, b)
    # Fail on the global-state line, the last one (Note [Arguments first]).
    torch.use_deterministic_algorithms(True)
    try:
        for _ in range(3):
            cf(x, True, True)
    finally:
        torch.use_deterministic_algorithms(False)
    first = cf.cache.entries[0]
    rows = first.guards.profile()
    assert rows[-1]["failures"] > 0, rows
    reached = first.guards.calls
    for r in rows:
        assert r["checks"] == reached, rows
        reached -= r["failures"]


def breaks_once(x):
    y = x * 2
    n = int(y.sum().item())
    return y + n


def test_generated_code_keeps_the_function_code_flags():
    # bytecode_gen.generate clears only *args/**kwargs (0x04, 0x08): the code stays an
    # optimized, new-locals function body like the original (mutant: `0x08` -> `9` also
    # cleared CO_OPTIMIZED, 0x01).
    from refcomp import bytecode_gen as bg
    cf = refcomp.compile(breaks_once, backend="eager")
    torch.testing.assert_close(cf(torch.ones(2)), breaks_once(torch.ones(2)))
    orig = breaks_once.__code__
    made = [c for c in list(bg.GENERATED) if c.co_filename == orig.co_filename
            and c.co_firstlineno == orig.co_firstlineno]
    assert made
    for code in made:
        assert code.co_flags & 0x3 == orig.co_flags & 0x3 == 0x3, hex(code.co_flags)


def calls_a_module(m, x):
    return m(x) + 1


def test_an_instance_level_forward_is_guarded():
    # modules.call_module: `m.forward = fn` set on the instance is read through the
    # module's source, so replacing it re-traces (mutant: `source is not None` -> `is`
    # made it a constant, and the second forward reused the first trace).
    m = torch.nn.Linear(3, 3)
    m.forward = lambda x: x * 2
    cf = refcomp.compile(calls_a_module, backend="eager")
    x = torch.ones(3)
    torch.testing.assert_close(cf(m, x), calls_a_module(m, x))
    m.forward = lambda x: x * 5
    torch.testing.assert_close(cf(m, x), calls_a_module(m, x))


def loop_in_a_handler(x):
    n = int(x.sum().item())
    try:
        y = x + n
    except KeyError:
        for i in range(3):
            x = x + i
        y = x
    return y * 2


def test_a_frame_with_a_loop_inside_an_except_block_compiles():
    # bytecode_gen._handler_regions marks each handler instruction once (mutant: `inside[i]
    # = True` -> False never marked one, so a loop inside an `except` block was walked
    # forever when the frame broke).  Run in a thread so a hang fails instead of stalling.
    import threading

    x = torch.arange(4.0)
    cf = refcomp.compile(loop_in_a_handler, backend="eager")
    out = []
    worker = threading.Thread(target=lambda: out.append(cf(x)), daemon=True)
    worker.start()
    worker.join(120)
    assert out, "a frame with a loop inside an except block did not compile in 120 s"
    torch.testing.assert_close(out[0], loop_in_a_handler(x))


def negates_a_running_total(x):
    total, flag = 0.0, 0.0
    for _ in range(12):
        x = x * 0.5 + 1
        flag = -total  # a number that changes at the resume point: opaque
        total += x.mean().item()
    return x, flag


def test_an_instruction_on_an_opaque_number_runs_concretely_as_rb020():
    # break_trace.wrap_real: once a changing number is opaque, an instruction that needs
    # its value fails and runs concretely, reported as RB020 (mutant: `any_opaque = True`
    # -> False reported it as RB018, an internal tracer error).
    from refcomp.resume import all_entries

    cf = refcomp.compile(negates_a_running_total, backend="eager")
    x = torch.randn(3)
    got, want = cf(x), negates_a_running_total(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == pytest.approx(want[1])
    rids = {e.reason.rid for e in all_entries(cf.cache) if e.reason}
    assert "RB020" in rids and "RB018" not in rids, rids


def partial_with_positional_arguments(x):
    import functools

    def affine(a, b, t, bias=0.0):
        return a * t + b + bias
    p = functools.partial(affine, 2.0, 3.0, bias=0.5)
    return p(x)


def test_a_partial_made_in_the_frame_keeps_its_positional_arguments():
    # calls.call_function: functools.partial(f, *args) made while tracing binds args[1:]
    # (found by a fresh seed-24 sample on main d291746: `args[2:]` dropped the first).
    x = torch.arange(3.0)
    cf = refcomp.compile(partial_with_positional_arguments, backend="eager", fullgraph=True)
    torch.testing.assert_close(cf(x), partial_with_positional_arguments(x))
