r"""The identities of MATH.md, each with its proof, as a catalogue (``IDENTITIES``).

Every record has a stable ``id`` (what the conformance suite points its invariants at),
a one-line ``statement``, the ``latex`` of the identity, the ``proof`` (a function that
raises ``AssertionError`` when the identity does not hold for the current definitions and
returns the claims it checked), a line on the ``method``, and the ``test`` that runs the
proof.

How the proofs go:

* an equation is proven by sympy simplifying the difference of its sides to 0 — for
  ``n = 1 .. 4`` tokens with explicit symbols ``l_1 .. l_n``, ``b_1 .. b_n`` (and batches of
  such examples), and for a general ``n`` with ``Sum`` over indexed symbols where sympy
  manages (``spec.algebra`` supplies the two ``Sum`` lemmas it needs);
* an inequality is proven by writing the quantity as a sum of manifestly non-negative terms;
* what concerns the data layout rather than the formulas (padding) is proven through the
  oracle, which evaluates the same expressions.

All proofs build their expressions from ``spec.definitions`` and ``spec.family`` at call
time, so a change of a formula there makes the proofs that depend on it fail.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import mpmath
import sympy as sp

from spec import symbols as sym
from spec.algebra import assert_equal, assert_true, assert_zero
from spec.definitions import (
    LOSS_NAMES,
    OUTPUT_SYMBOLS,
    SYMBOLIC,
    TERM_NAMES,
    TOTAL_NAME,
    Batch,
    Example,
    ExampleSummary,
    ExplicitBatch,
    ExplicitTokens,
    IndexedBatch,
    IndexedTokens,
    at_baseline,
    baseline_scale,
    indexed_example,
    loss_terms,
    per_example_contributions,
    token_gradient,
)
from spec.family import (
    FAMILY_INSTANCES,
    family_member,
    generic_matched_scale,
    generic_member,
)

#: Token counts of the explicit proofs.
SIZES: tuple[int, ...] = (1, 2, 3, 4)
#: Batches (token count of each kept example) of the explicit batch-level proofs.
BATCHES: tuple[tuple[int, ...], ...] = ((1,), (2,), (3,), (4,), (1, 2), (2, 3, 4))
#: The five terms and J: the outputs that depend on l.
L_DEPENDENT: tuple[str, ...] = (*TERM_NAMES, TOTAL_NAME)

TEST_FILE = "tests/spec/test_identities.py"


@dataclass(frozen=True)
class Identity:
    """One identity of MATH.md and how it is proven."""

    id: str
    statement: str
    latex: str
    proof: Callable[[], tuple[str, ...]]
    method: str

    @property
    def test(self) -> str:
        """The pytest node id of the test that runs ``proof``."""
        return f"{TEST_FILE}::{self.test_name}"

    @property
    def test_name(self) -> str:
        return "test_" + self.id.replace("-", "_")


# ---------------------------------------------------------------------------------------
# Building blocks


def _example(n: int, *, positive_b: bool = False, alpha: sp.Expr = sym.alpha) -> Example:
    return Example(ExplicitTokens.symbols(n, positive_b=positive_b), alpha)


def _general_example() -> Example:
    """Example ``i`` with a general number ``n_i`` of tokens ``l[i, t]``, ``b[i, t]``."""
    return indexed_example(sym.i)


def _general_token(example: Example) -> sp.Expr:
    return example.tokens.token(sym.t)  # type: ignore[attr-defined]


def _general_batch() -> IndexedBatch:
    """``B'`` examples, example ``i`` with ``n_i`` tokens: fully general sizes."""
    return IndexedBatch(example=indexed_example)  # type: ignore[arg-type]


def _batches() -> Iterable[tuple[str, ExplicitBatch]]:
    for sizes in BATCHES:
        yield f"sizes {sizes}", ExplicitBatch.of_sizes(sizes)


def _scale_b(expr: sp.Expr, tokens_b: Iterable[sp.Expr], factor: sp.Expr) -> sp.Expr:
    return expr.xreplace({b: factor * b for b in tokens_b})


def _scale_indexed_b(expr: sp.Expr, factor: sp.Expr) -> sp.Expr:
    return expr.replace(
        lambda e: isinstance(e, sp.Indexed) and e.base == sym.b_indexed,
        lambda e: factor * e,
    )


def _eq(lhs: sp.Basic, rhs: sp.Basic, condition: str = "") -> str:
    text = f"{sym.latex(lhs)} = {sym.latex(rhs)}"
    return f"{text} \\quad \\text{{{condition}}}" if condition else text


# Names for the document's equations.
_i, _t = sym.i, sym.t
_pi_it = sym.pi_indexed[_i, _t]
_n_i = sym.n_indexed[_i]
_b_it = sym.b_indexed[_i, _t]
_l_it = sym.l_indexed[_i, _t]
_bbar_i = sym.bbar_indexed[_i]
_kappa_i = sym.kappa_indexed[_i]
_R = OUTPUT_SYMBOLS


# ---------------------------------------------------------------------------------------
# alpha = 0 and alpha = 1


def prove_alpha0_uniform_shares() -> tuple[str, ...]:
    checks = []
    for n in SIZES:
        example = _example(n)
        for k, share in enumerate(example.shares, 1):
            checks.append(
                assert_equal(share.subs(sym.alpha, 0), sp.Rational(1, n), f"n={n}: pi_{k}")
            )
            # Where b = 0 too: 0^0 = 1, in either order of substitution.
            zeros = {b: 0 for b in example.tokens.b}  # type: ignore[attr-defined]
            claim = f"n={n}: pi_{k} with every b = 0"
            checks.append(
                assert_equal(share.subs(sym.alpha, 0).subs(zeros), sp.Rational(1, n), claim)
            )
            checks.append(
                assert_equal(share.subs(zeros).subs(sym.alpha, 0), sp.Rational(1, n), claim)
            )
    example = _general_example()
    share = example.share(_general_token(example)).subs(sym.alpha, 0).doit()
    checks.append(assert_equal(share, 1 / _n_i, "general n: pi_it = 1/n_i"))
    return tuple(checks)


def prove_alpha0_kappa_one() -> tuple[str, ...]:
    checks = []
    for n in SIZES:
        kappa = _example(n).kappa.subs(sym.alpha, 0)
        checks.append(assert_equal(kappa, 1, f"n={n}: kappa = 1"))
    kappa = _general_example().kappa.subs(sym.alpha, 0).doit()
    checks.append(assert_equal(kappa, 1, "general n: kappa_i = 1"))
    return tuple(checks)


