"""Compiled forward + backward (spec/autograd.md): autograd semantics equal eager's.

Each test runs a function eagerly and through refcomp.compile on copies of the same
inputs and compares outputs, `requires_grad` flags and gradients; and checks that the
compiled entry really took the compiled-training path (its stats carry a `training`
record) or, where refcomp must fall back, that the note says why.
"""

from __future__ import annotations

import copy

import pytest
import torch

import refcomp


@pytest.fixture(autouse=True)
def fresh():
    refcomp.reset()
    yield
    refcomp.reset()


def _entries():
    return [e for entries in refcomp.stats()["frames"].values() for e in entries]


def _training_entries():
    return [e for e in _entries() if e.get("training")]


def _leaves(*shapes, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=dtype).requires_grad_() for s in shapes]


def _clone(ts):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in ts]


def _mlp(x, w1, b1, w2):
    h = torch.nn.functional.gelu(x @ w1 + b1)
    return torch.softmax(h @ w2, dim=-1)


def test_mlp_gradients_equal_eager_and_the_backward_is_compiled():
    args = _leaves((8, 5), (5, 7), (7,), (7, 3))
    args[0].requires_grad_(False)
    eager_args = _clone(args)
    compiled = refcomp.compile(_mlp)
    weights = torch.linspace(-1, 1, 24, dtype=torch.float64).reshape(8, 3)
    (compiled(*args) * weights).sum().backward()
    (_mlp(*eager_args) * weights).sum().backward()
    for a, e in zip(args, eager_args):
        if e.grad is None:
            assert a.grad is None
        else:
            torch.testing.assert_close(a.grad, e.grad, rtol=1e-10, atol=1e-12)
    (entry,) = _training_entries()
    assert entry["backend"] == "llvm"
    assert entry["training"]["backward_calls"] == 1
    assert entry["training"]["backward_kernels"] is not None


def test_float32_gradients_at_assert_close_defaults():
    args = _leaves((16, 12), (12, 9), (9,), (9, 4), dtype=torch.float32, seed=3)
    eager_args = _clone(args)
    refcomp.compile(_mlp)(*args).pow(2).sum().backward()
    _mlp(*eager_args).pow(2).sum().backward()
    for a, e in zip(args, eager_args):
        torch.testing.assert_close(a.grad, e.grad)


def test_autograd_grad_and_accumulation_into_grad():
    def f(x, w):
        return (torch.tanh(x * w) + w).sum()

    x, w = _leaves((4, 6), (4, 6))
    ex, ew = _clone([x, w])
    cf = refcomp.compile(f)
    gx, gw = torch.autograd.grad(cf(x, w), [x, w])
    egx, egw = torch.autograd.grad(f(ex, ew), [ex, ew])
    torch.testing.assert_close(gx, egx)
    torch.testing.assert_close(gw, egw)
    assert x.grad is None  # autograd.grad does not accumulate
    for _ in range(3):  # .backward() accumulates into .grad, as in eager
        cf(x, w).backward()
        f(ex, ew).backward()
    torch.testing.assert_close(x.grad, ex.grad)
    torch.testing.assert_close(w.grad, ew.grad)
    assert len(_training_entries()) == 1


def test_retain_graph_and_a_second_backward_without_it():
    def f(x):
        return (x.sin() * x).sum()

    (x,) = _leaves((5,))
    (ex,) = _clone([x])
    y, ey = refcomp.compile(f)(x), f(ex)
    y.backward(retain_graph=True)
    y.backward()
    ey.backward(retain_graph=True)
    ey.backward()
    torch.testing.assert_close(x.grad, ex.grad)
    y2 = refcomp.compile(f)(x)
    y2.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y2.backward()


def test_non_leaf_inputs_pass_gradients_to_their_leaves():
    def f(h, w):
        return torch.relu(h @ w).mean()

    a, w = _leaves((3, 4), (4, 2))
    ea, ew = _clone([a, w])
    refcomp.compile(f)(a * 2 + 1, w).backward()
    f(ea * 2 + 1, ew).backward()
    torch.testing.assert_close(a.grad, ea.grad)
    torch.testing.assert_close(w.grad, ew.grad)


