"""Python's own operations on dynamic sizes see the traced size, never the sympy symbol
(Note [Sizes inside folded values]; spec/guards.md, "Dynamic sizes"), and `isinstance`
of a graph input answers its exact type (spec/tracer.md).  Found by probing (session 18, probe):
after automatic dynamic made `x.size(0)` a symbol, `x.shape == (4, 2)` was False for a
(4, 2) input, `str(x.shape)` was "(s0, 2)", `n in [4, 5]`, `[3, 4, 5].count(n)` and
`{n: 1}.get(4)` missed, `n is 4` was False, `list(range(n))` kept the previous call's
length, `[1, 2, 3][n - 3:]` raised TypeError in the break's CPython code, a
`slice(n - 3, None)` was returned holding the symbol, and `isinstance(p, nn.Parameter)`
was False for a Parameter argument."""

import math

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]
SIZES = [3, 4, 5, 4, 6]  # the second size makes dim 0 a symbol; 4 comes back


class _Echo:
    def __getitem__(self, key):
        return key

    @property
    def loud(self):
        print(end="")  # a side effect CPython replays: the subscript after it is traced
        return self


def _check(fn, backend):
    refcomp.reset()
    compiled = refcomp.compile(fn, backend=backend)
    for n in SIZES:
        x = torch.randn(n, 2)
        want = fn(x)
        got = compiled(x)
        assert type(got) is type(want), (n, got, want)
        assert got == want, (n, got, want)


PROGRAMS = {
    "size_eq_tuple": lambda x: x.shape == (4, 2),
    "size_ne_tuple": lambda x: x.shape != (4, 2),
    "tuple_of_size_eq": lambda x: tuple(x.shape) == (4, 2),
    "size_in_list": lambda x: x.shape in [(4, 2), (6, 2)],
    "int_in_list": lambda x: x.shape[0] in [4, 5],
    "tuple_in_list": lambda x: (x.shape[0],) in [(4,), (5,)],
    "dict_keyed_by_size": lambda x: {x.shape[0]: 1}.get(4, 0),
    "list_count": lambda x: [3, 4, 5].count(x.shape[0]),
    "list_index": lambda x: [4, 5, 6, 3].index(x.shape[0]),
    "str_size": lambda x: str(x.shape),
    "repr_size": lambda x: repr(x.shape) + repr(tuple(x.shape)),
    "str_list_of_sizes": lambda x: str(list(x.shape)),
    "fstring_size": lambda x: f"{x.shape} {x.shape[0]!r} {x.size()}",
    "format_size": lambda x: "{}".format(x.shape),
    "percent_size": lambda x: "%s %r" % (x.shape, x.shape[0]),
    "hash_size": lambda x: hash(x.shape),
    "is_small_int": lambda x: x.shape[0] is 4,  # noqa: F632  (CPython caches 4)
    "range_of_size": lambda x: list(range(x.shape[0])),
    "slice_of_constant_list": lambda x: [1, 2, 3, 4, 5, 6][x.shape[0] - 3:],
    "math_prod": lambda x: math.prod(x.shape),
    "int_method_str": lambda x: x.shape[0].__str__(),  # was "s0"
    "int_method_eq": lambda x: x.shape[0].__eq__(4),  # was NotImplemented
    # a slice built of a size escapes: returned, or given to a user __getitem__
    "slice_returned": lambda x: slice(x.shape[0] - 3, None),
    "slice_to_user_getitem": lambda x: _Echo()[x.shape[0] - 3:],
    "break_with_slice_on_stack": lambda x: _Echo().loud[x.shape[0] - 3:],
    "len_and_isinstance_stay_symbolic": lambda x: (len(x.shape), isinstance(x.shape, tuple)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_python_on_dynamic_sizes_like_eager(name, backend):
    _check(PROGRAMS[name], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_isinstance_parameter_argument(backend):
    refcomp.reset()

    def fn(x):
        return x * 2, isinstance(x, torch.nn.Parameter), isinstance(x, (int, torch.nn.Parameter))

    f = refcomp.compile(fn, backend=backend)
    p = torch.nn.Parameter(torch.randn(3))
    for arg in [torch.randn(3), p, torch.randn(3), p]:
        want, got = fn(arg), f(arg)
        assert got[1:] == want[1:], (type(arg), got[1:], want[1:])
        torch.testing.assert_close(got[0], want[0])
    # a tensor the trace made is a plain tensor; a module's parameter is a Parameter
    lin = torch.nn.Linear(2, 2)

    def g(x):
        return x + 1, isinstance(lin.weight, torch.nn.Parameter), \
            isinstance(lin.weight * 1, torch.nn.Parameter)

    assert refcomp.compile(g, backend=backend)(torch.randn(2))[1:] == (True, False)
