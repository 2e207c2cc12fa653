"""The planner's polynomial test (`_nonneg` of `_poly`, used by the symbolic best fit)
answers as `ir.plan.provably_nonneg` does on size polynomials (issue 36: sympy arithmetic
per candidate pair made planning a BERT graph over symbolic sizes take seconds)."""

import sympy

from ir.passes.plan_memory import _nonneg, _poly, _psub
from ir.plan import provably_nonneg

s0, s1, s2 = (sympy.Symbol(n, integer=True, positive=True) for n in ("s0", "s1", "s2"))
EXPRS = [0, 5, -3, s0, s0 - 1, s0 - 2, 2 * s0 - s1, s0 * s1 - s1, s0 * s1 - s0 - s1,
         s0 * s1 - s0 - s1 + 1, 128 * s0 * s1 - 64 * s0, s0 ** 2 - 2 * s0 + 1,
         s0 ** 2 - 3 * s0 + 2, 64 * s0 * s1 * s2 - 64 * s0 * s1, s1 * s2 - s0,
         256 * s0 * s1 + 64 - 320 * s0]


def test_polynomial_test_agrees_with_provably_nonneg():
    for e in EXPRS:
        assert _nonneg(_poly(e)) == provably_nonneg(e), e


def test_difference_of_polynomials_is_the_polynomial_of_the_difference():
    for a in EXPRS:
        for b in EXPRS[:6]:
            assert _psub(_poly(a), _poly(b)) == _poly(sympy.expand(a - b)), (a, b)
