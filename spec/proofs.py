r"""The proofs of the identities of MATH.md (``spec.identities`` catalogues them).

Each ``prove_*`` function raises ``AssertionError`` when the identity does not hold for the
current definitions, and otherwise returns the claims it checked. How the proofs go:

* an equation is proven by sympy simplifying the difference of its sides to 0 — for
  ``n = 1 .. 4`` tokens with explicit symbols ``l_1 .. l_n``, ``b_1 .. b_n`` (and batches of
  such examples), and for a general ``n`` with ``Sum`` over indexed symbols where sympy
  manages (``spec.algebra`` supplies the ``Sum`` lemmas it needs);
* an inequality is proven by writing the quantity as a sum of manifestly non-negative
  terms;
* what concerns the data layout rather than the formulas (padding) is proven through the
  oracle, which evaluates the same expressions.

The proofs build their expressions from ``spec.definitions`` and ``spec.family`` when they
run, so a change of a formula there makes the proofs that depend on it fail
(``tests/spec/test_proofs_detect_changes.py`` checks a few such changes).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable

import mpmath
import numpy as np
import sympy as sp

from spec import symbols as sym
from spec.algebra import assert_equal, assert_true, assert_zero
from spec.definitions import (
    LOSS_NAMES,
    SYMBOLIC,
    TERM_NAMES,
    TOTAL_NAME,
    Batch,
    Example,
    ExplicitBatch,
    ExplicitTokens,
    IndexedBatch,
    IndexedTokens,
    Token,
    at_baseline,
    baseline_scale,
    indexed_example,
    loss_terms,
    per_example_contributions,
    term_gradient,
    token_gradient,
)
from spec.family import (
    FAMILY_INSTANCES,
    family_member,
    generic_matched_scale,
    generic_member,
)
from spec.oracle import (
    CONFIG_ARGUMENTS,
    DEFAULT_PRECISION,
    SHARES,
    config_arguments,
    evaluate_details,
    example_function,
)
from spec.parameters import ALPHA, PARAMETERS
from spec.terms import (
    BTOK,
    CC,
    DIAGNOSTICS,
    DIST,
    EX,
    RAW,
    TERMS,
    TOK,
    Output,
    config_mapping,
    distinct_weights,
)

#: Token counts of the explicit proofs.
SIZES: tuple[int, ...] = (1, 2, 3, 4)
#: Batches (token count of each kept example) of the explicit batch-level proofs.
BATCHES: tuple[tuple[int, ...], ...] = ((1,), (2,), (3,), (4,), (1, 2), (2, 3, 4))
#: The terms and J: the outputs that depend on l.
L_DEPENDENT: tuple[str, ...] = (*TERM_NAMES, TOTAL_NAME)


# ---------------------------------------------------------------------------------------
# Building blocks


def _example(n: int, *, positive_b: bool = False, alpha: sp.Expr = sym.alpha) -> Example:
    return Example(ExplicitTokens.symbols(n, positive_b=positive_b), alpha)


def general_example() -> Example:
    """Example ``i`` with a general number ``n_i`` of tokens ``l[i, t]``, ``b[i, t]``."""
    return indexed_example(sym.i)


def general_token(example: Example) -> Token:
    """Token ``t`` of ``general_example()``."""
    return example.tokens.token(sym.t)


def general_batch() -> IndexedBatch:
    """``B'`` examples, example ``i`` with ``n_i`` tokens: fully general sizes."""
    return IndexedBatch(example=indexed_example)


def _batches() -> Iterable[tuple[str, ExplicitBatch]]:
    for sizes in BATCHES:
        yield f"sizes {sizes}", ExplicitBatch.of_sizes(sizes)


def _scale_b(expr: sp.Expr, tokens_b: Iterable[sp.Expr], factor: sp.Expr) -> sp.Expr:
    """``expr`` with each of the explicit symbols ``tokens_b`` multiplied by ``factor``."""
    return expr.xreplace({b: factor * b for b in tokens_b})


