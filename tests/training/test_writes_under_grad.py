"""In-place writes under grad that once broke or crashed (issue 33): each case runs
eagerly and compiled on every CPU backend, and the outputs, the gradients of the inputs
that require grad and the graph/break counts where the case says them are compared."""

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]


def _grads(fn, args):
    """(outputs, gradients of the args that require grad) of one run; the gradient of
    sum(out * a fixed weight) over the outputs that require grad."""
    out = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    diff = [o for o in outs if o.requires_grad]
    if not diff:
        return outs, []
    loss = sum((o * torch.linspace(-1, 2, o.numel()).reshape(o.shape)).sum() for o in diff)
    return outs, torch.autograd.grad(loss, leaves, allow_unused=True)


def assert_like_eager(fn, make_args, backend):
    torch.manual_seed(0)
    args = make_args()
    want, g_want = _grads(fn, [a.clone().requires_grad_(a.requires_grad) if a.is_leaf
                               else a for a in args])
    refcomp.reset()
    got, g_got = _grads(refcomp.compile(fn, backend=backend), args)
    torch.testing.assert_close(got, want)
    assert len(g_got) == len(g_want)
    for g, w in zip(g_got, g_want):
        assert (g is None) == (w is None)
        if w is not None:
            torch.testing.assert_close(g, w)


def empty_view_of_output_written_after_break(x):
    w = x.clone()
    w[None].mul_(3)    # through a view: the graph's output is a view of a kernel buffer
    _ = x.sum().item()  # RB002
    w[None].mul_(2)    # in CPython, on the compiled Function's output
    return w


