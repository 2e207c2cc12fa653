"""Bad input to the API is a clear error at the call, naming the option and what it
accepts (spec/guards.md, "Options")."""

import pytest
import torch

import refcomp


def f(x):
    return x + 1


@pytest.mark.parametrize("options, error, words", [
    ({"passes": ["fold", "dcee"]}, ValueError, ["options['passes']", "'dcee'", "valid passes:",
                                                "dce"]),
    ({"passes": 3}, TypeError, ["options['passes']", "list of pass names"]),
    ({"backend_options": {"fusee": False}}, ValueError, ["backend_options", "'fusee'",
                                                         "valid:", "fuse"]),
    ({"backend_options": [("fuse", False)]}, TypeError, ["backend_options", "dict"]),
    ([("cache_size_limit", 2)], TypeError, ["options must be a dict", "list",
                                            "cache_size_limit"]),
])
def test_bad_options_are_named_at_compile(options, error, words):
    with pytest.raises(error) as raised:
        refcomp.compile(f, options=options)
    for word in words:
        assert word in str(raised.value)


def test_backend_options_are_the_named_backends():
    with pytest.raises(ValueError, match="for backend 'eager'; valid: check"):
        refcomp.compile(f, backend="eager", options={"backend_options": {"fuse": False}})
    x = torch.ones(2)
    compiled = refcomp.compile(f, backend="llvm", options={"backend_options": {"fuse": False}})
    assert torch.equal(compiled(x), f(x))
    compiled = refcomp.compile(f, options={"passes": "fold,dce"})
    assert torch.equal(compiled(x), f(x))


def test_fullgraph_must_be_a_bool():
    with pytest.raises(ValueError, match="fullgraph must be True or False, got 'no'"):
        refcomp.compile(f, fullgraph="no")


def test_guard_filter_returning_none_is_named():
    compiled = refcomp.compile(f, backend="eager", options={"guard_filter_fn": lambda gs: None})
    with pytest.raises(TypeError, match=r"guard_filter_fn'\] must return a list of bools"):
        compiled(torch.ones(2))


def test_mark_dynamic_of_a_non_tensor():
    with pytest.raises(TypeError, match="mark_dynamic expects a torch.Tensor, got int"):
        refcomp.mark_dynamic(3, 0)
