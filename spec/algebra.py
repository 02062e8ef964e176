"""Small symbolic tools the proofs share: deciding ``expr == 0`` and handling ``Sum``.

sympy's ``simplify`` does not pull a factor free of the summation index out of a
``Sum``, nor split a double sum of a separable summand into a product of sums. The two
lemmas it needs for the general-``n`` proofs are applied here explicitly:

* linearity: ``sum_t (a x_t + y_t) = a sum_t x_t + sum_t y_t`` for ``a`` free of ``t``;
* separability: ``sum_s sum_t f(s) g(t) = (sum_s f(s)) (sum_t g(t))``.

Both are exact, so an expression these rewrites and ``simplify`` bring to 0 is 0.
"""

from __future__ import annotations

import sympy as sp

#: The one summation index every single ``Sum`` is renamed to, so that sums that differ
#: only in the name of their index compare equal.
_CANONICAL_INDEX = sp.Symbol("t_canonical", integer=True, positive=True)


def _depends_on(expr: sp.Expr, index: sp.Symbol) -> bool:
    # free_symbols, not has(): a bound index of an inner Sum is not a dependence.
    return index in expr.free_symbols


def _linear(summand: sp.Expr, limit: tuple[sp.Symbol, sp.Expr, sp.Expr]) -> sp.Expr:
    """``sum over limit of summand``, with every factor free of the index taken out."""
    variable, low, high = limit
    result = sp.S.Zero
    for term in sp.Add.make_args(sp.expand(sp.powsimp(summand))):
        constant, rest = sp.S.One, sp.S.One
        for factor in sp.Mul.make_args(term):
            if _depends_on(factor, variable):
                rest *= factor
            else:
                constant *= factor
        result += constant * (sp.Sum(rest, limit) if rest != 1 else high - low + 1)
    return result


def _split_sum(total: sp.Sum) -> sp.Expr:
    """Linearity on one ``Sum`` whose summand is already rewritten, one index at a time.

    The innermost index goes first (sympy lists it first). On a double sum this also gives
    separability: the inner sum of ``f(s) g(t)`` over ``t`` is ``f(s) sum_t g(t)``, and
    ``sum_t g(t)`` is then a constant of the sum over ``s``.
    """
    result = total.function
    for limit in total.limits:
        result = _linear(result, limit)
    return result


def _canonical_single_sum(total: sp.Sum) -> sp.Expr:
    if len(total.limits) != 1:
        return total
    variable, low, high = total.limits[0]
    # A summand with a Sum inside could capture the renamed index: leave it alone.
    if total.function.has(sp.Sum) or _CANONICAL_INDEX in total.function.free_symbols:
        return total
    return sp.Sum(
        total.function.xreplace({variable: _CANONICAL_INDEX}), (_CANONICAL_INDEX, low, high)
    )


def expand_sums(expr: sp.Expr) -> sp.Expr:
    """Rewrite every ``Sum`` in ``expr`` by linearity (hence separability), innermost first."""
    expr = sp.sympify(expr)
    expr = expr.replace(lambda e: isinstance(e, sp.Sum), _split_sum)
    return expr.replace(lambda e: isinstance(e, sp.Sum), _canonical_single_sum)


def simplified(expr: sp.Expr) -> sp.Expr:
    """``expr`` brought as close to a canonical form as the proofs need."""
    expr = sp.sympify(expr)
    if expr.has(sp.Sum):
        expr = expand_sums(expr)
    # Cheap normal forms first; simplify only if they do not already give 0.
    for attempt in (sp.expand, sp.cancel, sp.factor_terms):
        candidate = attempt(expr)
        if candidate == 0:
            return sp.S.Zero
    try:
        return sp.simplify(expr)
    except (StopIteration, NotImplementedError, TypeError):
        # sympy's sum_simplify fails on some Sum shapes; undecided is not zero.
        return expr


def is_zero(expr: sp.Expr) -> bool:
    """True when ``expr`` simplifies to 0 (a proof that it is 0); False when it does not."""
    return simplified(expr) == 0


def assert_zero(expr: sp.Expr, claim: str) -> str:
    """Raise ``AssertionError`` unless ``expr`` simplifies to 0; return ``claim``."""
    rest = simplified(expr)
    if rest != 0:
        raise AssertionError(f"{claim}: the difference simplifies to {rest}, not 0")
    return claim


def assert_equal(lhs: sp.Expr, rhs: sp.Expr, claim: str) -> str:
    """Raise ``AssertionError`` unless ``lhs - rhs`` simplifies to 0; return ``claim``."""
    return assert_zero(sp.sympify(lhs) - sp.sympify(rhs), claim)


def assert_true(condition: bool | sp.Basic | None, claim: str) -> str:
    """Raise ``AssertionError`` unless sympy decided ``condition`` to be True."""
    if condition is not True and condition != sp.true:
        raise AssertionError(f"{claim}: sympy decides {condition!r}, not True")
    return claim