def _alpha0_terms_equal(first: str, second: str) -> tuple[str, ...]:
    checks = []
    for label, batch in _batches():
        terms = loss_terms(batch)
        claim = f"{label}: {first} = {second} at alpha = 0"
        checks.append(assert_equal(terms[first].subs(sym.alpha, 0), terms[second], claim))
    terms = loss_terms(_general_batch())
    difference = (terms[first] - terms[second]).subs(sym.alpha, 0).doit()
    checks.append(assert_zero(difference, f"general n_i and B': {first} = {second}"))
    return tuple(checks)


def prove_alpha0_tok_equals_raw() -> tuple[str, ...]:
    return _alpha0_terms_equal("token_weighted_reconstruction_loss", "reconstruction_loss")


def prove_alpha0_cc_equals_dist() -> tuple[str, ...]:
    return _alpha0_terms_equal(
        "normalized_concentration_corrected_token_weighted_reconstruction_loss",
        "distribution_normalized_reconstruction_loss",
    )


def prove_alpha1_linear_shares() -> tuple[str, ...]:
    checks = []
    for n in SIZES:
        example = _example(n)
        bs = example.tokens.b  # type: ignore[attr-defined]
        for k, share in enumerate(example.shares):
            linear = bs[k] / sp.Add(*bs)
            checks.append(assert_equal(share.subs(sym.alpha, 1), linear, f"n={n}: pi_{k + 1}"))
    example = _general_example()
    token = _general_token(example)
    linear = token.b / example.tokens.total(lambda tok: tok.b, index=sym.s)
    share = example.share(token).subs(sym.alpha, 1)
    checks.append(assert_equal(share, linear, "general n: pi_it = b_it / sum_s b_is"))
    return tuple(checks)


def prove_shares_sum_to_one() -> tuple[str, ...]:
    checks = []
    for n in SIZES:
        for zero_base in (False, True):
            example = Example(ExplicitTokens.symbols(n), sym.alpha, zero_base=zero_base)
            claim = f"n={n}{' (zero-base row)' if zero_base else ''}: sum_t pi_t = 1"
            checks.append(assert_equal(sp.Add(*example.shares), 1, claim))
    example = _general_example()
    total = example.tokens.total(example.share)
    checks.append(assert_equal(total, 1, "general n: sum_t pi_it = 1"))
    return tuple(checks)


def prove_zero_to_the_zero() -> tuple[str, ...]:
    from spec.oracle import DEFAULT_PRECISION, example_function

    checks = [assert_true(sp.Integer(0) ** sp.Integer(0) == 1, "sympy: 0^0 = 1")]
    with mpmath.workdps(DEFAULT_PRECISION):
        zero = mpmath.mpf(0)
        checks.append(assert_true(bool(zero**zero == 1), "mpmath: 0^0 = 1"))
        # The oracle's lambdified shares at alpha = 0 on rows with b = 0 (some or all).
        for n in SIZES:
            for zeros in range(1, n + 1):
                ls = [mpmath.mpf(k) for k in range(1, n + 1)]
                bs = [zero] * zeros + [mpmath.mpf(k) for k in range(1, n - zeros + 1)]
                zero_base = zeros == n
                one = mpmath.mpf(1)
                params = [zero, one, one, one, one, one, one, one]  # alpha = 0, eps = c = w = 1
                out = example_function(n, zero_base, True)(*ls, *bs, *params, 1, mpmath.mpf(n))
                shares = out[5 : 5 + n]
                claim = f"oracle, n={n}, {zeros} zero b: pi = 1/n at alpha = 0"
                checks.append(assert_true(all(x == 1 / mpmath.mpf(n) for x in shares), claim))
    return tuple(checks)


def prove_zero_base_uniform_fallback() -> tuple[str, ...]:
    checks = []
    level = sp.Symbol("beta", positive=True)
    positive_alpha = sp.Symbol("alpha_pos", positive=True)
    for n in SIZES:
        example = _example(n)
        bs = example.tokens.b  # type: ignore[attr-defined]
        equal = {b: level for b in bs}
        fallback = Example(example.tokens, sym.alpha, zero_base=True)
        for k, (share, fallback_share) in enumerate(
            zip(example.shares, fallback.shares, strict=True), 1
        ):
            on_equal_row = share.xreplace(equal)
            checks.append(
                assert_equal(on_equal_row, sp.Rational(1, n), f"n={n}: pi_{k} on a row b = beta")
            )
            limit = sp.limit(on_equal_row.subs(sym.alpha, positive_alpha), level, 0, "+")
            checks.append(assert_equal(limit, sp.Rational(1, n), f"n={n}: pi_{k} as beta -> 0+"))
            checks.append(
                assert_equal(fallback_share, limit, f"n={n}: fallback pi_{k} = that limit")
            )
        checks.append(
            assert_equal(example.kappa.xreplace(equal), 1, f"n={n}: kappa = 1 on b = beta")
        )
        checks.append(assert_equal(fallback.kappa, 1, f"n={n}: fallback kappa = 1"))
        if n > 1:
            # Without the fallback the formula is 0/0 on an all-zero row for alpha > 0.
            undefined = (
                example.shares[0].subs(sym.alpha, positive_alpha).xreplace({b: 0 for b in bs})
            )
            checks.append(assert_true(undefined is sp.nan, f"n={n}: the formula is 0/0 there"))
    return tuple(checks)


# ---------------------------------------------------------------------------------------
# The z-free baseline: l = b, c = mean_i bbar_i


def _baseline_cases() -> list[tuple[str, Batch]]:
    return [*_batches(), ("general n_i and B'", _general_batch())]


def _baseline(name: str, expected: Callable[[Batch], sp.Expr]) -> tuple[str, ...]:
    """``name`` at ``l = b`` with ``c = mean_i bbar_i`` equals ``expected(batch)``."""
    checks = []
    for label, batch in _baseline_cases():
        value = loss_terms(batch)[name].subs(sym.c, baseline_scale(batch))
        value = at_baseline(value, batch)
        checks.append(assert_equal(value, expected(batch), f"{label}: {name}"))
    return tuple(checks)


def prove_baseline_dist_one() -> tuple[str, ...]:
    return _baseline("distribution_normalized_reconstruction_loss", lambda batch: sp.Integer(1))


def prove_baseline_cc_one() -> tuple[str, ...]:
    return _baseline(
        "normalized_concentration_corrected_token_weighted_reconstruction_loss",
        lambda batch: sp.Integer(1),
    )


def prove_baseline_ex() -> tuple[str, ...]:
    return _baseline(
        "example_inverse_surprisal_weighted_reconstruction_loss",
        lambda batch: batch.mean(lambda e: e.bbar / (e.bbar + sym.epsilon)),  # type: ignore[attr-defined]
    )