def test_outputs_that_do_not_require_grad_and_unused_inputs():
    def f(x, w, unused):
        y = x * w
        return y, y.detach() + 1, y.argmax(), (x > 0)

    x, w, unused = _leaves((3, 4), (3, 4), (2,))
    ex, ew, eunused = _clone([x, w, unused])
    got, want = refcomp.compile(f)(x, w, unused), f(ex, ew, eunused)
    assert [t.requires_grad for t in got] == [t.requires_grad for t in want]
    assert [t.grad_fn is None for t in got] == [t.grad_fn is None for t in want]
    got[0].sum().backward()
    want[0].sum().backward()
    torch.testing.assert_close(x.grad, ex.grad)
    assert unused.grad is None and eunused.grad is None
    assert len(_training_entries()) == 1


def test_requires_grad_toggled_between_calls_recompiles():
    def f(x, w):
        return (x * w).exp().sum()

    x, w = _leaves((3,), (3,))
    cf = refcomp.compile(f)
    cf(x, w).backward()
    assert x.grad is not None and w.grad is not None
    x.grad = w.grad = None
    x.requires_grad_(False)
    cf(x, w).backward()
    ex, ew = _clone([x, w])
    f(ex, ew).backward()
    assert x.grad is None
    torch.testing.assert_close(w.grad, ew.grad)
    assert len(_training_entries()) == 2


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_no_grad_and_inference_mode_compile_forward_only_graphs(mode):
    def f(x, w):
        return torch.tanh(x @ w)

    x, w = _leaves((2, 3), (3, 3))
    with mode():
        out = refcomp.compile(f)(x, w)
    assert not out.requires_grad
    torch.testing.assert_close(out, f(x, w).detach())
    entries = _entries()
    assert entries and not _training_entries()
    assert all(e["backend"] == "llvm" for e in entries)


def _penalized(x, w):
    return (torch.tanh(x @ w) * x.sum(1, keepdim=True)).sum()


def test_double_backward_gradient_penalty_equals_eager():
    # Note [Double backward]: create_graph=True reruns both IR graphs on the eager
    # backend, so the gradient carries a graph to x and w.
    x, w = _leaves((4, 3), (3, 5))
    ex, ew = _clone([x, w])
    (gx,) = torch.autograd.grad(refcomp.compile(_penalized)(x, w), [x], create_graph=True)
    (egx,) = torch.autograd.grad(_penalized(ex, ew), [ex], create_graph=True)
    assert gx.requires_grad
    (gx ** 2).sum().backward()
    (egx ** 2).sum().backward()
    torch.testing.assert_close(gx, egx)
    torch.testing.assert_close(x.grad, ex.grad)
    torch.testing.assert_close(w.grad, ew.grad)
    assert len(_training_entries()) == 1


def test_third_derivative_and_hessian_equal_eager():
    def f(x):
        return (x * x * x).sum() + torch.sin(x).prod()

    (x,) = _leaves((3,))
    compiled = refcomp.compile(f)
    h = torch.autograd.functional.hessian(compiled, x)
    torch.testing.assert_close(h, torch.autograd.functional.hessian(f, x))
    (g1,) = torch.autograd.grad(compiled(x), [x], create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), [x], create_graph=True)
    (g3,) = torch.autograd.grad(g2.sum(), [x])
    (e1,) = torch.autograd.grad(f(x), [x], create_graph=True)
    (e2,) = torch.autograd.grad(e1.sum(), [x], create_graph=True)
    (e3,) = torch.autograd.grad(e2.sum(), [x])
    for a, b in ((g1, e1), (g2, e2), (g3, e3)):
        torch.testing.assert_close(a, b)


def test_double_backward_that_cannot_be_recomputed_raises_naming_why():
    def drop(x):
        return torch.nn.functional.dropout(x * 2, 0.5).sum()

    (x,) = _leaves((6,))
    y = refcomp.compile(drop)(x)
    with pytest.raises(RuntimeError, match="double backward .* draws random numbers"):
        torch.autograd.grad(y, [x], create_graph=True)

    def shifted(x, w):
        return (torch.tanh(w) + x).sum()

    (w,) = _leaves((3,))
    x = torch.randn(3, dtype=torch.float64)
    compiled = refcomp.compile(shifted)
    y = compiled(x, w)
    x.mul_(2)  # the first-order backward never reads x; the recomputation would
    with pytest.raises(RuntimeError, match="input 0 was modified in place after the forward"):
        torch.autograd.grad(y, [w], create_graph=True)
    (gw,) = torch.autograd.grad(compiled(x, w), [w])  # first order: as eager
    torch.testing.assert_close(gw, 1 - torch.tanh(w.detach()) ** 2)