def scale_indexed_b(expr: sp.Expr, factor: sp.Expr) -> sp.Expr:
    """``expr`` with every indexed ``b[...]`` multiplied by ``factor``."""
    return expr.replace(
        lambda e: isinstance(e, sp.Indexed) and e.base == sym.b_indexed,
        lambda e: factor * e,
    )


# ---------------------------------------------------------------------------------------
# alpha = 0 and alpha = 1


def prove_alpha0_uniform_shares() -> tuple[str, ...]:
    """Identity ``alpha0-uniform-shares``: At alpha = 0 every share is 1/n_i, also where b = 0
    (0^0 = 1).
    """
    checks = []
    for n in SIZES:
        example = _example(n)
        for k, share in enumerate(example.shares, 1):
            checks.append(
                assert_equal(share.subs(sym.alpha, 0), sp.Rational(1, n), f"n={n}: pi_{k}")
            )
            # Where b = 0 too: 0^0 = 1, in either order of substitution.
            zeros = {b: 0 for b in example.tokens.base}
            claim = f"n={n}: pi_{k} with every b = 0"
            checks.append(
                assert_equal(share.subs(sym.alpha, 0).subs(zeros), sp.Rational(1, n), claim)
            )
            checks.append(
                assert_equal(share.subs(zeros).subs(sym.alpha, 0), sp.Rational(1, n), claim)
            )
    example = general_example()
    share = example.share(general_token(example)).subs(sym.alpha, 0).doit()
    checks.append(assert_equal(share, 1 / sym.n_indexed[sym.i], "general n: pi_it = 1/n_i"))
    return tuple(checks)


def prove_alpha0_kappa_one() -> tuple[str, ...]:
    """Identity ``alpha0-kappa-one``: At alpha = 0 the concentration factor kappa_i is 1."""
    checks = []
    for n in SIZES:
        kappa = _example(n).kappa.subs(sym.alpha, 0)
        checks.append(assert_equal(kappa, 1, f"n={n}: kappa = 1"))
    kappa = general_example().kappa.subs(sym.alpha, 0).doit()
    checks.append(assert_equal(kappa, 1, "general n: kappa_i = 1"))
    return tuple(checks)


def _alpha0_terms_equal(first: str, second: str) -> tuple[str, ...]:
    checks = []
    for label, batch in _batches():
        terms = loss_terms(batch)
        claim = f"{label}: {first} = {second} at alpha = 0"
        checks.append(assert_equal(terms[first].subs(sym.alpha, 0), terms[second], claim))
    terms = loss_terms(general_batch())
    difference = (terms[first] - terms[second]).subs(sym.alpha, 0).doit()
    checks.append(assert_zero(difference, f"general n_i and B': {first} = {second}"))
    return tuple(checks)


def prove_alpha0_tok_equals_raw() -> tuple[str, ...]:
    """Identity ``alpha0-tok-equals-raw``: At alpha = 0 the token-weighted loss R_tok equals
    R_raw.
    """
    return _alpha0_terms_equal(TOK.name, RAW.name)


def prove_alpha0_cc_equals_dist() -> tuple[str, ...]:
    """Identity ``alpha0-cc-equals-dist``: At alpha = 0 the concentration-corrected loss R_cc
    equals R_dist.
    """
    return _alpha0_terms_equal(
        CC.name,
        DIST.name,
    )


def prove_alpha1_linear_shares() -> tuple[str, ...]:
    """Identity ``alpha1-linear-shares``: At alpha = 1 the shares are the linear surprisal
    shares b_it / sum_s b_is.
    """
    checks = []
    for n in SIZES:
        example = _example(n)
        bs = example.tokens.base
        for k, share in enumerate(example.shares):
            linear = bs[k] / sp.Add(*bs)
            checks.append(assert_equal(share.subs(sym.alpha, 1), linear, f"n={n}: pi_{k + 1}"))
    example = general_example()
    token = general_token(example)
    linear = token.base / example.tokens.total(lambda tok: tok.base, index=sym.s)
    share = example.share(token).subs(sym.alpha, 1)
    checks.append(assert_equal(share, linear, "general n: pi_it = b_it / sum_s b_is"))
    return tuple(checks)


