"""Outputs are fresh unless eager returns an alias, and then they alias exactly what
eager's alias (spec/correctness.md, "Output aliasing"; refcomp/runtime.py,
Note [Fresh outputs])."""

import pytest
import torch

from tests.frontend.eager_diff import assert_like_eager

BACKENDS = ["interp", "eager", "llvm"]


def issue_11_minimal(x0, x1):
    v0 = torch.take_along_dim(x1, x1.argmax(dim=0, keepdim=True), dim=0)
    v2 = v0.clone()
    v2.narrow(0, 0, 1).mul_(0.5)
    return torch.where(v0 > x1, v0, 0.0), v0


def clone_of_input(x):
    return x.clone()


def cse_twins(x):
    return x * 2, x * 2


def clone_then_mutate_input(x):
    y = x.clone()
    x.add_(1)
    return y


def clone_of_intermediate_mutated(x):
    y = x + 1
    z = y.clone()
    z.mul_(2)
    return y, z


def identity_casts(x):
    return x.to(torch.float32), x.float(), x.contiguous(), x.type_as(x)


def view_of_output(x):
    y = x * 2
    return y, y.t(), y[1:]


def clone_across_break(x):
    y = x * 3
    z = y.clone()
    print("break")
    z.add_(1)
    return y, z


CASES = [issue_11_minimal, clone_of_input, cse_twins, clone_then_mutate_input,
         clone_of_intermediate_mutated, identity_casts, view_of_output, clone_across_break]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_output_aliasing_like_eager(f, backend):
    n = 2 if f is issue_11_minimal else 1
    assert_like_eager(f, lambda: tuple(torch.randn(3, 4) for _ in range(n)), backend)


def view_of_unary_output(x):  # fuzz finding outputs_view_of_output (a regression of 2c2c746)
    v1 = torch.abs(x)
    return v1, v1.reshape(-1)


@pytest.mark.parametrize("backend", ["eager", "llvm"])
def test_view_of_a_unary_output_stays_a_view(backend):
    assert_like_eager(view_of_unary_output, lambda: (torch.randn(3, 4),), backend)


def detach_of_input(x):  # fuzz finding detach_output_alias
    return torch.abs(x), x.detach(), x.t().detach()[1:]


@pytest.mark.parametrize("backend", BACKENDS)
def test_detach_of_input_shares_its_storage(backend):
    assert_like_eager(detach_of_input, lambda: (torch.randn(3, 4),), backend)


@pytest.mark.parametrize("backend", ["eager", "interp"])
def test_detach_of_requires_grad_input(backend):
    import refcomp

    refcomp.reset()
    x = torch.randn(3, 4, requires_grad=True)
    d = refcomp.compile(lambda x: x.detach(), backend=backend)(x)
    assert d is not x and not d.requires_grad and d.data_ptr() == x.data_ptr()
    d.add_(1)  # a detached view may be written, and the write reaches x
    assert torch.equal(x.detach(), d)


def test_view_of_input_with_dynamic_sizes_is_a_new_object():
    """Fuzz finding view_output_after_recompile, the part about identity: after a
    recompile with dynamic sizes, `x.view_as(x)` compiled to the input itself, and llvm
    returned the caller's very tensor where eager returns a new view of it."""
    import refcomp

    for backend in BACKENDS:
        refcomp.reset()
        cf = refcomp.compile(lambda x: (torch.abs(x), x.view_as(x)), backend=backend)
        cf(torch.randn(1, 2))
        x = torch.randn(3, 2)
        _, v = cf(x)
        assert v is not x and torch.equal(v, x)