def test_an_op_without_a_vjp_falls_back_to_eager_with_a_reason():
    # floor_divide has no derivative in torch either: backward must raise as eager does.
    def f(x):
        return torch.floor_divide(x, 2.0) * x

    (x,) = _leaves((4,))
    (ex,) = _clone([x])
    with pytest.raises(RuntimeError) as want:
        f(ex).sum().backward()
    with pytest.raises(RuntimeError) as got:
        refcomp.compile(f)(x).sum().backward()
    assert str(got.value) == str(want.value)
    (entry,) = _entries()
    assert entry["backend"] == "eager"
    assert any("floor_divide" in n and "no VJP" in n for n in entry["notes"]), entry["notes"]


def test_mutating_a_buffer_that_does_not_require_grad():
    def f(x, w, buf):
        buf.mul_(0.5).add_(x.detach().sum())
        return (x * w).sum()

    x, w = _leaves((3,), (3,))
    buf, ebuf = torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    ex, ew = _clone([x, w])
    refcomp.compile(f)(x, w, buf).backward()
    f(ex, ew, ebuf).backward()
    torch.testing.assert_close(buf, ebuf)
    torch.testing.assert_close(w.grad, ew.grad)
    torch.testing.assert_close(x.grad, ex.grad)


def test_a_comparison_of_a_tensor_that_requires_grad_is_no_gradient_cut():
    # Regression: `x > 0` was marked grad_cut, so where(x > 0, ...) broke the graph (RB011);
    # likewise an index computed from a tensor that requires grad.
    def f(x, table):
        rows = torch.nn.functional.embedding(x.argmax(1), table)
        return torch.where(x > 0, x, x * 0.5).sum() + rows.sum()

    x, table = _leaves((4, 3), (3, 2))
    ex, etable = _clone([x, table])
    refcomp.compile(f, fullgraph=True)(x, table).backward()
    f(ex, etable).backward()
    torch.testing.assert_close(table.grad, etable.grad)
    torch.testing.assert_close(x.grad, ex.grad)
    assert len(_training_entries()) == 1


def test_an_inplace_write_of_a_value_that_requires_grad_into_an_input():
    # Regression: buf.add_(x) lost requires_grad (buf.sum() came back without grad_fn).
    # Captured since Note [In-place on a graph input under grad]: the write-back records it.
    def f(x, buf):
        buf.add_(x)
        return buf.sum()

    (x,) = _leaves((3,))
    (ex,) = _clone([x])
    buf, ebuf = torch.zeros(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    out, want = refcomp.compile(f)(x, buf), f(ex, ebuf)
    assert out.requires_grad and buf.requires_grad == ebuf.requires_grad
    out.backward()
    want.backward()
    torch.testing.assert_close(x.grad, ex.grad)
    entries = _entries()
    assert len(entries) == 1 and entries[0]["reason"] is None, entries


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_in_training_mode_updates_running_stats_as_eager(affine):
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(3, affine=affine).double()
    ebn = torch.nn.BatchNorm2d(3, affine=affine).double()
    ebn.load_state_dict(bn.state_dict())
    (x,) = _leaves((4, 3, 2, 5))
    (ex,) = _clone([x])
    compiled = refcomp.compile(bn)
    weights = torch.randn(4, 3, 2, 5, dtype=torch.float64)
    for _ in range(3):
        (compiled(x) * weights).sum().backward()
        (ebn(ex) * weights).sum().backward()
    for (name, a), b in zip(bn.state_dict().items(), ebn.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)
    torch.testing.assert_close(x.grad, ex.grad)
    for p, q in zip(bn.parameters(), ebn.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    (entry,) = _training_entries()
    assert entry["hits"] == 2


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-14), (torch.float32, 2e-7)])
def test_batch_norm_momentum_none_cumulative_average_equals_eager_over_steps(dtype, tol):
    # The factor 1 / num_batches_tracked is computed in the graph: one compile for every
    # step (the count is never a Python number), running stats as eager's each step.
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(3, momentum=None).to(dtype)
    ebn = copy.deepcopy(bn)
    compiled = refcomp.compile(bn)
    for step in range(6):
        x = (torch.randn(8, 3, 5) * (step + 1) + step).to(dtype).requires_grad_()
        ex = x.detach().clone().requires_grad_()
        compiled(x).pow(2).sum().backward()
        ebn(ex).pow(2).sum().backward()
        torch.testing.assert_close(x.grad, ex.grad)
        for (name, a), b in zip(bn.state_dict().items(), ebn.state_dict().values()):
            torch.testing.assert_close(a, b, rtol=tol, atol=tol * 10 * (step + 1),
                                       msg=f"{name} at step {step}")
    assert int(bn.num_batches_tracked) == 6
    (entry,) = _training_entries()
    assert entry["hits"] == 5 and entry["reason"] is None
    bn.eval()  # eval mode reads the averaged statistics
    ebn.eval()
    x = torch.randn(4, 3, 5, dtype=dtype)
    torch.testing.assert_close(compiled(x), ebn(x))