def prove_shares_sum_to_one() -> tuple[str, ...]:
    """Identity ``shares-sum-to-one``: The shares of every kept example sum to 1 (the zero-base
    fallback included).
    """
    checks = []
    for n in SIZES:
        for zero_base in (False, True):
            example = Example(ExplicitTokens.symbols(n), sym.alpha, zero_base=zero_base)
            claim = f"n={n}{' (zero-base row)' if zero_base else ''}: sum_t pi_t = 1"
            checks.append(assert_equal(sp.Add(*example.shares), 1, claim))
    example = general_example()
    total = example.tokens.total(example.share)
    checks.append(assert_equal(total, 1, "general n: sum_t pi_it = 1"))
    return tuple(checks)


def prove_zero_to_the_zero() -> tuple[str, ...]:
    """Identity ``zero-to-the-zero``: 0^0 = 1 in sympy, in mpmath and in the oracle's shares at
    alpha = 0 with b = 0.
    """
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
                # alpha = 0, every other parameter and weight 1
                config = {field: one for _, field in CONFIG_ARGUMENTS} | {ALPHA.field: zero}
                params = config_arguments(config)
                out = example_function(n, zero_base, True)(*ls, *bs, *params, 1, mpmath.mpf(n))
                shares = out[SHARES]
                claim = f"oracle, n={n}, {zeros} zero b: pi = 1/n at alpha = 0"
                checks.append(assert_true(all(x == 1 / mpmath.mpf(n) for x in shares), claim))
    return tuple(checks)


def prove_zero_base_uniform_fallback() -> tuple[str, ...]:
    """Identity ``zero-base-uniform-fallback``: A kept example whose valid b are all 0 gets
    uniform shares and kappa = 1: the limit of a row of equal b, where the formula itself is
    0/0 for alpha > 0.
    """
    checks = []
    level = sp.Symbol("beta", positive=True)
    positive_alpha = sp.Symbol("alpha_pos", positive=True)
    for n in SIZES:
        example = _example(n)
        bs = example.tokens.base
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
    return [*_batches(), ("general n_i and B'", general_batch())]


def _baseline(name: str, expected: Callable[[Batch], sp.Expr]) -> tuple[str, ...]:
    """``name`` at ``l = b`` with ``c = mean_i bbar_i`` equals ``expected(batch)``."""
    checks = []
    for label, batch in _baseline_cases():
        value = loss_terms(batch)[name].subs(sym.c, baseline_scale(batch))
        value = at_baseline(value, batch)
        checks.append(assert_equal(value, expected(batch), f"{label}: {name}"))
    return tuple(checks)


def prove_baseline_dist_one() -> tuple[str, ...]:
    """Identity ``baseline-dist-one``: At the z-free baseline (l = b, c = mean_i bbar_i),
    R_dist = 1.
    """
    return _baseline(DIST.name, lambda batch: sp.Integer(1))


def prove_baseline_cc_one() -> tuple[str, ...]:
    """Identity ``baseline-cc-one``: At the z-free baseline (l = b, c = mean_i bbar_i), R_cc =
    1.
    """
    return _baseline(
        CC.name,
        lambda batch: sp.Integer(1),
    )


def prove_baseline_ex() -> tuple[str, ...]:
    """Identity ``baseline-ex``: At the z-free baseline, R_ex = mean_i bbar_i / (bbar_i +
    epsilon).
    """
    return _baseline(
        EX.name,
        lambda batch: batch.mean(lambda e: e.bbar / (e.bbar + sym.epsilon)),
    )


