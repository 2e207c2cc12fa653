"""The static best fit of plan_memory picks what the general (symbolic) one picks."""

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import ir.passes.plan_memory as pm

conflict = st.tuples(st.just(0), st.just(0), st.integers(0, 40).map(lambda k: 64 * k),
                     st.integers(1, 8).map(lambda k: 64 * k))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8).map(lambda k: 64 * k), st.lists(conflict, max_size=12))
def test_static_fit_is_the_general_fit(size, conflicts):
    static = pm._best_fit_static(size, conflicts)
    # the general path, taken for a size that is not a plain int
    assert pm._best_fit(sympy.Integer(size), conflicts) == static