def _checkpointed(use_reentrant=False, **kw):
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4).double()

    def block(h):
        return torch.nn.functional.dropout(torch.tanh(lin(h)), 0.3) @ lin.weight

    def f(x):
        return checkpoint(block, x * 2, use_reentrant=use_reentrant, **kw).sum()

    return f, lin


def _step_twice(f, lin, x):
    """(compiled grads, eager grads), each under seed 1, and the generator after each."""
    out = []
    for fn in (refcomp.compile(f), f):
        x.grad = lin.weight.grad = None
        torch.manual_seed(1)
        fn(x).backward()
        out.append((x.grad.clone(), lin.weight.grad.clone(), torch.rand(3)))
    return out


def test_torch_utils_checkpoint_is_compiled_and_recomputed_in_the_backward():
    # Note [Checkpoint traced inline]: one graph, the region recomputed by the compiled
    # backward (nothing saved but its input), dropout's mask drawn once and saved.
    f, lin = _checkpointed()
    (x,) = _leaves((3, 4))
    got, want = _step_twice(f, lin, x)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    (entry,) = _entries()
    # the mask, and the region's input x * 2, as eager's checkpoint saves it (recomputing
    # it would read x, which no eager node saves: Note [Caller tensors eager does not save])
    assert entry["reason"] is None and entry["training"]["saved_tensors"] == 2
    assert entry["training"]["recomputed_ops"] >= 3  # matmul, tanh... recomputed


def test_a_graph_break_inside_a_checkpoint_region_runs_checkpoint_eagerly():
    from torch.utils.checkpoint import checkpoint

    from tests.breaks import graph_break

    def block(h):
        graph_break("", end="")
        return torch.sin(h) * h

    def f(x):
        return checkpoint(block, x + 1, use_reentrant=False).sum()

    (x,) = _leaves((5,))
    (ex,) = _clone([x])
    (gx,) = torch.autograd.grad(refcomp.compile(f)(x), [x])
    (want,) = torch.autograd.grad(f(ex), [ex])
    torch.testing.assert_close(gx, want)
    assert any("RB016" in (e["reason"] or "") for e in _entries())


@pytest.mark.parametrize("kw, why", [({"use_reentrant": True}, "use_reentrant=True"),
                                     ({"use_reentrant": None}, "use_reentrant=None"),
                                     ({"preserve_rng_state": False},
                                      "preserve_rng_state=False")])