def prove_baseline_ex_one_at_eps0() -> tuple[str, ...]:
    checks = []
    name = "example_inverse_surprisal_weighted_reconstruction_loss"
    for label, batch in _baseline_cases():
        # bbar_i / bbar_i = 1: epsilon = 0 is allowed only where every bbar_i > 0.
        value = at_baseline(loss_terms(batch)[name], batch).subs(sym.epsilon, 0)
        claim = f"{label}: R_ex = 1 at epsilon = 0 (every bbar_i > 0)"
        checks.append(assert_equal(value, 1, claim))
    return tuple(checks)


def prove_baseline_tok_equals_base() -> tuple[str, ...]:
    return _baseline(
        "token_weighted_reconstruction_loss",
        lambda batch: loss_terms(batch)["token_weighted_base_loss"],  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------------------------------
# Gradient


def _on_valid_positions(expr: sp.Expr) -> sp.Expr:
    """Drop the ``Piecewise`` guards ``j <= n_k`` and ``k <= B'`` that ``Sum.doit`` adds.

    Differentiating a ``Sum`` over ``t = 1 .. n_k`` in ``l[k, j]`` gives
    ``Piecewise((f, j <= n_k), (0, True))``; the derivative is taken at a valid position
    of a kept example, where the guard holds, so ``f`` is the derivative.
    """
    return expr.replace(
        lambda e: isinstance(e, sp.Piecewise) and len(e.args) == 2 and e.args[1] == (0, True),
        lambda e: e.args[0][0],
    )


def prove_gradient_closed_form() -> tuple[str, ...]:
    checks = []
    cases = [(sizes, None) for sizes in BATCHES] + [((2, 3), (True, False))]
    for sizes, zero_base in cases:
        batch = ExplicitBatch.of_sizes(sizes, zero_base=zero_base)
        total = loss_terms(batch)[TOTAL_NAME]
        for k, example in enumerate(batch.examples, 1):
            for token in example.tokens.tokens:  # type: ignore[attr-defined]
                closed = token_gradient(example, token, batch.count)  # type: ignore[arg-type]
                claim = f"sizes {sizes} zero-base {zero_base}: dJ/dl_{k},{token.t}"
                checks.append(assert_equal(sp.diff(total, token.l), closed, claim))
    # General n_i and B': differentiate in l[k, j] for a valid position j of kept example k.
    k, j = sp.symbols("k j", integer=True, positive=True)
    total = loss_terms(_general_batch())[TOTAL_NAME]
    derivative = _on_valid_positions(sp.diff(total, sym.l_indexed[k, j]).doit())
    derivative = _on_valid_positions(derivative.doit())
    example = indexed_example(k)
    closed = token_gradient(example, example.tokens.token(j), sym.kept_count)  # type: ignore[attr-defined]
    checks.append(assert_equal(derivative, closed, "general n_i and B': dJ/dl_kj"))
    return tuple(checks)


# ---------------------------------------------------------------------------------------
# Scale of b


def prove_scale_invariance_shares() -> tuple[str, ...]:
    checks = []
    factor = sp.Symbol("s_scale", positive=True)
    for n in SIZES:
        example = _example(n)
        for k, share in enumerate(example.shares, 1):
            scaled = _scale_b(share, example.tokens.b, factor)  # type: ignore[attr-defined]
            checks.append(assert_equal(scaled, share, f"n={n}: pi_{k}(s b) = pi_{k}(b)"))
    example = _general_example()
    share = example.share(_general_token(example))
    checks.append(assert_equal(_scale_indexed_b(share, factor), share, "general n: pi_it"))
    return tuple(checks)


def prove_scale_invariance_kappa() -> tuple[str, ...]:
    checks = []
    factor = sp.Symbol("s_scale", positive=True)
    for n in SIZES:
        example = _example(n, positive_b=True)
        scaled = _scale_b(example.kappa, example.tokens.b, factor)  # type: ignore[attr-defined]
        checks.append(assert_equal(scaled, example.kappa, f"n={n}: kappa(s b) = kappa(b)"))
    kappa = _general_example().kappa
    checks.append(assert_equal(_scale_indexed_b(kappa, factor), kappa, "general n: kappa_i"))
    return tuple(checks)


# ---------------------------------------------------------------------------------------
# kappa >= 1, monotone in alpha, and alpha -> infinity


def _pair_sum(bs: tuple[sp.Expr, ...], alpha: sp.Expr) -> sp.Expr:
    """``sum_{s<t} (b_s^alpha - b_t^alpha)(b_s - b_t)``: each term >= 0 (x^alpha increases)."""
    return sp.Add(
        *(
            (bs[p] ** alpha - bs[q] ** alpha) * (bs[p] - bs[q])
            for p, q in itertools.combinations(range(len(bs)), 2)
        )
    )


def prove_kappa_at_least_one() -> tuple[str, ...]:
    checks = []
    a = sym.alpha
    # x -> x^alpha does not decrease on x > 0 for alpha >= 0, so b_s^alpha - b_t^alpha has
    # the sign of b_s - b_t, and every pair term below is >= 0.
    x = sp.Symbol("x", positive=True)
    checks.append(assert_true(sp.diff(x**a, x).is_nonnegative, "d/dx x^alpha >= 0 on x > 0"))
    for n in SIZES:
        example = _example(n, positive_b=True)
        bs = example.tokens.b  # type: ignore[attr-defined]
        normalizer = sp.Add(*(b**a for b in bs)) * sp.Add(*bs)
        # kappa - 1 = [n sum b^(alpha+1) - sum b^alpha sum b] / (sum b^alpha sum b)
        #           = sum_{s<t} (b_s^alpha - b_t^alpha)(b_s - b_t) / (sum b^alpha sum b).
        claim = f"n={n}: kappa - 1 = (sum of pair terms) / (positive)"
        checks.append(assert_equal(example.kappa - 1, _pair_sum(bs, a) / normalizer, claim))
        if n in (2, 3):
            # For integer alpha each pair term factors into (b_s - b_t)^2 times a positive
            # polynomial: manifestly >= 0.
            for power in (1, 2, 3):
                for p, q in itertools.combinations(range(n), 2):
                    term = sp.factor((bs[p] ** power - bs[q] ** power) * (bs[p] - bs[q]))
                    claim = f"n={n}, alpha={power}: pair ({p + 1},{q + 1}) term >= 0"
                    checks.append(assert_true(term.is_nonnegative, claim))
    # General n: the same sum-of-pairs identity, with double sums.
    n = sym.n
    b, s, t = sym.b_indexed, sym.s, sym.t
    example = Example(IndexedTokens(sym.l_indexed, sp.IndexedBase("b", positive=True), n))
    pb = example.tokens.b
    power_sum = sp.Sum(pb[t] ** a, (t, 1, n))
    plain_sum = sp.Sum(pb[t], (t, 1, n))
    pairs = sp.Rational(1, 2) * sp.Sum(
        (pb[s] ** a - pb[t] ** a) * (pb[s] - pb[t]), (t, 1, n), (s, 1, n)
    )
    claim = "general n: kappa - 1 = (1/2) sum_s sum_t (b_s^a - b_t^a)(b_s - b_t) / (sum b^a sum b)"
    checks.append(assert_equal(example.kappa - 1, pairs / (power_sum * plain_sum), claim))
    del b
    return tuple(checks)


def _psi(example: Example, alpha: sp.Expr) -> sp.Expr:
    """``psi(alpha) = sum_t pi_t(alpha) log b_t``: the share-weighted mean of ``log b``."""
    tokens = example.tokens
    shifted = Example(tokens, alpha)
    return tokens.total(lambda tok: shifted.share(tok) * sp.log(tok.b))


def prove_kappa_non_decreasing_in_alpha() -> tuple[str, ...]:
    checks = []
    a = sym.alpha
    for n in SIZES:
        example = _example(n, positive_b=True)
        psi = _psi(example, a)
        # d log kappa / d alpha = psi(alpha + 1) - psi(alpha)
        claim = f"n={n}: d log kappa/d alpha = psi(alpha+1) - psi(alpha)"
        checks.append(
            assert_equal(sp.diff(sp.log(example.kappa), a), _psi(example, a + 1) - psi, claim)
        )
        # d psi / d alpha = sum_t pi_t (log b_t - psi)^2, a pi-weighted variance of log b
        variance = sp.Add(
            *(
                share * (sp.log(b) - psi) ** 2
                for share, b in zip(example.shares, example.tokens.b, strict=True)
            )  # type: ignore[attr-defined]
        )
        claim = f"n={n}: d psi/d alpha = sum_t pi_t (log b_t - psi)^2"
        checks.append(assert_equal(sp.diff(psi, a), variance, claim))
        claim = f"n={n}: that variance is >= 0 (a sum of non-negative terms)"
        checks.append(assert_true(variance.is_nonnegative, claim))
    # Some b = 0, alpha > 0: those tokens drop out, kappa = (n / n_+) kappa_+ with kappa_+
    # the kappa of the positive tokens, and kappa(0) = 1 <= n / n_+ <= kappa(alpha > 0).
    positive_alpha = sp.Symbol("alpha_pos", positive=True)
    for n in (2, 3, 4):
        for zeros in range(1, n):
            example = _example(n, positive_b=True, alpha=positive_alpha)
            bs = example.tokens.b  # type: ignore[attr-defined]
            rest = Example(ExplicitTokens(example.tokens.l[zeros:], bs[zeros:]), positive_alpha)  # type: ignore[attr-defined]
            with_zeros = example.kappa.xreplace({b: 0 for b in bs[:zeros]})
            claim = f"n={n}, {zeros} zero b: kappa = (n/n_+) kappa_+ for alpha > 0"
            checks.append(assert_equal(with_zeros, sp.Rational(n, n - zeros) * rest.kappa, claim))
    # General n.
    n = sym.n
    example = Example(IndexedTokens(sym.l_indexed, sp.IndexedBase("b", positive=True), n))
    psi = _psi(example, a)
    claim = "general n: d log kappa/d alpha = psi(alpha+1) - psi(alpha)"
    checks.append(
        assert_equal(sp.diff(sp.log(example.kappa), a), _psi(example, a + 1) - psi, claim)
    )
    variance = example.tokens.total(lambda tok: example.share(tok) * (sp.log(tok.b) - psi) ** 2)
    claim = "general n: d psi/d alpha = sum_t pi_t (log b_t - psi)^2"
    checks.append(assert_equal(sp.diff(psi, a), variance, claim))
    return tuple(checks)


def prove_alpha_infinity_concentrates() -> tuple[str, ...]:
    checks = []
    a = sym.alpha
    for n in (2, 3, 4):
        for ties in range(1, n + 1):
            # b_1 .. b_ties are the largest, the others b_k = e^{-u_k} with u_k > 0. The
            # largest is 1: shares do not change with the scale of b (identity
            # scale-invariance-shares), and sympy's limit copes better without it.
            # The gaps grow, u_k = d_1 + .. + d_k with d > 0, so sympy knows their order.
            steps = [sp.Symbol(f"d_{k}", positive=True) for k in range(ties + 1, n + 1)]
            gaps = list(itertools.accumulate(steps))
            bs = (sp.Integer(1),) * ties + tuple(sp.exp(-u) for u in gaps)
            example = Example(ExplicitTokens(ExplicitTokens.symbols(n).l, bs), a)
            for k, share in enumerate(example.shares, 1):
                expected = sp.Rational(1, ties) if k <= ties else sp.Integer(0)
                claim = f"n={n}, {ties} largest: lim pi_{k} = {expected}"
                checks.append(assert_equal(sp.limit(share, a, sp.oo), expected, claim))
            claim = f"n={n}, {ties} largest: lim kappa = max b / bbar"
            checks.append(assert_equal(sp.limit(example.kappa, a, sp.oo), 1 / example.bbar, claim))
    return tuple(checks)


# ---------------------------------------------------------------------------------------
# Linearity


def prove_linearity_in_l() -> tuple[str, ...]:
    checks = []
    p, q = sp.symbols("p q", real=True)
    for label, batch in _batches():
        terms = loss_terms(batch)
        ls = [x for e in batch.examples for x in e.tokens.l]  # type: ignore[attr-defined]
        other = [sp.Symbol(f"m_{k}", real=True) for k in range(len(ls))]
        for name in L_DEPENDENT:
            term = terms[name]
            mixed = term.xreplace({x: p * x + q * y for x, y in zip(ls, other, strict=True)})
            moved = term.xreplace(dict(zip(ls, other, strict=True)))
            claim = f"{label}: {name}(p l + q m) = p {name}(l) + q {name}(m)"
            checks.append(assert_equal(mixed, p * term + q * moved, claim))
    # General n_i and B': l[i, t] -> p l[i, t] + q m[i, t].
    m = sp.IndexedBase("m", real=True)
    terms = loss_terms(_general_batch())
    for name in L_DEPENDENT:
        term = terms[name]
        is_l = lambda e: isinstance(e, sp.Indexed) and e.base == sym.l_indexed  # noqa: E731
        mixed = term.replace(is_l, lambda e: p * e + q * m[e.indices])
        moved = term.replace(is_l, lambda e: m[e.indices])
        checks.append(assert_equal(mixed, p * term + q * moved, f"general: {name} is linear in l"))
    return tuple(checks)


def prove_linearity_in_weights() -> tuple[str, ...]:
    checks = []
    p, q = sp.symbols("p q", real=True)
    other = {
        w: sp.Symbol(f"{w.name}_other", nonnegative=True)
        for w in (sym.w_raw, sym.w_dist, sym.w_ex, sym.w_tok, sym.w_cc)
    }
    for label, batch in [*_batches(), ("general n_i and B'", _general_batch())]:
        terms = loss_terms(batch)  # type: ignore[arg-type]
        total = terms[TOTAL_NAME]
        mixed = total.xreplace({w: p * w + q * v for w, v in other.items()})
        claim = f"{label}: J(p w + q v) = p J(w) + q J(v)"
        checks.append(assert_equal(mixed, p * total + q * total.xreplace(other), claim))
        for name, weight in SYMBOLIC.weights().items():
            checks.append(
                assert_equal(sp.diff(total, weight), terms[name], f"{label}: dJ/dw = {name}")
            )
    return tuple(checks)


# ---------------------------------------------------------------------------------------
# Invariances


def prove_invariance_token_permutation() -> tuple[str, ...]:
    checks = []
    for n in (2, 3, 4):
        first = Example(ExplicitTokens.symbols(2, prefix="1_"))
        example = Example(ExplicitTokens.symbols(n, prefix="2_"))
        tokens = example.tokens
        terms = loss_terms(ExplicitBatch((first, example)))
        grads = [token_gradient(example, tok, 2) for tok in tokens.tokens]  # type: ignore[attr-defined]
        for order in itertools.permutations(range(n)):
            if list(order) == sorted(order):
                continue
            moved = Example(
                ExplicitTokens(tuple(tokens.l[k] for k in order), tuple(tokens.b[k] for k in order))
            )  # type: ignore[attr-defined]
            moved_terms = loss_terms(ExplicitBatch((first, moved)))
            for name in LOSS_NAMES:
                checks.append(
                    assert_equal(moved_terms[name], terms[name], f"n={n} order {order}: {name}")
                )
            for position, k in enumerate(order):
                moved_grad = token_gradient(moved, moved.tokens.tokens[position], 2)  # type: ignore[attr-defined]
                checks.append(
                    assert_equal(
                        moved_grad, grads[k], f"n={n} order {order}: dJ/dl of token {k + 1}"
                    )
                )
    return tuple(checks)


def prove_invariance_example_permutation() -> tuple[str, ...]:
    checks = []
    batch = ExplicitBatch.of_sizes((1, 2, 3))
    terms = loss_terms(batch)
    for order in itertools.permutations(range(3)):
        moved = loss_terms(ExplicitBatch(tuple(batch.examples[k] for k in order)))
        for name in LOSS_NAMES:
            checks.append(assert_equal(moved[name], terms[name], f"order {order}: {name}"))
    return tuple(checks)


def prove_invariance_padding() -> tuple[str, ...]:
    import numpy as np

    from spec.oracle import evaluate_details

    checks = []
    generator = random.Random(20240531)
    garbage = (float("nan"), float("inf"), -float("inf"), -1.0e300, 7.0)
    for case in range(12):
        rows, width = generator.randint(1, 4), generator.randint(1, 5)
        ls = [[generator.uniform(0, 6) for _ in range(width)] for _ in range(rows)]
        bs = [[generator.uniform(0, 6) for _ in range(width)] for _ in range(rows)]
        mask = [[generator.random() < 0.7 for _ in range(width)] for _ in range(rows)]
        mask[0][0] = True
        config = {
            "raw_weight": 1.0, "distribution_normalized_weight": 0.5,
            "example_inverse_surprisal_weight": 0.25, "token_weighted_weight": 0.75,
            "normalized_concentration_corrected_token_weighted_weight": 1.5,
            "token_weight_alpha": generator.choice((0.0, 0.5, 1.0, 2.0, 7.3)),
            "example_inverse_surprisal_epsilon": 0.1, "zfree_reference_scale": 1.3,
        }  # fmt: skip
        plain = evaluate_details(ls, bs, mask, config)
        # Padded columns inserted at random places, and fully padded rows, all full of garbage.
        columns = sorted(generator.sample(range(width + 3), width))
        rows_at = sorted(generator.sample(range(rows + 2), rows))
        big_l = [[generator.choice(garbage) for _ in range(width + 3)] for _ in range(rows + 2)]
        big_b = [[generator.choice(garbage) for _ in range(width + 3)] for _ in range(rows + 2)]
        big_mask = [[False] * (width + 3) for _ in range(rows + 2)]
        for r, rr in enumerate(rows_at):
            for col, cc in enumerate(columns):
                big_l[rr][cc], big_b[rr][cc], big_mask[rr][cc] = (
                    ls[r][col],
                    bs[r][col],
                    mask[r][col],
                )
        padded = evaluate_details(big_l, big_b, big_mask, config)
        claim = f"case {case}: the eight outputs are unchanged"
        checks.append(assert_true(padded.values == plain.values, claim))
        same_tokens = all(
            padded.token_gradient[rr][cc] == plain.token_gradient[r][col]
            and padded.shares[rr][cc] == plain.shares[r][col]
            for r, rr in enumerate(rows_at)
            for col, cc in enumerate(columns)
        )
        checks.append(assert_true(same_tokens, f"case {case}: gradient and shares unchanged"))
        padding = ~np.asarray(big_mask)
        zero_there = bool(np.all(padded.token_gradient[padding] == 0))
        zero_there = zero_there and bool(np.all(padded.shares[padding] == 0))
        checks.append(assert_true(zero_there, f"case {case}: gradient and shares 0 at padding"))
    return tuple(checks)


# ---------------------------------------------------------------------------------------
# Batch structure


def prove_batch_mean_form() -> tuple[str, ...]:
    checks = []
    general = IndexedBatch()  # examples through their per-example quantities
    cases = [("general B'", general), ("sizes (1, 2, 3)", ExplicitBatch.of_sizes((1, 2, 3)))]
    for label, batch in cases:
        terms = loss_terms(batch)  # type: ignore[arg-type]
        for name in LOSS_NAMES:
            mean = batch.mean(lambda e, name=name: per_example_contributions(e)[name])  # type: ignore[misc]
            checks.append(assert_equal(terms[name], mean, f"{label}: {name} = mean_i x_i"))
    return tuple(checks)


def prove_batch_decomposition() -> tuple[str, ...]:
    checks = []
    first, second = (1, 2), (3, 1)
    union = ExplicitBatch.of_sizes(first + second)
    part_1 = ExplicitBatch(union.examples[: len(first)])
    part_2 = ExplicitBatch(union.examples[len(first) :])
    terms, terms_1, terms_2 = loss_terms(union), loss_terms(part_1), loss_terms(part_2)
    k1, k2 = len(first), len(second)
    for name in LOSS_NAMES:
        combined = (k1 * terms_1[name] + k2 * terms_2[name]) / (k1 + k2)
        checks.append(assert_equal(terms[name], combined, f"sizes {first} + {second}: {name}"))
    # General B'_1 and B'_2, for a per-example contribution x_i (batch-mean-form: every
    # output is mean_i x_i).
    count_1, count_2 = sp.symbols("B_1 B_2", integer=True, positive=True)
    x, i = sp.IndexedBase("x", real=True), sym.i
    union_mean = sp.Sum(x[i], (i, 1, count_1 + count_2)) / (count_1 + count_2)
    mean_1 = sp.Sum(x[i], (i, 1, count_1)) / count_1
    mean_2 = sp.Sum(x[i + count_1], (i, 1, count_2)) / count_2
    combined = (count_1 * mean_1 + count_2 * mean_2) / (count_1 + count_2)
    difference = sp.simplify(
        union_mean
        - combined.subs(
            sp.Sum(x[i + count_1], (i, 1, count_2)),
            sp.Sum(x[i], (i, count_1 + 1, count_1 + count_2)),
        )
    )
    checks.append(assert_zero(difference, "general B'_1, B'_2: mean of the union"))
    return tuple(checks)


# ---------------------------------------------------------------------------------------
# The generic family of seed 000


def _family_batches() -> Iterable[tuple[str, ExplicitBatch]]:
    yield from _batches()
    yield (
        "sizes (2, 3) with a zero-base row",
        ExplicitBatch.of_sizes((2, 3), zero_base=(True, False)),
    )


def prove_family_instances() -> tuple[str, ...]:
    checks = []
    for label, batch in _family_batches():
        terms = loss_terms(batch)
        for instance in FAMILY_INSTANCES:
            claim = f"{label}: {instance.term} = L[{instance.policy_name}, ...]"
            checks.append(assert_equal(terms[instance.term], instance.member(batch), claim))
    return tuple(checks)


def prove_policy_matched_scale_baseline_one() -> tuple[str, ...]:
    checks = []
    for label, batch in _family_batches():
        for instance in FAMILY_INSTANCES:
            scale = instance.matched_scale(batch)
            member = family_member(
                batch, instance.policy, lambda e, i=instance: i.omega(e, SYMBOLIC), scale
            )
            checks.append(assert_equal(at_baseline(member, batch), 1, f"{label}: {instance.term}"))
    generic = generic_member().subs(sym.scale_C, generic_matched_scale())
    generic = at_baseline(generic, _general_batch())
    checks.append(assert_equal(generic, 1, "general pi, omega, n_i and B'"))
    return tuple(checks)


def prove_policy_matched_scale_of_cc() -> tuple[str, ...]:
    checks = []
    by_term = {instance.term: instance for instance in FAMILY_INSTANCES}
    cc = by_term["normalized_concentration_corrected_token_weighted_reconstruction_loss"]
    dist = by_term["distribution_normalized_reconstruction_loss"]
    for label, batch in _family_batches():
        claim = f"{label}: C of R_cc's (pi, omega) = C of R_dist's"
        checks.append(assert_equal(cc.matched_scale(batch), dist.matched_scale(batch), claim))
        claim = f"{label}: C of R_dist's (pi, omega) = mean_i bbar_i"
        checks.append(assert_equal(dist.matched_scale(batch), baseline_scale(batch), claim))
    return tuple(checks)


# ---------------------------------------------------------------------------------------
# LaTeX of the identities, rendered from the definitions


@dataclass(frozen=True)
class _NamedExample:
    """Example ``i`` seen through named symbols: ``n_i, bbar_i, kappa_i, pi_it``."""

    count: sp.Expr = _n_i
    bbar: sp.Expr = _bbar_i
    kappa: sp.Expr = _kappa_i

    def share(self, token: object) -> sp.Expr:
        return _pi_it


def _general_share() -> sp.Expr:
    example = _general_example()
    return example.share(_general_token(example))


def _baseline_condition() -> str:
    c_value = sym.latex(sp.Eq(sym.c, IndexedBatch().mean(lambda e: e.bbar)))
    return rf"\quad \text{{at }} l_{{i,t}} = b_{{i,t}},\ {c_value}"


def _latex_alpha0_uniform() -> str:
    lhs = sp.Subs(_general_share(), sym.alpha, 0)
    return _eq(lhs, 1 / _n_i) + r" \quad \text{for every } b \ge 0"


def _latex_alpha1() -> str:
    example = _general_example()
    linear = _b_it / example.tokens.total(lambda tok: tok.b, index=sym.s)
    return _eq(sp.Subs(_general_share(), sym.alpha, 1), linear)


def _latex_zero_base() -> str:
    condition = r"\quad \text{when } b_{i,s} = 0 \text{ for every } s"
    return rf"{sym.latex(_pi_it)} = {sym.latex(1 / _n_i)},\ {sym.latex(_kappa_i)} = 1{condition}"


def _latex_baseline_ex() -> str:
    mean = IndexedBatch().mean(lambda e: e.bbar / (e.bbar + sym.epsilon))
    return (
        _eq(_R["example_inverse_surprisal_weighted_reconstruction_loss"], mean)
        + _baseline_condition()
    )


def _latex_gradient() -> str:
    closed = token_gradient(_NamedExample(), None, sym.kept_count)  # type: ignore[arg-type]
    return _eq(sp.Derivative(sym.J, _l_it), closed)


def _latex_scale_shares() -> str:
    factor = sp.Symbol("lambda", positive=True)
    share = _general_share()
    return _eq(_scale_indexed_b(share, factor), share) + r" \quad \text{for } \lambda > 0"


def _latex_kappa_at_least_one() -> str:
    a, s, t = sym.alpha, sym.s, sym.t
    b, n = sym.b_indexed, _n_i
    pairs = sp.Sum((b[_i, s] ** a - b[_i, t] ** a) * (b[_i, s] - b[_i, t]), (t, 1, n), (s, 1, n))
    denominator = 2 * sp.Sum(b[_i, t] ** a, (t, 1, n)) * sp.Sum(b[_i, t], (t, 1, n))
    return f"{sym.latex(_kappa_i - 1)} = {sym.latex(pairs / denominator)} \\ge 0"


def _latex_kappa_monotone() -> str:
    psi = sp.Function("psi")
    a = sym.alpha
    lhs = sp.Derivative(sp.log(_kappa_i), a)
    variance = sp.Sum(_pi_it * (sp.log(_b_it) - psi(a)) ** 2, (_t, 1, _n_i))
    return (
        f"{sym.latex(lhs)} = {sym.latex(psi(a + 1) - psi(a))} \\ge 0, \\quad "
        f"{sym.latex(sp.Derivative(psi(a), a))} = {sym.latex(variance)} \\ge 0"
    )


def _latex_alpha_infinity() -> str:
    limit = sp.Limit(_pi_it, sym.alpha, sp.oo)
    k = sp.Symbol("k", integer=True, positive=True)
    return (
        rf"{sym.latex(limit)} = \begin{{cases}} {sym.latex(1 / k)} & b_{{i,t}} = \max_s b_{{i,s}}"
        r" \\ 0 & \text{otherwise} \end{cases} \quad (k \text{ tokens share the maximum})"
    )


def _latex_linearity_in_l() -> str:
    return (
        r"R(p\,l + q\,m) = p\,R(l) + q\,R(m) \quad \text{for } R \in \{"
        + ", ".join(sym.latex(_R[name]) for name in L_DEPENDENT)
        + r"\}"
    )


def _latex_linearity_in_weights() -> str:
    weighted = [f"{sym.latex(w)} {sym.latex(_R[name])}" for name, w in SYMBOLIC.weights().items()]
    rendered = " + ".join(weighted)
    return rf"J = {rendered}, \quad \frac{{\partial J}}{{\partial w_k}} = R_k"


def _latex_batch_mean_form() -> str:
    parts = per_example_contributions(ExampleSummary.indexed(_i))
    return ", \\quad ".join(
        f"{sym.latex(_R[name])} = \\operatorname{{mean}}_i {sym.latex(parts[name])}"
        for name in TERM_NAMES
    )


def _latex_batch_decomposition() -> str:
    x1, x2 = sp.symbols("x_1 x_2")
    k1, k2 = sp.Symbol("B'_1"), sp.Symbol("B'_2")
    return _eq(sp.Symbol("x_{1 \\cup 2}"), (k1 * x1 + k2 * x2) / (k1 + k2)) + (
        r" \quad \text{for every output } x"
    )


def _latex_family_instances() -> str:
    rows = []
    for instance in FAMILY_INSTANCES:
        policy = r"\frac{1}{n_i}" if instance.policy_name == "uniform" else r"\pi_{i,t}"
        arguments = f"{policy}, {instance.omega_latex}, {instance.scale_latex}"
        rows.append(f"{sym.latex(_R[instance.term])} = L\\left[{arguments}\\right]")
    member = sym.latex(generic_member())
    return rf"L[\pi, \omega, C] = {member}; \quad " + ", \\quad ".join(rows)


def _latex_policy_matched() -> str:
    matched = generic_matched_scale()
    value = r"L[\pi, \omega, C_{\pi,\omega}] = 1 \quad \text{at } l = b"
    return rf"C_{{\pi,\omega}} = {sym.latex(matched)}, \quad {value}"


def _latex_policy_matched_cc() -> str:
    mean_bbar = sym.latex(IndexedBatch().mean(lambda e: e.bbar))
    return rf"C_{{\pi, 1/\kappa}} = C_{{1/n, 1}} = {mean_bbar}"


def _identity(
    id: str, statement: str, latex: str, proof: Callable[[], tuple[str, ...]], method: str
) -> Identity:
    return Identity(id=id, statement=statement, latex=latex, proof=proof, method=method)


_SYMBOLIC_14 = "sympy: difference simplifies to 0 for n = 1..4 and for general n (Sum)"
_BATCHES = (
    "sympy: difference simplifies to 0 on batches of 1..4-token examples and for general "
    "n_i, B' (Sum)"
)


def _catalogue() -> tuple[Identity, ...]:
    r = _R
    return (
        _identity(
            "alpha0-uniform-shares",
            "At alpha = 0 every share is 1/n_i, also where b = 0 (0^0 = 1).",
            _latex_alpha0_uniform(),
            prove_alpha0_uniform_shares,
            _SYMBOLIC_14 + "; also with every b = 0",
        ),
        _identity(
            "alpha0-kappa-one",
            "At alpha = 0 the concentration factor kappa_i is 1.",
            _eq(_kappa_i, 1) + r" \quad \text{at } \alpha = 0",
            prove_alpha0_kappa_one,
            _SYMBOLIC_14,
        ),
        _identity(
            "alpha0-tok-equals-raw",
            "At alpha = 0 the token-weighted loss R_tok equals R_raw.",
            _eq(r["token_weighted_reconstruction_loss"], r["reconstruction_loss"])
            + r" \quad \text{at } \alpha = 0",
            prove_alpha0_tok_equals_raw,
            _BATCHES,
        ),
        _identity(
            "alpha0-cc-equals-dist",
            "At alpha = 0 the concentration-corrected loss R_cc equals R_dist.",
            _eq(
                r["normalized_concentration_corrected_token_weighted_reconstruction_loss"],
                r["distribution_normalized_reconstruction_loss"],
            )
            + r" \quad \text{at } \alpha = 0",
            prove_alpha0_cc_equals_dist,
            _BATCHES,
        ),
        _identity(
            "alpha1-linear-shares",
            "At alpha = 1 the shares are the linear surprisal shares b_it / sum_s b_is.",
            _latex_alpha1(),
            prove_alpha1_linear_shares,
            _SYMBOLIC_14,
        ),
        _identity(
            "shares-sum-to-one",
            "The shares of every kept example sum to 1 (the zero-base fallback included).",
            _eq(sp.Sum(_pi_it, (_t, 1, _n_i)), 1),
            prove_shares_sum_to_one,
            _SYMBOLIC_14,
        ),
        _identity(
            "zero-to-the-zero",
            "0^0 = 1 in sympy, in mpmath and in the oracle's shares at alpha = 0 with b = 0.",
            _eq(sp.Pow(0, 0, evaluate=False), 1),
            prove_zero_to_the_zero,
            "sympy and mpmath evaluate 0^0; the oracle's lambdified shares at alpha = 0, n = 1..4",
        ),
        _identity(
            "zero-base-uniform-fallback",
            "A kept example whose valid b are all 0 gets uniform shares and kappa = 1: the "
            "limit of a row of equal b, where the formula itself is 0/0 for alpha > 0.",
            _latex_zero_base(),
            prove_zero_base_uniform_fallback,
            "sympy: shares on a row b = beta are 1/n for every alpha, and their limit as "
            "beta -> 0+ is the fallback; n = 1..4",
        ),
        _identity(
            "baseline-dist-one",
            "At the z-free baseline (l = b, c = mean_i bbar_i), R_dist = 1.",
            _eq(r["distribution_normalized_reconstruction_loss"], 1) + _baseline_condition(),
            prove_baseline_dist_one,
            _BATCHES,
        ),
        _identity(
            "baseline-cc-one",
            "At the z-free baseline (l = b, c = mean_i bbar_i), R_cc = 1.",
            _eq(r["normalized_concentration_corrected_token_weighted_reconstruction_loss"], 1)
            + _baseline_condition(),
            prove_baseline_cc_one,
            _BATCHES,
        ),
        _identity(
            "baseline-ex",
            "At the z-free baseline, R_ex = mean_i bbar_i / (bbar_i + epsilon).",
            _latex_baseline_ex(),
            prove_baseline_ex,
            _BATCHES,
        ),
        _identity(
            "baseline-ex-one-at-eps0",
            "At the z-free baseline with epsilon = 0 (every bbar_i > 0), R_ex = 1 exactly.",
            _eq(r["example_inverse_surprisal_weighted_reconstruction_loss"], 1)
            + r" \quad \text{at } l = b,\ \varepsilon = 0",
            prove_baseline_ex_one_at_eps0,
            _BATCHES,
        ),
        _identity(
            "baseline-tok-equals-base",
            "At the z-free baseline, R_tok equals token_weighted_base_loss.",
            _eq(r["token_weighted_reconstruction_loss"], r["token_weighted_base_loss"])
            + r" \quad \text{at } l = b",
            prove_baseline_tok_equals_base,
            _BATCHES,
        ),
        _identity(
            "gradient-closed-form",
            "dJ/dl_it has the closed form of MATH.md, 'Gradients' (pi, kappa, bbar from b only).",
            _latex_gradient(),
            prove_gradient_closed_form,
            "sympy: diff(J, l_it) minus the closed form simplifies to 0 on batches of 1..4-token "
            "examples (a zero-base row included) and for general n_i, B'",
        ),
        _identity(
            "scale-invariance-shares",
            "Multiplying every b by a factor lambda > 0 leaves the shares unchanged.",
            _latex_scale_shares(),
            prove_scale_invariance_shares,
            _SYMBOLIC_14,
        ),
        _identity(
            "scale-invariance-kappa",
            "Multiplying every b by a factor lambda > 0 leaves kappa unchanged.",
            r"\kappa_i(\lambda\,b) = \kappa_i(b) \quad \text{for } \lambda > 0",
            prove_scale_invariance_kappa,
            _SYMBOLIC_14,
        ),
        _identity(
            "kappa-at-least-one",
            "kappa_i >= 1 for every alpha >= 0 (Chebyshev's sum inequality).",
            _latex_kappa_at_least_one(),
            prove_kappa_at_least_one,
            "sympy: kappa - 1 equals the sum of pair terms (b_s^a - b_t^a)(b_s - b_t) over a "
            "positive denominator for n = 1..4 and general n; each pair term >= 0 as x^a "
            "increases (and manifestly so, factored, for n = 2, 3 and a = 1, 2, 3)",
        ),
        _identity(
            "kappa-non-decreasing-in-alpha",
            "kappa_i never decreases as alpha grows.",
            _latex_kappa_monotone(),
            prove_kappa_non_decreasing_in_alpha,
            "sympy: d log kappa/d alpha = psi(alpha+1) - psi(alpha) with psi' a pi-weighted "
            "variance of log b (>= 0), n = 1..4 and general n; rows with some b = 0 reduce to "
            "their positive tokens",
        ),
        _identity(
            "alpha-infinity-concentrates",
            "As alpha -> infinity the shares concentrate on the largest surprisal(s), and "
            "kappa_i -> max_t b_it / bbar_i.",
            _latex_alpha_infinity(),
            prove_alpha_infinity_concentrates,
            "sympy: limit of every share and of kappa, n = 2..4, with 1..n tokens at the maximum",
        ),
        _identity(
            "linearity-in-l",
            "Every term and J is linear in l for fixed b.",
            _latex_linearity_in_l(),
            prove_linearity_in_l,
            _BATCHES,
        ),
        _identity(
            "linearity-in-weights",
            "J is linear in the five weights, with dJ/dw_k = R_k.",
            _latex_linearity_in_weights(),
            prove_linearity_in_weights,
            _BATCHES,
        ),
        _identity(
            "invariance-token-permutation",
            "Permuting the valid tokens of an example (l and b together) changes no output, "
            "and each token keeps its gradient.",
            r"\sigma \in S_{n_i}:\ (l_{i,\sigma(t)}, b_{i,\sigma(t)})_t"
            r" \text{ gives the same outputs}",
            prove_invariance_token_permutation,
            "sympy: every permutation for n = 2..4, beside a second example",
        ),
        _identity(
            "invariance-example-permutation",
            "Permuting the examples of a batch changes no output.",
            r"\sigma \in S_{B'}:\ (\text{example } \sigma(i))_i \text{ gives the same outputs}",
            prove_invariance_example_permutation,
            "sympy: every permutation of a batch of 1-, 2- and 3-token examples",
        ),
        _identity(
            "invariance-padding",
            "Adding padded positions or fully padded examples (whatever they hold, NaN and inf "
            "included) changes no output, no share and no gradient.",
            r"m_{i,t} = 0 \Rightarrow (l_{i,t}, b_{i,t}) \text{ is never read}",
            prove_invariance_padding,
            "oracle: random batches against copies with garbage-filled padded columns and rows",
        ),
        _identity(
            "batch-mean-form",
            "Every output is the mean over kept examples of a per-example contribution x_i.",
            _latex_batch_mean_form(),
            prove_batch_mean_form,
            "sympy: for general B' and for a batch of 1-, 2- and 3-token examples",
        ),
        _identity(
            "batch-decomposition",
            "Every output of the union of two batches is (B'_1 x_1 + B'_2 x_2)/(B'_1 + B'_2).",
            _latex_batch_decomposition(),
            prove_batch_decomposition,
            "sympy: two explicit batches, and general B'_1, B'_2 for a per-example mean",
        ),
        _identity(
            "family-instances",
            "Each of the five terms is a member L[pi, omega, C] of seed 000's generic family.",
            _latex_family_instances(),
            prove_family_instances,
            "sympy: on batches of 1..4-token examples, a zero-base row included",
        ),
        _identity(
            "policy-matched-scale-baseline-one",
            "The policy-matched scale C_{pi,omega} makes every family member equal 1 at the "
            "z-free baseline.",
            _latex_policy_matched(),
            prove_policy_matched_scale_baseline_one,
            "sympy: the five instances on batches of 1..4-token examples, and general pi, "
            "omega, n_i, B'",
        ),
        _identity(
            "policy-matched-scale-of-cc",
            "The policy-matched scale of R_cc's (shares, 1/kappa) is that of R_dist's "
            "(uniform, 1): mean_i bbar_i, for every alpha.",
            _latex_policy_matched_cc(),
            prove_policy_matched_scale_of_cc,
            "sympy: on batches of 1..4-token examples, a zero-base row included",
        ),
    )


#: The catalogue, in the order of MATH.md.
IDENTITIES: tuple[Identity, ...] = _catalogue()
#: The catalogue by id.
IDENTITY_BY_ID: dict[str, Identity] = {identity.id: identity for identity in IDENTITIES}