def prove_baseline_ex_one_at_eps0() -> tuple[str, ...]:
    """Identity ``baseline-ex-one-at-eps0``: At the z-free baseline with epsilon = 0 (every
    bbar_i > 0), R_ex = 1 exactly.
    """
    checks = []
    name = EX.name
    for label, batch in _baseline_cases():
        # bbar_i / bbar_i = 1: epsilon = 0 is allowed only where every bbar_i > 0.
        value = at_baseline(loss_terms(batch)[name], batch).subs(sym.epsilon, 0)
        claim = f"{label}: R_ex = 1 at epsilon = 0 (every bbar_i > 0)"
        checks.append(assert_equal(value, 1, claim))
    return tuple(checks)


def prove_baseline_tok_equals_base() -> tuple[str, ...]:
    """Identity ``baseline-tok-equals-base``: At the z-free baseline, R_tok equals
    token_weighted_base_loss.
    """
    return _baseline(
        TOK.name,
        lambda batch: loss_terms(batch)[BTOK.name],
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
    """Identity ``gradient-closed-form``: dJ/dl_it has the closed form of MATH.md, 'Gradients'
    (pi, kappa, bbar from b only).
    """
    checks = []
    for name, batch in _gradient_cases():
        total = loss_terms(batch)[TOTAL_NAME]
        for k, example in enumerate(batch.examples, 1):
            for token in example.tokens.tokens:
                closed = token_gradient(example, token, batch.count)
                claim = f"{name}: dJ/dl_{k},{token.t}"
                checks.append(assert_equal(sp.diff(total, token.loss), closed, claim))
    # General n_i and B': differentiate in l[k, j] for a valid position j of kept example k.
    k, j = sp.symbols("k j", integer=True, positive=True)
    derivative = _general_derivative(loss_terms(general_batch())[TOTAL_NAME], k, j)
    example = indexed_example(k)
    closed = token_gradient(example, example.tokens.token(j), sym.kept_count)
    checks.append(assert_equal(derivative, closed, "general n_i and B': dJ/dl_kj"))
    return tuple(checks)


def _gradient_cases() -> list[tuple[str, ExplicitBatch]]:
    """The explicit batches of the gradient proofs: ``BATCHES`` and a batch with a zero-base
    row (uniform shares, kappa = 1)."""
    cases = [(sizes, None) for sizes in BATCHES] + [((2, 3), (True, False))]
    return [
        (f"sizes {sizes} zero-base {zero_base}", ExplicitBatch.of_sizes(sizes, zero_base=zero_base))
        for sizes, zero_base in cases
    ]


def _general_derivative(expr: sp.Expr, k: sp.Symbol, j: sp.Symbol) -> sp.Expr:
    """``d expr / d l[k, j]`` at a valid position j of kept example k of a general batch."""
    derivative = _on_valid_positions(sp.diff(expr, sym.l_indexed[k, j]).doit())
    return _on_valid_positions(derivative.doit())


def prove_term_gradient_closed_form() -> tuple[str, ...]:
    """Identity ``term-gradient-closed-form``: each term, differentiated alone,
    has the closed form of MATH.md, 'Gradients'; the two diagnostics do not depend on l.
    """
    checks = []
    for name, batch in _gradient_cases():
        outputs = loss_terms(batch)
        for k, example in enumerate(batch.examples, 1):
            for token in example.tokens.tokens:
                for term in TERMS:
                    closed = term_gradient(term, example, token, batch.count)
                    claim = f"{name}: d{term.symbol}/dl_{k},{token.t}"
                    checks.append(
                        assert_equal(sp.diff(outputs[term.name], token.loss), closed, claim)
                    )
                for diagnostic in DIAGNOSTICS:
                    claim = f"{name}: d{diagnostic.symbol}/dl_{k},{token.t} = 0"
                    checks.append(assert_zero(sp.diff(outputs[diagnostic.name], token.loss), claim))
    k, j = sp.symbols("k j", integer=True, positive=True)
    outputs = loss_terms(general_batch())
    example = indexed_example(k)
    for term in TERMS:
        closed = term_gradient(term, example, example.tokens.token(j), sym.kept_count)
        derivative = _general_derivative(outputs[term.name], k, j)
        checks.append(assert_equal(derivative, closed, f"general n_i and B': d{term.symbol}/dl_kj"))
    for diagnostic in DIAGNOSTICS:
        derivative = _general_derivative(outputs[diagnostic.name], k, j)
        checks.append(
            assert_zero(derivative, f"general n_i and B': d{diagnostic.symbol}/dl_kj = 0")
        )
    return tuple(checks)


def mix_coefficient(term: Output) -> sp.Symbol:
    """``a_k``, the coefficient of one term in a mix of the outputs (``a_raw`` for w_raw's)."""
    return sp.Symbol("a_" + str(term.weight).removeprefix("w_"), real=True)


def prove_mixed_gradient() -> tuple[str, ...]:
    """Identity ``mixed-gradient``: for any real a_k and a_J, the gradient of
    sum_k a_k R_k + a_J J is sum_k (a_k + a_J w_k) dR_k/dl (one backward through several
    outputs is the same mix of the terms' closed forms).
    """
    checks = []
    coefficients = {term.name: mix_coefficient(term) for term in TERMS}
    a_total = sp.Symbol("a_J", real=True)
    weights = SYMBOLIC.weights()
    for name, batch in _gradient_cases():
        outputs = loss_terms(batch)
        mix = a_total * outputs[TOTAL_NAME] + sp.Add(
            *(a * outputs[term] for term, a in coefficients.items())
        )
        for k, example in enumerate(batch.examples, 1):
            for token in example.tokens.tokens:
                closed = sp.Add(
                    *(
                        (coefficients[term.name] + a_total * weights[term.name])
                        * term_gradient(term, example, token, batch.count)
                        for term in TERMS
                    )
                )
                claim = f"{name}: d(sum_k a_k R_k + a_J J)/dl_{k},{token.t}"
                checks.append(assert_equal(sp.diff(mix, token.loss), closed, claim))
    return tuple(checks)


# ---------------------------------------------------------------------------------------
# Scale of b


def prove_b_scale_invariance() -> tuple[str, ...]:
    """Identity ``b-scale-invariance``: Multiplying every b by a factor lambda > 0 leaves the
    shares pi and kappa unchanged.
    """
    checks = []
    factor = sp.Symbol("lambda", positive=True)
    for n in SIZES:
        example = _example(n)
        for k, share in enumerate(example.shares, 1):
            scaled = _scale_b(share, example.tokens.base, factor)
            checks.append(assert_equal(scaled, share, f"n={n}: pi_{k}(lambda b) = pi_{k}(b)"))
        example = _example(n, positive_b=True)
        scaled = _scale_b(example.kappa, example.tokens.base, factor)
        claim = f"n={n}: kappa(lambda b) = kappa(b)"
        checks.append(assert_equal(scaled, example.kappa, claim))
    example = general_example()
    share = example.share(general_token(example))
    checks.append(assert_equal(scale_indexed_b(share, factor), share, "general n: pi_it"))
    kappa = example.kappa
    checks.append(assert_equal(scale_indexed_b(kappa, factor), kappa, "general n: kappa_i"))
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
    """Identity ``kappa-at-least-one``: kappa_i >= 1 for every alpha >= 0 (Chebyshev's sum
    inequality).
    """
    checks = []
    a = sym.alpha
    # x -> x^alpha does not decrease on x > 0 for alpha >= 0, so b_s^alpha - b_t^alpha has
    # the sign of b_s - b_t, and every pair term below is >= 0.
    x = sp.Symbol("x", positive=True)
    checks.append(assert_true(sp.diff(x**a, x).is_nonnegative, "d/dx x^alpha >= 0 on x > 0"))
    for n in SIZES:
        example = _example(n, positive_b=True)
        bs = example.tokens.base
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
    n, s, t = sym.n, sym.s, sym.t
    example = Example(IndexedTokens(sym.l_indexed, sp.IndexedBase("b", positive=True), n))
    pb = example.tokens.base
    power_sum = sp.Sum(pb[t] ** a, (t, 1, n))
    plain_sum = sp.Sum(pb[t], (t, 1, n))
    pairs = sp.Rational(1, 2) * sp.Sum(
        (pb[s] ** a - pb[t] ** a) * (pb[s] - pb[t]), (t, 1, n), (s, 1, n)
    )
    claim = "general n: kappa - 1 = (1/2) sum_s sum_t (b_s^a - b_t^a)(b_s - b_t) / (sum b^a sum b)"
    checks.append(assert_equal(example.kappa - 1, pairs / (power_sum * plain_sum), claim))
    return tuple(checks)


def _psi(example: Example, alpha: sp.Expr) -> sp.Expr:
    """``psi(alpha) = sum_t pi_t(alpha) log b_t``: the share-weighted mean of ``log b``.

    ``alpha`` may differ from the example's own (``psi(alpha + 1)`` is needed too).
    """
    tokens = example.tokens
    at_alpha = Example(tokens, alpha)
    return tokens.total(lambda tok: at_alpha.share(tok) * sp.log(tok.base))


def prove_kappa_monotone_in_alpha() -> tuple[str, ...]:
    """Identity ``kappa-monotone-in-alpha``: kappa_i never decreases as alpha grows."""
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
                for share, b in zip(example.shares, example.tokens.base, strict=True)
            )
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
            bs = example.tokens.base
            rest = Example(ExplicitTokens(example.tokens.loss[zeros:], bs[zeros:]), positive_alpha)
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
    variance = example.tokens.total(lambda tok: example.share(tok) * (sp.log(tok.base) - psi) ** 2)
    claim = "general n: d psi/d alpha = sum_t pi_t (log b_t - psi)^2"
    checks.append(assert_equal(sp.diff(psi, a), variance, claim))
    checks.append(assert_true(variance.is_nonnegative, "general n: that variance is >= 0"))
    return tuple(checks)


