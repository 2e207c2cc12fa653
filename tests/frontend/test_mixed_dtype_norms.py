"""Norms whose parameters have another dtype than their input: ATen's CPU kernels accept
float32 parameters for a float32, float16 or bfloat16 input, and raise otherwise; refcomp
raises as eager (at a break) or equals it (spec/correctness.md, "Exceptions").  Found by
soak seed 8001: `F.batch_norm` of a float64 input with float32 running statistics ran
where eager raises "mixed dtype (CPU)"."""

import itertools

import pytest
import torch
import torch.nn.functional as F

import refcomp

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
CASES = {
    "batch_norm_eval": lambda x, p: F.batch_norm(x, torch.zeros(3, dtype=p),
                                                 torch.ones(3, dtype=p)),
    "batch_norm_train_weight": lambda x, p: F.batch_norm(x, None, None, torch.ones(3, dtype=p),
                                                         training=True),
    "batch_norm_f64_weight": lambda x, p: F.batch_norm(
        x, torch.zeros(3, dtype=p), torch.ones(3, dtype=p), torch.ones(3, dtype=torch.float64)),
    "layer_norm_weight": lambda x, p: F.layer_norm(x, (4,), torch.ones(4, dtype=p)),
    "layer_norm_bias": lambda x, p: F.layer_norm(x, (4,), None, torch.zeros(4, dtype=p)),
    "group_norm": lambda x, p: F.group_norm(x, 1, torch.ones(3, dtype=p)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_norm_parameter_dtypes_raise_or_run_as_eager(name):
    fn = CASES[name]
    for xd, pd in itertools.product(DTYPES, DTYPES):
        x = torch.randn(2, 3, 4).to(xd)
        try:
            want, err_e = fn(x, pd), None
        except RuntimeError as e:
            want, err_e = None, e
        refcomp.reset()
        compiled = refcomp.compile(lambda x: fn(x, pd), backend="llvm")
        if err_e is not None:
            with pytest.raises(RuntimeError):
                compiled(x)
            continue
        got = compiled(x)
        tol = 1e-2 if torch.float16 in (xd, pd) or torch.bfloat16 in (xd, pd) else 1e-5
        assert got.dtype == want.dtype, (name, xd, pd)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, msg=f"{name} {xd} {pd}")
