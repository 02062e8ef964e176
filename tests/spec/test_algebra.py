"""The symbolic tools of the proofs: what they prove is true, and false claims fail."""

from __future__ import annotations

import pytest
import sympy as sp

from spec.algebra import assert_equal, assert_true, assert_zero, expand_sums, is_zero

n = sp.Symbol("n", integer=True, positive=True)
t, s = sp.symbols("t s", integer=True, positive=True)
x = sp.IndexedBase("x", real=True)
y = sp.IndexedBase("y", real=True)
a = sp.Symbol("a", real=True)


def test_linearity_of_sums() -> None:
    left = sp.Sum(a * x[t] + y[t], (t, 1, n))
    right = a * sp.Sum(x[t], (t, 1, n)) + sp.Sum(y[s], (s, 1, n))
    assert is_zero(left - right)


def test_separable_double_sum() -> None:
    left = sp.Sum(x[s] * y[t], (t, 1, n), (s, 1, n))
    assert is_zero(left - sp.Sum(x[t], (t, 1, n)) * sp.Sum(y[t], (t, 1, n)))


def test_constant_summand_counts_terms() -> None:
    assert expand_sums(sp.Sum(a, (t, 1, n))) == a * n


def test_nested_sum_with_dependent_bound_stays_nested() -> None:
    i = sp.Symbol("i", integer=True, positive=True)
    m = sp.IndexedBase("m", integer=True, positive=True)
    z = sp.IndexedBase("z", real=True)
    nested = sp.Sum(z[i, t] / m[i], (t, 1, m[i]), (i, 1, n))
    rewritten = expand_sums(nested)
    # The inner bound m[i] depends on the outer index: no factor may leave the outer sum.
    assert rewritten.has(sp.Sum) and not is_zero(rewritten)
    assert is_zero(nested - sp.Sum(sp.Sum(z[i, s], (s, 1, m[i])) / m[i], (i, 1, n)))


@pytest.mark.parametrize(
    "false_claim",
    [
        sp.Sum(x[t] ** 2, (t, 1, n)) - sp.Sum(x[t], (t, 1, n)) ** 2,
        sp.Sum(x[s] * x[t], (t, 1, n), (s, 1, n)) - n * sp.Sum(x[t] ** 2, (t, 1, n)),
        sp.Sum(x[t], (t, 1, n)) - sp.Sum(x[t], (t, 1, n + 1)),
        sp.Symbol("u") - 1,
    ],
)
def test_false_claims_are_not_proven(false_claim: sp.Expr) -> None:
    assert not is_zero(false_claim)
    with pytest.raises(AssertionError, match="not 0"):
        assert_zero(false_claim, "a false claim")


def test_assert_helpers_return_the_claim() -> None:
    assert assert_equal(sp.Integer(2) / 4, sp.Rational(1, 2), "half") == "half"
    assert assert_true(True, "yes") == "yes"
    with pytest.raises(AssertionError, match="undecided"):
        assert_true(sp.Symbol("q", real=True).is_positive, "undecided")