def prove_alpha_infinity_concentration() -> tuple[str, ...]:
    """Identity ``alpha-infinity-concentration``: As alpha -> infinity the shares concentrate on
    the largest surprisal(s), and kappa_i -> max_t b_it / bbar_i.
    """
    checks = []
    a = sym.alpha
    for n in (2, 3, 4):
        for ties in range(1, n + 1):
            # b_1 .. b_ties are the largest, the others b_k = e^{-u_k} with u_k > 0. The
            # largest is 1: shares do not change with the scale of b (identity
            # b-scale-invariance), and sympy's limit copes better without it.
            # The gaps grow, u_k = d_1 + .. + d_k with d > 0, so sympy knows their order;
            # any other order is a permutation of tokens (token-permutation-invariance).
            steps = [sp.Symbol(f"d_{k}", positive=True) for k in range(ties + 1, n + 1)]
            gaps = list(itertools.accumulate(steps))
            bs = (sp.Integer(1),) * ties + tuple(sp.exp(-u) for u in gaps)
            example = Example(ExplicitTokens(ExplicitTokens.symbols(n).loss, bs), a)
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
    """Identity ``linearity-in-l``: Every term and J is linear in l for fixed b."""
    checks = []
    p, q = sp.symbols("p q", real=True)
    for label, batch in _batches():
        terms = loss_terms(batch)
        ls = [x for e in batch.examples for x in e.tokens.loss]
        other = [sp.Symbol(f"m_{k}", real=True) for k in range(len(ls))]
        for name in L_DEPENDENT:
            term = terms[name]
            mixed = term.xreplace({x: p * x + q * y for x, y in zip(ls, other, strict=True)})
            moved = term.xreplace(dict(zip(ls, other, strict=True)))
            claim = f"{label}: {name}(p l + q m) = p {name}(l) + q {name}(m)"
            checks.append(assert_equal(mixed, p * term + q * moved, claim))
    # General n_i and B': l[i, t] -> p l[i, t] + q m[i, t].
    m = sp.IndexedBase("m", real=True)

    def is_l(e: sp.Basic) -> bool:
        return isinstance(e, sp.Indexed) and e.base == sym.l_indexed

    terms = loss_terms(general_batch())
    for name in L_DEPENDENT:
        term = terms[name]
        mixed = term.replace(is_l, lambda e: p * e + q * m[e.indices])
        moved = term.replace(is_l, lambda e: m[e.indices])
        checks.append(assert_equal(mixed, p * term + q * moved, f"general: {name} is linear in l"))
    return tuple(checks)


