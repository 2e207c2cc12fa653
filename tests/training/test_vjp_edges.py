"""Gradients at the edge points of ops' derivatives (zeros, ties, clamp bounds, kinks),
against eager's, on every CPU backend: where ATen's derivative formula masks a point (a
norm or std of zeros, atan2 at (0, 0), prod of zeros, ties of max and maximum), refcomp's
VJP must give the same number, not the inf * 0 = NaN of the plain formula.  A NaN that
eager's formula also gives must match (equal_nan).  Each function compiles once per
backend; the four value sets share its shapes.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import refcomp

EDGE_FNS = {
 "prod": lambda x: x.prod(),
 "prod_dim": lambda x: x.prod(dim=-1),
 "cumprod": lambda x: x.cumprod(-1),
 "clamp": lambda x: x.clamp(0.0, 1.0),
 "clamp_min": lambda x: x.clamp(min=0.0),
 "relu": lambda x: F.relu(x),
 "hardtanh": lambda x: F.hardtanh(x, 0.0, 1.0),
 "abs": lambda x: x.abs(),
 "maximum": lambda x: torch.maximum(x, x.flip(-1)),
 "minimum": lambda x: torch.minimum(x, torch.zeros_like(x)),
 "fmax": lambda x: torch.fmax(x, torch.zeros_like(x)),
 "max_all": lambda x: x.max(),
 "amax": lambda x: x.amax(-1),
 "max_dim": lambda x: x.max(-1).values,
 "median": lambda x: x.median(),
 "sort": lambda x: x.sort(-1).values,
 "logsumexp": lambda x: torch.logsumexp(x, -1),
 "sqrt_sq": lambda x: (x * x).sqrt(),
 "pow_half": lambda x: (x*x).pow(0.5),
 "pow_0": lambda x: x.pow(0),
 "pow_int": lambda x: x.pow(2),
 "pow_tensor": lambda x: torch.pow(x, x),
 "pow_scalar_base": lambda x: torch.pow(0.0, x),
 "xlogy": lambda x: torch.xlogy(x, x),
 "sgn": lambda x: x.sgn() * x,
 "hypot": lambda x: torch.hypot(x, x),
 "atan2": lambda x: torch.atan2(x, x),
 "dist": lambda x: torch.dist(x, torch.zeros_like(x)),
 "cdist": lambda x: torch.cdist(x.unsqueeze(0), x.unsqueeze(0)),
 "std_dim": lambda x: x.std(-1),
 "var_mean": lambda x: torch.var_mean(x, -1)[0],
 "softmax": lambda x: x.softmax(-1),
 "log_softmax": lambda x: x.log_softmax(-1),
 "elu": lambda x: F.elu(x),
 "leaky": lambda x: F.leaky_relu(x),
 "gelu": lambda x: F.gelu(x),
 "silu": lambda x: F.silu(x),
 "mish": lambda x: F.mish(x),
 "softplus": lambda x: F.softplus(x),
 "hardswish": lambda x: F.hardswish(x),
 "hardsigmoid": lambda x: F.hardsigmoid(x),
 "relu6": lambda x: F.relu6(x),
 "threshold": lambda x: F.threshold(x, 0.0, 0.5),
 "nan_to_num": lambda x: torch.nan_to_num(x / x),
 "where": lambda x: torch.where(x > 0, x.sqrt(), x),
 "frac": lambda x: x.frac(),
 "round": lambda x: x.round(),
 "rsqrt": lambda x: (x*x+1).rsqrt(),
 "trunc": lambda x: x.trunc(),
 "norm_dim0": lambda x: x.norm(dim=0),
 "renorm": lambda x: torch.renorm(x, 2, 0, 1.0),
 "cosine": lambda x: F.cosine_similarity(x, x, dim=-1),
 "pdist": lambda x: F.pairwise_distance(x, x),
 "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
 "group_norm": lambda x: F.group_norm(x.unsqueeze(0), 1),
 "instance_norm": lambda x: F.instance_norm(x.unsqueeze(0)),
 "rms_norm": lambda x: F.rms_norm(x, x.shape[-1:]),
 "logit": lambda x: torch.logit(x),
 "log1p": lambda x: torch.log1p(x),
 "sinc": lambda x: torch.sinc(x),
 "erfinv": lambda x: torch.erfinv(x),
 "cummax": lambda x: x.cummax(-1).values,
 "logcumsumexp": lambda x: x.logcumsumexp(-1),
 "kthvalue": lambda x: x.kthvalue(1, -1).values,
 "nanmean": lambda x: x.nanmean(),
 "nansum": lambda x: x.nansum(),
 "mse": lambda x: F.mse_loss(x, torch.zeros_like(x)),
 "l1": lambda x: F.l1_loss(x, torch.zeros_like(x)),
 "smoothl1": lambda x: F.smooth_l1_loss(x, torch.zeros_like(x)),
 "huber": lambda x: F.huber_loss(x, torch.zeros_like(x)),
 "bce": lambda x: F.binary_cross_entropy(x.clamp(0, 1), torch.zeros_like(x)),
 "kl": lambda x: F.kl_div(x, x, reduction="sum"),
 "sigmoid_bce": lambda x: F.binary_cross_entropy_with_logits(x, torch.zeros_like(x)),
 "softmin": lambda x: F.softmin(x, -1),
 "hardshrink": lambda x: F.hardshrink(x, 0.5),
 "softshrink": lambda x: F.softshrink(x, 0.5),
 "celu": lambda x: F.celu(x),
 "selu": lambda x: F.selu(x),
 "glu": lambda x: F.glu(torch.cat([x, x], -1), -1),
 "logsigmoid": lambda x: F.logsigmoid(x),
 "softsign": lambda x: F.softsign(x),
 "tanhshrink": lambda x: F.tanhshrink(x),
 "lerp": lambda x: torch.lerp(x, x.flip(-1), 0.5),
 "addcdiv": lambda x: torch.addcdiv(x, x, x.abs() + 1),
 "clamp_tensor": lambda x: torch.clamp(x, min=x.flip(-1)),
 "pow_neg": lambda x: (x.abs() + 1) ** -1,
 "sqrt": lambda x: x.sqrt(),
 "log": lambda x: x.log(),
 "exp2": lambda x: torch.exp2(x),
 "mean": lambda x: x.mean(),
 "var_all": lambda x: x.var(),
 "cumsum": lambda x: x.cumsum(-1),
 "trace": lambda x: x[:, :2].trace(),
 "diag": lambda x: x.diagonal(),
 "max_pool": lambda x: F.max_pool2d(x.reshape(1, 1, 2, 3), 2, 1),
 "avg_pool": lambda x: F.avg_pool2d(x.reshape(1, 1, 2, 3), 2, 1),
 "interp": lambda x: F.interpolate(x.reshape(1, 1, 2, 3), scale_factor=2),
 "amin": lambda x: x.amin(0),
 "aminmax": lambda x: torch.aminmax(x).min,
 "logaddexp": lambda x: torch.logaddexp(x, x),
 "entr": lambda x: torch.special.entr(x),
 "xlog1py": lambda x: torch.special.xlog1py(x, x),
 "erfc": lambda x: torch.erfc(x),
 "lgamma": lambda x: torch.lgamma(x),
 "sign": lambda x: torch.sign(x) + x,
 "floor": lambda x: torch.floor(x) + x,
 "remainder": lambda x: torch.remainder(x, 1.5),
 "fmod": lambda x: torch.fmod(x, 1.5),
 "copysign": lambda x: torch.copysign(x, -x),
 "masked_fill": lambda x: x.masked_fill(x == 0, 1.0),
 "index_put": lambda x: x.index_put((torch.tensor([0, 0]),), x[:1].expand(2, 3) * 2, accumulate=True),
 "scatter_reduce": lambda x: torch.zeros(2, 3).scatter_reduce(1, torch.tensor([[0, 0, 1], [1, 1, 1]]), x, "amax"),
 "matmul": lambda x: x @ x.T,
 "baddbmm": lambda x: torch.baddbmm(x.unsqueeze(0), x.unsqueeze(0), x.T.unsqueeze(0) * 0 + x[:, :1].T.unsqueeze(0)[..., :3].expand(1, 3, 3)),
 "linalg_norm_fro": lambda x: torch.linalg.norm(x),
 "matrix_norm": lambda x: torch.linalg.matrix_norm(x),
 "cosine_zero": lambda x: F.cosine_similarity(x, torch.zeros_like(x), dim=-1),
 "amax_nan_grad": lambda x: x.amax(0) * float("nan"),
 "amin_all_dims_nan_grad": lambda x: x.amin((0, 1)) * float("nan"),
 "max_nan_grad": lambda x: x.max() * float("nan"),
 "min_std_of_one": lambda x: x.min().std(),
}
EDGE_VALUES = {
 "zeros": torch.zeros(2, 3),
 "ties": torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]),
 "edges": torch.tensor([[0.0, 1.0, -1.0], [0.5, 6.0, -3.0]]),
 "half": torch.tensor([[0.5, -0.5, 1.5], [2.5, -2.5, 3.0]]),
}


def _grad_or_error(fn, values):
    x = values.clone().requires_grad_()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (g,) = torch.autograd.grad(fn(x).sum(), x, allow_unused=True)
    except Exception as e:  # noqa: BLE001 -- compared by type with the compiled run's
        return type(e)
    return g


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("name", EDGE_FNS)
def test_gradient_at_edge_points_equals_eager(name, backend):
    refcomp.reset()
    fn = EDGE_FNS[name]
    compiled = refcomp.compile(fn, backend=backend)
    for label, values in EDGE_VALUES.items():
        want = _grad_or_error(fn, values)
        got = _grad_or_error(compiled, values)
        if isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, equal_nan=True,
                                       msg=lambda m: f"{name} at {label}: {m}")
        else:
            assert got is want or (isinstance(want, type) and isinstance(got, type)
                                   and issubclass(got, want)), (name, label, got, want)
    refcomp.reset()