def test_torch_utils_checkpoint_with_eager_only_semantics_breaks_naming_them(kw, why):
    import warnings

    f, lin = _checkpointed(**kw)
    (x,) = _leaves((3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # use_reentrant=None: eager's own warning
        got, want = _step_twice(f, lin, x)
    for a, b in zip(got, want):  # checkpoint itself ran, in both
        torch.testing.assert_close(a, b)
    reasons = [e["reason"] for e in _entries() if e["reason"]]
    assert any(why in r and "checkpoint" in r for r in reasons), reasons


def test_dropout_draws_eager_random_stream_and_gradients():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                                torch.nn.Linear(16, 4), torch.nn.Dropout(0.5)).double()
    eager = copy.deepcopy(model)
    compiled = refcomp.compile(model)
    x = torch.randn(6, 8, dtype=torch.float64)
    for seed in range(3):
        torch.manual_seed(seed)
        got = compiled(x)
        after_got = torch.rand(2)  # the generator advanced by exactly eager's draws
        torch.manual_seed(seed)
        want = eager(x)
        after_want = torch.rand(2)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
        assert torch.equal(after_got, after_want)
        got.sum().backward()
        want.sum().backward()
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    (entry,) = _training_entries()
    assert entry["hits"] == 2


def test_interp_compiles_the_backward_of_a_graph_that_draws():
    # interp draws from torch's generator as eager does (spec/codegen.md), so a graph that
    # draws is no reason to run op by op (it said numpy draws: RB023; issue 37)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.3),
                                torch.nn.Linear(8, 2)).train()
    eager = copy.deepcopy(model)
    x = torch.randn(4, 8)
    refcomp.reset()
    report = refcomp.explain(model, x, backend="interp")
    assert any(n.startswith("autograd: compiled forward and backward") for n in report.notes)
    compiled = refcomp.compile(model, backend="interp")
    torch.manual_seed(1)
    got = compiled(x)
    torch.manual_seed(1)
    want = eager(x)
    torch.testing.assert_close(got, want)
    got.sum().backward()
    want.sum().backward()
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_checkpointed_blocks_of_a_module_train_as_eager():
    from torch.utils.checkpoint import checkpoint

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])

        def forward(self, x):
            for block in self.blocks:
                x = x + checkpoint(block, x, use_reentrant=False)
            return x.pow(2).mean()

    torch.manual_seed(0)
    net = Net().double()
    eager = copy.deepcopy(net)
    compiled = refcomp.compile(net)
    opts = [torch.optim.AdamW(m.parameters(), 1e-2) for m in (net, eager)]
    for _ in range(5):
        x = torch.randn(16, 8, dtype=torch.float64)
        for model, opt in zip((compiled, eager), opts):
            model(x).backward()
            opt.step()
            opt.zero_grad()
    for p, q in zip(net.parameters(), eager.parameters()):
        torch.testing.assert_close(p, q)
    (entry,) = _training_entries()  # one graph, no recompile, nothing saved but inputs
    assert entry["hits"] == 4 and entry["training"]["saved_tensors"] == 0


def _attention(x, wq, wk, wv, wo):
    batch, seq, dim = x.shape
    q = (x @ wq).reshape(batch, seq, 4, dim // 4).permute(0, 2, 1, 3)
    k = (x @ wk).reshape(batch, seq, 4, dim // 4).permute(0, 2, 3, 1)
    v = (x @ wv).reshape(batch, seq, 4, dim // 4).permute(0, 2, 1, 3)
    att = torch.softmax(q @ k, dim=-1)
    return ((att @ v).permute(0, 2, 1, 3).reshape(batch, seq, dim) @ wo).pow(2).mean()


def test_attention_saves_the_head_copies_and_torch_makes_none():
    # The head-split q, k, v and the attention output's merge are copies in ATen's
    # matmul and reshape; as IR values (Note [Copies]) the forward writes each once and
    # saves it, and the backward copies only the incoming gradients.  Before, the
    # backward recomputed the permutes and ATen copied q, k, v again (13 copies in a
    # step where eager makes 9).
    from torch.profiler import ProfilerActivity, profile

    x, *ws = _leaves((2, 16, 32), (32, 32), (32, 32), (32, 32), (32, 32))
    x.requires_grad_(False)
    eager_ws = _clone(ws)
    step = refcomp.compile(_attention)
    step(x, *ws).backward()
    _attention(x, *eager_ws).backward()
    for a, e in zip(ws, eager_ws):
        torch.testing.assert_close(a.grad, e.grad, rtol=1e-10, atol=1e-12)
    with profile(activities=[ProfilerActivity.CPU]) as p:
        step(x, *ws).backward()
    assert [e.name for e in p.events() if e.name == "aten::copy_"] == []
    (entry,) = _training_entries()
    # q, k, v and the merged heads (8 KiB each), softmax (16 KiB), the output (8 KiB):
    # the bytes the matmul results they copy took before.
    assert (entry["training"]["saved_tensors"], entry["training"]["saved_bytes"]) == \
        (6, 4 * 8192 + 16384 + 8192)
    from refcomp.resume import located_entries

    code = _attention.__code__
    ((record, _),) = located_entries(step.cache, f"{code.co_filename}:{code.co_firstlineno}")
    forward, backward = record.training.forward_graph, record.training.backward_graph
    saved = forward.outputs[1:]
    assert sum(n.op.name == "copy" and n.outputs[0] in saved for n in forward.nodes) == 4
    # the gradient of the merged heads (read by two matmuls) and of q, k, v
    assert [n.op.name for n in backward.nodes].count("copy") == 4