def prove_linearity_in_weights() -> tuple[str, ...]:
    """Identity ``linearity-in-weights``: J is linear in the weights, with dJ/dw_k = R_k."""
    checks = []
    p, q = sp.symbols("p q", real=True)
    other = {w: sp.Symbol(f"{w.name}_other", nonnegative=True) for w in SYMBOLIC.weights().values()}
    for label, batch in [*_batches(), ("general n_i and B'", general_batch())]:
        terms = loss_terms(batch)
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


def prove_token_permutation_invariance() -> tuple[str, ...]:
    """Identity ``token-permutation-invariance``: Permuting the valid tokens of an example (l
    and b together) changes no output, and each token keeps its gradient.
    """
    checks = []
    for n in (2, 3, 4):
        first = Example(ExplicitTokens.symbols(2, prefix="1_"))
        example = Example(ExplicitTokens.symbols(n, prefix="2_"))
        tokens = example.tokens
        terms = loss_terms(ExplicitBatch((first, example)))
        grads = [token_gradient(example, tok, 2) for tok in tokens.tokens]
        for order in itertools.permutations(range(n)):
            if list(order) == sorted(order):
                continue
            moved = Example(
                ExplicitTokens(
                    tuple(tokens.loss[k] for k in order), tuple(tokens.base[k] for k in order)
                )
            )
            moved_terms = loss_terms(ExplicitBatch((first, moved)))
            for name in LOSS_NAMES:
                checks.append(
                    assert_equal(moved_terms[name], terms[name], f"n={n} order {order}: {name}")
                )
            for position, k in enumerate(order):
                moved_grad = token_gradient(moved, moved.tokens.tokens[position], 2)
                checks.append(
                    assert_equal(
                        moved_grad, grads[k], f"n={n} order {order}: dJ/dl of token {k + 1}"
                    )
                )
    return tuple(checks)


