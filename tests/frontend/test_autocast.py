"""CPU autocast is traced: each op's operands are cast as torch's autocast kernel casts them
(Note [Autocast policy], refcomp/tracer/autocast.py; spec/guards.md "Global torch state").
Results must have eager's dtypes and values, forward and backward, on every backend."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import refcomp
from refcomp.tracer import autocast

BACKENDS = ["eager", "interp", "llvm"]


# spec/testing.md's tolerances: every float output gets the tolerance of the least precise
# dtype the program computes in (a kernel's half-precision value may be an ulp of its type
# off eager's, and later ops carry that on).
TOL = {torch.bfloat16: 5e-2, torch.float16: 1e-2, torch.float32: 1e-4}


def same(got, want, dtype=torch.float32):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    tol = TOL.get(dtype, 1e-4)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def under(dtype, fn, *args):
    with torch.autocast("cpu", dtype=dtype):
        return fn(*args)


def test_the_policy_is_read_off_torch():
    from refcomp.tracer.values import TensorVar

    def tv(*shape, dtype=torch.float32):
        return TensorVar(None, torch.empty(shape, dtype=dtype, device="meta"))

    bf16 = torch.bfloat16
    with torch.autocast("cpu", dtype=bf16):
        assert autocast.policy(torch.matmul, "matmul", [tv(2, 3), tv(3, 4)], {}, bf16) == \
            autocast.LOWER
        assert autocast.policy(F.linear, "linear", [tv(2, 3), tv(4, 3)], {}, bf16) == \
            autocast.LOWER
        assert autocast.policy(F.mse_loss, "mse_loss", [tv(2, 3), tv(2, 3)], {}, bf16) == \
            autocast.FP32
        assert autocast.policy(torch.relu, "relu", [tv(2, 3)], {}, bf16) is None


OPS = {
    "matmul_relu": (lambda x, w: torch.relu(x @ w) + 1, [(4, 8), (8, 3)]),
    "linear_bias": (lambda x, w, b: F.linear(x, w, b).sum(-1), [(4, 8), (3, 8), (3,)]),
    "bmm_softmax": (lambda a, b: torch.bmm(a, b).softmax(-1), [(2, 3, 4), (2, 4, 5)]),
    "mse_loss_fp32": (lambda a, b: F.mse_loss(a @ b, b.t() @ a.t()), [(3, 3), (3, 3)]),
    "prod_fp32": (lambda a, w: (a @ w).prod(-1), [(3, 4), (4, 2)]),
    "cat_mixed": (lambda a, w: torch.cat([a @ w, a[:, :2]], 1), [(3, 4), (4, 2)]),
    "layer_norm": (lambda a, w: F.layer_norm(a @ w, (6,)), [(3, 4), (4, 6)]),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1).relu(), [(1, 2, 5, 5), (3, 2, 3, 3)]),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
             [(1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)]),
    "float64_untouched": (lambda a, b: a.double() @ b.double(), [(3, 4), (4, 2)]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_under_autocast_match_eager(name, backend):
    fn, shapes = OPS[name]
    args = [torch.randn(s) for s in shapes]
    cf = refcomp.compile(fn, backend=backend)
    for dtype in (torch.bfloat16, torch.float16):
        same(under(dtype, cf, *args), under(dtype, fn, *args), dtype)
        entry = cf.last_entry
        assert entry.graph is not None, entry.reason  # traced, not an eager fallback
    same(cf(*args), fn(*args))  # autocast off again: float32, a third entry
    assert len(cf.cache.entries) == 3


def test_the_graph_holds_the_casts():
    cf = refcomp.compile(lambda x, w: x @ w, backend="interp", options={"passes": []})
    under(torch.bfloat16, cf, torch.randn(2, 3), torch.randn(3, 4))
    counts = cf.last_entry.graph.op_counts()
    assert counts.get("cast") == 2 and counts.get("matmul") == 1, counts


@pytest.mark.parametrize("backend", ["eager", "llvm"])
def test_a_training_step_under_autocast_gives_eager_gradients(backend):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))
    twin = copy.deepcopy(model)
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))

    def loss_of(m, x, y):
        return F.cross_entropy(m(x), y)

    step = refcomp.compile(loss_of, backend=backend)
    for _ in range(2):
        model.zero_grad()
        twin.zero_grad()
        got = under(torch.bfloat16, step, model, x, y)
        want = under(torch.bfloat16, loss_of, twin, x, y)
        same(got, want, torch.bfloat16)
        got.backward()
        want.backward()
        for p, q in zip(model.parameters(), twin.parameters()):
            same(p.grad, q.grad, torch.bfloat16)
    assert step.last_entry.graph is not None


def test_cuda_autocast_still_runs_eagerly_with_its_reason():
    from refcomp import global_state

    plain = global_state.snapshot()
    cuda_on = plain._replace(autocast=tuple(
        (d, d == "cuda", torch.float16 if d == "cuda" else dt) for d, _, dt in plain.autocast))
    assert "torch.autocast('cuda', dtype=torch.float16) is active" in \
        global_state.eager_reason(cuda_on)
    cpu_on = plain._replace(autocast=tuple(
        (d, d == "cpu", torch.bfloat16 if d == "cpu" else dt) for d, _, dt in plain.autocast))
    assert global_state.eager_reason(cpu_on) is None  # traced with its casting rules


@pytest.mark.parametrize("backend", BACKENDS)
def test_norms_of_bf16_activations_with_float32_parameters(backend):
    # Regression: decompose made layer_norm's result float32 (the parameters' dtype) where
    # torch returns the input's bfloat16, so such a frame fell back with RB018.
    x, w, b = torch.randn(6, 16).bfloat16(), torch.randn(16), torch.randn(16)

    def f(x, w, b):
        return F.layer_norm(x, (16,), w, b), F.rms_norm(x, (16,), w)

    cf = refcomp.compile(f, backend=backend)
    for got, want in zip(cf(x, w, b), f(x, w, b)):
        same(got, want, torch.bfloat16)
    assert cf.last_entry.graph is not None, cf.last_entry.reason


def test_an_op_autocast_refuses_raises_as_in_eager():
    # Found by tests/frontend/test_fuzz_autocast.py: torch.stack of float16 tensors under
    # bfloat16 autocast raises in at::autocast::prioritize; the plain op (the meta run)
    # accepts them, so the compiled call returned.
    def f(x):
        return torch.stack([x[i] * i for i in range(x.shape[0])])

    x = torch.ones(2, dtype=torch.float16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="prioritize"):
            f(x)
        with pytest.raises(RuntimeError, match="prioritize"):
            refcomp.compile(f, backend="eager")(x)


def test_an_operand_of_the_other_half_type_runs_eagerly():
    # Found by the autocast fuzz: torch.roll of float16 under bfloat16 autocast raises in
    # eager (its CPU kernel calls cat, which autocast promotes), but not on fake tensors.
    def f(x):
        return torch.roll(x.abs(), shifts=-1)

    x = torch.ones(3, dtype=torch.float16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="prioritize"):
            f(x)
        with pytest.raises(RuntimeError, match="prioritize"):
            refcomp.compile(f, backend="eager")(x)