def augmented_item_assignment_covering_all(x):
    w = x.clone()
    w[None] *= 3       # mul_ through the view; the store after it writes nothing
    return w


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows", [0, 3])
def test_write_after_break_into_an_output_of_the_compiled_function(backend, rows):
    # corpus grad_empty_view_of_output_written_at_break_llvm: an empty output's storage
    # has address 0, as the input's does, so the view was not detached (llvm)
    assert_like_eager(empty_view_of_output_written_after_break,
                      lambda: [torch.randn(rows, 3, requires_grad=True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows", [0, 3])
def test_augmented_item_assignment_covering_all_is_one_graph(backend, rows):
    x = torch.randn(rows, 3, requires_grad=True)
    refcomp.reset()
    report = refcomp.explain(augmented_item_assignment_covering_all, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert_like_eager(augmented_item_assignment_covering_all, lambda: [x], backend)


# --- Note [In-place on a graph input under grad] -------------------------------------------
def add_into_input(h, y):
    h += y
    return h * 2


def item_assignment_into_input(h, y):
    h[:, 0] = 0
    return (h * y).sum()


def relu_of_input(h, y):
    h.relu_()
    return h + y


def sin_of_input(h, y):  # eager saves the old h as a clone: no raise, cos(old h)
    h.sin_()
    return h * y


def mul_of_input_by_value_requiring_grad(h, y):
    h.mul_(y)  # y's gradient reads the old h
    return h.sum()


def resumed_segment_writes_input(x, y):
    h = x * 2
    _ = h.sum().item()  # RB002: h is an input of the resumed graph
    h += y
    h[:, 1] = 0
    h.relu_()
    return h.sin()


def non_leaf(x, y):
    return [x * 2, y]


def buffer(x, y):  # a tensor that does not require grad, written with one that does
    return [x.detach() + 1, y]


def leaves(x, y):
    return [x, y]


INPUT_CASES = [(add_into_input, non_leaf), (item_assignment_into_input, non_leaf),
               (relu_of_input, non_leaf), (sin_of_input, non_leaf),
               (mul_of_input_by_value_requiring_grad, non_leaf),
               (add_into_input, buffer), (resumed_segment_writes_input, leaves)]


def _run_with_input_after(fn, make, compiled):
    """Outputs, the written input after the call, its version, and the leaves'
    gradients of a loss of the outputs and of the written input."""
    torch.manual_seed(0)
    x, y = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    args = make(x, y)
    out = (compiled or fn)(*args)
    loss = (out * 1.5).sum() + (args[0] * args[0] * torch.linspace(0, 1, 12).reshape(3, 4)).sum()
    gx, gy = torch.autograd.grad(loss, [x, y], allow_unused=True)
    return out.detach(), args[0].detach(), args[0]._version, args[0].requires_grad, gx, gy


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, make", INPUT_CASES, ids=lambda c: c.__name__)
def test_write_into_a_graph_input_under_grad_is_captured_with_eagers_gradients(
        fn, make, backend):
    torch.manual_seed(0)
    x, y = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    refcomp.reset()
    report = refcomp.explain(fn, *make(x, y))
    assert not [b for b in report.break_reasons if b["id"] != "RB002"], report
    want = _run_with_input_after(fn, make, None)
    refcomp.reset()
    got = _run_with_input_after(fn, make, refcomp.compile(fn, backend=backend))
    assert got[2:4] == want[2:4]  # one version bump, requires grad after, as in eager
    for g, w in zip(got[:2] + got[4:], want[:2] + want[4:]):
        torch.testing.assert_close(g, w)


def write_input_saved_before(h, y):
    a = h * y  # mul saves h: eager's backward raises after the write
    h += 1
    return a


def write_input_saved_by_caller(h, y):
    h += y
    return h * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_into_inputs_raise_where_eager_raises(backend):
    cases = [
        (write_input_saved_before, lambda x, y: (x * 2, y), "modified by an inplace"),
        (write_input_saved_by_caller, lambda x, y: (x.sigmoid(), y), "modified by an inplace"),
        (add_into_input, lambda x, y: (x, y), "leaf Variable that requires grad"),
        (add_into_input, lambda x, y: ((x * 2)[1:], y[1:]), None),  # a view: CopySlices
    ]
    for fn, make, message in cases:
        outcomes = []
        for compiled in (None, refcomp.compile(fn, backend=backend)):
            refcomp.reset()
            torch.manual_seed(0)
            x, y = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
            try:
                args = make(x, y)
                out = (compiled or fn)(*args)
                (out.sum() + args[0].sum()).backward()
                outcomes.append(("ok", x.grad, y.grad))
            except RuntimeError as err:
                outcomes.append(("raise", str(err)))
        (kind_e, *rest_e), (kind_c, *rest_c) = outcomes
        assert kind_c == kind_e, (fn.__name__, outcomes)
        if kind_e == "raise":
            assert message in rest_e[0] and message in rest_c[0]
        else:
            assert message is None
            torch.testing.assert_close(rest_c, rest_e)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_leaf_after_a_non_leaf_recompiles_and_raises_as_eager(backend):
    compiled = refcomp.compile(add_into_input, backend=backend)
    refcomp.reset()
    x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    compiled(x * 2, y).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 4.0))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        compiled(x, y)
    with torch.inference_mode():
        t = torch.randn(3)
    with pytest.raises(RuntimeError, match="[Ii]nference tensor"):
        add_into_input(t, y)
    with pytest.raises(RuntimeError, match="[Ii]nference tensor"):
        compiled(t, y)


# --- writes through diagonal() --------------------------------------------------------------
def diagonal_fill(x, w):
    h = x * w
    h.diagonal().fill_(7)
    return (h * w).sum(), h


def diagonal_add_offset(x, w):
    h = x * w
    h.diagonal(1).add_(w[0, 0])
    return (h * w).sum(), h


def diagonal_mul_of_3d_dims(x, w):
    h = (x * w).reshape(2, 3, 2)
    d = h.diagonal(-1, 2, 0)  # a view beside its base: both follow the write
    d.mul_(3)
    return (h.sin() * 2).sum(), d


def diagonal_read_and_returned(x, w):
    h = x * w
    return h.diagonal(-1).exp().sum(), h.diagonal(-1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [diagonal_fill, diagonal_add_offset, diagonal_mul_of_3d_dims,
                                diagonal_read_and_returned], ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", [(4, 3), (3, 4)])
def test_write_through_diagonal_is_one_graph_with_eagers_gradients(fn, shape, backend):
    x = torch.randn(shape)
    w = torch.randn(shape, requires_grad=True)
    refcomp.reset()
    report = refcomp.explain(fn, x, w)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert_like_eager(fn, lambda: [x, w], backend)
    refcomp.reset()
    got, want = refcomp.compile(fn, backend=backend)(x, w)[1], fn(x, w)[1]
    assert got.stride() == want.stride()
    if want._is_view():  # a returned diagonal is a view of its base's output, as in eager
        assert got._is_view() and got._base.shape == want._base.shape


@pytest.mark.parametrize("backend", BACKENDS)
def test_diagonal_with_dynamic_sizes_is_an_opaque_call(backend):
    def f(x):
        return x.diagonal(1).sum() * 2

    compiled = refcomp.compile(f, backend=backend, dynamic=True)
    for n in (3, 5, 6):
        x = torch.randn(n, n + 1)
        torch.testing.assert_close(compiled(x), f(x))


# --- index_put_, index_fill_, zero_ ----------------------------------------------------------
def index_put_accumulate(x, w):
    h = x * w
    h.index_put_((torch.tensor([1, 1, -1]),), w[:1] * 2, accumulate=True)
    return (h * w).sum(), h


def index_put_rows(x, w):
    h = x * w
    h.index_put_((torch.tensor([2, 0, 2]),), torch.arange(12.0).reshape(3, 4))  # last wins
    return (h * w).sum(), h


def index_put_values_requiring_grad(x, w):  # breaks (eager's gradient of repeated rows)
    h = x * w
    h.index_put_((torch.tensor([0, 2]),), w[1:3] * 3)
    return (h * w).sum(), h


def index_fill_through_a_view(x, w):
    h = x * w
    h.t().index_fill_(1, torch.tensor([0, -1, 0]), 1.5)
    return (h * w).sum(), h


def zero_rows(x, w):
    h = x * w
    h[1:3].zero_()
    return (h * w).sum(), h


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [index_put_accumulate, index_put_rows,
                                index_put_values_requiring_grad, index_fill_through_a_view,
                                zero_rows], ids=lambda f: f.__name__)
def test_index_writes_under_grad_have_eagers_gradients(fn, backend):
    x = torch.randn(4, 4)
    w = torch.randn(4, 4, requires_grad=True)
    refcomp.reset()
    report = refcomp.explain(fn, x, w)
    if fn is not index_put_values_requiring_grad:
        assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert_like_eager(fn, lambda: [x, w], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_writes_out_of_bounds_raise_index_error_as_eager(backend):
    def put(x):
        h = x * 2
        h.index_put_((torch.tensor([4]),), torch.ones(4), accumulate=True)
        return h

    def fill(x):
        h = x * 2
        h.index_fill_(1, torch.tensor([-5]), 0.0)
        return h

    for fn in (put, fill):
        with pytest.raises(IndexError):
            fn(torch.randn(4, 4))
        refcomp.reset()
        with pytest.raises(IndexError):
            refcomp.compile(fn, backend=backend)(torch.randn(4, 4))


# --- Note [Saved by eager] with a folded clone beside the saved tensor ------------------------
def clone_beside_saved_result_then_result_written(x):
    v = x.norm()  # LinalgVectorNorm saves its result v
    c = v.clone()
    _ = v.sum().item()  # RB002: v and c are outputs of one value
    v.abs_()  # eager's backward of c raises
    return c


def clone_beside_saved_result_then_clone_written(x):
    v = x.norm()
    c = v.clone()
    _ = v.sum().item()
    c.abs_()  # a clone has its own version: no raise
    return c * v


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [clone_beside_saved_result_then_result_written,
                                clone_beside_saved_result_then_clone_written],
                         ids=lambda f: f.__name__)
def test_a_folded_clone_keeps_eagers_version_checks(fn, backend):
    outcomes = []
    for compiled in (None, refcomp.compile(fn, backend=backend)):
        refcomp.reset()
        x = torch.tensor([2.0, -1.0], requires_grad=True)
        try:
            (compiled or fn)(x).sum().backward()
            outcomes.append(("ok", x.grad))
        except RuntimeError as err:
            assert "modified by an inplace operation" in str(err)
            outcomes.append(("raise", None))
    assert outcomes[0][0] == outcomes[1][0], outcomes
    if outcomes[0][0] == "ok":
        torch.testing.assert_close(outcomes[1][1], outcomes[0][1])