def prove_example_permutation_invariance() -> tuple[str, ...]:
    """Identity ``example-permutation-invariance``: Permuting the examples of a batch changes
    no output.
    """
    checks = []
    batch = ExplicitBatch.of_sizes((1, 2, 3))
    terms = loss_terms(batch)
    for order in itertools.permutations(range(3)):
        moved = loss_terms(ExplicitBatch(tuple(batch.examples[k] for k in order)))
        for name in LOSS_NAMES:
            checks.append(assert_equal(moved[name], terms[name], f"order {order}: {name}"))
    return tuple(checks)


def prove_padding_invariance() -> tuple[str, ...]:
    """Identity ``padding-invariance``: Adding padded positions or fully padded examples
    (whatever they hold, NaN and inf included) changes no output, no share and no gradient.
    """
    checks = []
    generator = random.Random(20240531)
    garbage = (float("nan"), float("inf"), -float("inf"), -1.0e300, 7.0)
    for case in range(12):
        rows, width = generator.randint(1, 4), generator.randint(1, 5)
        ls = [[generator.uniform(0, 6) for _ in range(width)] for _ in range(rows)]
        bs = [[generator.uniform(0, 6) for _ in range(width)] for _ in range(rows)]
        mask = [[generator.random() < 0.7 for _ in range(width)] for _ in range(rows)]
        mask[0][0] = True
        config = config_mapping(
            **distinct_weights((1.0, 0.5, 0.25, 0.75, 1.5, 1.25, 2.0)),
            **{p.field: generator.choice(p.edge_values) for p in PARAMETERS},
        )
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
        claim = f"case {case}: the outputs are unchanged"
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
    """Identity ``batch-mean-form``: Every output is the mean over kept examples of a per-
    example contribution x_i.
    """
    checks = []
    general = IndexedBatch()  # examples through their per-example quantities
    cases = [("general B'", general), ("sizes (1, 2, 3)", ExplicitBatch.of_sizes((1, 2, 3)))]
    for label, batch in cases:
        terms = loss_terms(batch)
        for name in LOSS_NAMES:
            mean = batch.mean(lambda e, name=name: per_example_contributions(e)[name])
            checks.append(assert_equal(terms[name], mean, f"{label}: {name} = mean_i x_i"))
    return tuple(checks)


def prove_batch_decomposition() -> tuple[str, ...]:
    """Identity ``batch-decomposition``: Every output of the union of two batches is (B'_1 x_1
    + B'_2 x_2)/(B'_1 + B'_2).
    """
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
    # output is mean_i x_i). The second batch's examples are x_{B'_1 + 1} .. x_{B'_1 + B'_2};
    # sympy's change_index shifts its sum onto the union's index range.
    count_1, count_2 = sp.symbols("B_1 B_2", integer=True, positive=True)
    x, i = sp.IndexedBase("x", real=True), sym.i
    union_mean = sp.Sum(x[i], (i, 1, count_1 + count_2)) / (count_1 + count_2)
    mean_1 = sp.Sum(x[i], (i, 1, count_1)) / count_1
    mean_2 = sp.Sum(x[i + count_1], (i, 1, count_2)).change_index(i, i + count_1) / count_2
    combined = (count_1 * mean_1 + count_2 * mean_2) / (count_1 + count_2)
    difference = sp.simplify(union_mean - combined)
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
    """Identity ``family-instances``: Each term is a member L[pi, omega, C] of
    seed 000's generic family.
    """
    checks = []
    for label, batch in _family_batches():
        terms = loss_terms(batch)
        for instance in FAMILY_INSTANCES:
            claim = f"{label}: {instance.term} = L[{instance.policy_name}, ...]"
            checks.append(assert_equal(terms[instance.term], instance.member(batch), claim))
    return tuple(checks)


def prove_policy_matched_scale_baseline_one() -> tuple[str, ...]:
    """Identity ``policy-matched-scale-baseline-one``: The policy-matched scale C_{pi,omega}
    makes every family member equal 1 at the z-free baseline.
    """
    checks = []
    for label, batch in _family_batches():
        for instance in FAMILY_INSTANCES:
            scale = instance.matched_scale(batch)
            member = family_member(
                batch, instance.policy, lambda e, i=instance: i.omega(e, SYMBOLIC), scale
            )
            checks.append(assert_equal(at_baseline(member, batch), 1, f"{label}: {instance.term}"))
    generic = generic_member().subs(sym.scale_C, generic_matched_scale())
    generic = at_baseline(generic, general_batch())
    checks.append(assert_equal(generic, 1, "general pi, omega, n_i and B'"))
    return tuple(checks)


def prove_policy_matched_scale_of_cc() -> tuple[str, ...]:
    """Identity ``policy-matched-scale-of-cc``: The policy-matched scale of R_cc's (shares,
    1/kappa) is that of R_dist's (uniform, 1): mean_i bbar_i, for every alpha.
    """
    checks = []
    by_term = {instance.term: instance for instance in FAMILY_INSTANCES}
    cc = by_term[CC.name]
    dist = by_term[DIST.name]
    for label, batch in _family_batches():
        claim = f"{label}: C of R_cc's (pi, omega) = C of R_dist's"
        checks.append(assert_equal(cc.matched_scale(batch), dist.matched_scale(batch), claim))
        claim = f"{label}: C of R_dist's (pi, omega) = mean_i bbar_i"
        checks.append(assert_equal(dist.matched_scale(batch), baseline_scale(batch), claim))
    return tuple(checks)
