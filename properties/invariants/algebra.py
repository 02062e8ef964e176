"""Linearity, scale invariance and batch decomposition (MATH.md, "Identities")."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import assume
from hypothesis import strategies as st

from properties.assertions import assert_values_close
from properties.cases import LossCase, Rows, round_to
from properties.invariant import Invariant
from properties.invariants.common import DIAGNOSTICS, TERMS, TOTAL, tolerance
from properties.strategies import (
    MIN_POSITIVE_LOSS,
    WEIGHT_NAMES,
    Domain,
    example_rows,
    loss_cases,
    loss_rows,
    make_valid,
    weights,
)
from properties.target import Probe
from properties.tolerances import unit_roundoff
from spec.terms import BTOK, CC, DIST, KAPPA, RAW, TOK
from spec.terms import TERMS as TERM_RECORDS

# --- linear in l -------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearCombination:
    """Two loss tensors on the same b and mask (``case`` and ``other_token_nll``), and a
    coefficient a (a power of two, so that a*l1 + l2 rounds only once)."""

    case: LossCase
    other_token_nll: Rows
    coefficient: float


@st.composite
def linear_combinations(draw: st.DrawFn, domain: Domain) -> LinearCombination:
    case = draw(loss_cases(domain, dtypes=domain.full_precision_dtypes or domain.dtypes))
    other = draw(loss_rows(case.mask, case.dtype, domain.max_loss))
    coefficient = draw(st.sampled_from([1.0, 2.0, 0.5, 4.0]))
    return LinearCombination(case, other, coefficient)


def check_linear_in_token_nll(probe: Probe, drawn: LinearCombination) -> None:
    case, other_rows, a = drawn.case, drawn.other_token_nll, drawn.coefficient
    other = replace(case, token_nll=other_rows)
    combined_rows = tuple(
        tuple(
            round_to(case.dtype, a * x + y) if valid else x
            for x, y, valid in zip(r1, r2, rm, strict=True)
        )
        for r1, r2, rm in zip(case.token_nll, other_rows, case.mask, strict=True)
    )
    combined = replace(case, token_nll=combined_rows)
    f1, f2, f12 = probe.values(case), probe.values(other), probe.values(combined)
    names = (*TERMS, TOTAL)
    # a*l1 + l2 is rounded once to the dtype: one more unit roundoff on every output.
    tol = tolerance(case)
    tol = replace(tol, rtol=tol.rtol + unit_roundoff(case.dtype))
    assert_values_close(
        f12,
        {n: a * f1[n] + f2[n] for n in names},
        tol,
        names=names,
        scales={n: a * abs(f1[n]) + abs(f2[n]) for n in names},
        what=f"every term is linear in l for fixed b: f({a}*l1 + l2) = {a}*f(l1) + f(l2)",
        case=combined,
    )


# --- linear in the weights ---------------------------------------------------------------


@dataclass(frozen=True)
class WeightPair:
    """A case, and a second set of the weights (by config field)."""

    case: LossCase
    second_weights: tuple[tuple[str, float], ...]


@st.composite
def weight_pairs(draw: st.DrawFn, domain: Domain) -> WeightPair:
    case = draw(loss_cases(domain))
    return WeightPair(case, tuple((name, draw(weights())) for name in WEIGHT_NAMES))


def check_linear_in_weights(probe: Probe, drawn: WeightPair) -> None:
    case, second_weights = drawn.case, dict(drawn.second_weights)
    f1 = probe.values(case)
    # each term's weight and value, by the term registry's record
    weighted = [(getattr(case.config, t.weight_field), f1[t.name]) for t in TERM_RECORDS]
    tol = tolerance(case)
    assert_values_close(
        {TOTAL: f1[TOTAL]},
        {TOTAL: sum(w * r for w, r in weighted)},
        tol,
        scales={TOTAL: sum(w * abs(r) for w, r in weighted)},
        what="J = w_raw R_raw + w_dist R_dist + w_ex R_ex + w_tok R_tok + w_cc R_cc, "
        "with the terms this call returned",
        case=case,
    )
    second = case.with_config(**second_weights)
    summed = case.with_config(
        **{name: getattr(case.config, name) + second_weights[name] for name in WEIGHT_NAMES}
    )
    f2, f12 = probe.values(second), probe.values(summed)
    assert_values_close(
        {TOTAL: f12[TOTAL]},
        {TOTAL: f1[TOTAL] + f2[TOTAL]},
        tol,
        scales={TOTAL: abs(f1[TOTAL]) + abs(f2[TOTAL])},
        what="J is linear in the weights: J(w1 + w2) = J(w1) + J(w2)",
        case=summed,
    )


# --- scale of b --------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaledSurprisal:
    """A case, and the factor s its z-free losses are multiplied by (a power of two)."""

    case: LossCase
    scale: float


@st.composite
def scaled_surprisals(draw: st.DrawFn, domain: Domain) -> ScaledSurprisal:
    """A case and a power-of-two factor s that keeps every valid s*b exact and inside the
    domain (0, or from ``MIN_POSITIVE_LOSS`` to ``max_loss``): the identity is about exact
    scaling, and a b outside the domain is not the implementation's to handle."""
    case = draw(loss_cases(domain))
    scale = draw(st.sampled_from([2.0, 0.5, 4.0, 0.25]))
    valid = [
        v
        for r, m in zip(case.zfree_token_nll, case.mask, strict=True)
        for v, ok in zip(r, m, strict=True)
        if ok
    ]
    assume(
        all(
            v == 0
            or (
                round_to(case.dtype, scale * v) == scale * v
                and MIN_POSITIVE_LOSS <= scale * v <= domain.max_loss
            )
            for v in valid
        )
    )
    return ScaledSurprisal(case, scale)


def check_scale_of_b(probe: Probe, drawn: ScaledSurprisal) -> None:
    case, s = drawn.case, drawn.scale
    scaled_rows = tuple(
        tuple(round_to(case.dtype, s * v) if valid else v for v, valid in zip(r, m, strict=True))
        for r, m in zip(case.zfree_token_nll, case.mask, strict=True)
    )
    scaled = replace(case, zfree_token_nll=scaled_rows)
    f, g = probe.values(case), probe.values(scaled)
    unchanged = (
        RAW.name,
        DIST.name,
        TOK.name,
        CC.name,
        KAPPA.name,
    )
    expected = {n: f[n] for n in unchanged}
    expected[BTOK.name] = s * f[BTOK.name]
    assert_values_close(
        g,
        expected,
        tolerance(case),
        what=f"b -> {s}*b leaves the shares pi and kappa unchanged (so R_tok, R_cc and kappa), "
        "and scales token_weighted_base_loss by s",
        case=scaled,
    )


# --- batch decomposition -----------------------------------------------------------------


@dataclass(frozen=True)
class BatchPair:
    """Two batches of the same dtype and config, of possibly different lengths T."""

    case: LossCase
    second: LossCase


@st.composite
def batch_pairs(draw: st.DrawFn, domain: Domain) -> BatchPair:
    first = draw(loss_cases(domain))
    token_nll, zfree, mask = draw(example_rows(first.dtype, domain))
    second = replace(first, token_nll=token_nll, zfree_token_nll=zfree, mask=mask)
    # one config valid for both batches (make_valid only ever changes epsilon)
    config = make_valid(concatenate(first, second)).config
    return BatchPair(replace(first, config=config), replace(second, config=config))


def pad_to(case: LossCase, length: int) -> LossCase:
    extra = length - case.shape[1]
    return case.with_rows(
        tuple(row + (0.0,) * extra for row in case.token_nll),
        tuple(row + (0.0,) * extra for row in case.zfree_token_nll),
        tuple(row + (False,) * extra for row in case.mask),
    )


def concatenate(first: LossCase, second: LossCase) -> LossCase:
    length = max(first.shape[1], second.shape[1])
    a, b = pad_to(first, length), pad_to(second, length)
    return a.with_rows(
        a.token_nll + b.token_nll, a.zfree_token_nll + b.zfree_token_nll, a.mask + b.mask
    )


def kept_count(case: LossCase) -> int:
    return sum(1 for row in case.mask if any(row))


def check_batch_decomposition(probe: Probe, drawn: BatchPair) -> None:
    first, second = drawn.case, drawn.second
    union = concatenate(first, second)
    f1, f2, fu = probe.values(first), probe.values(second), probe.values(union)
    k1, k2 = kept_count(first), kept_count(second)
    names = (*TERMS, *DIAGNOSTICS, TOTAL)
    assert_values_close(
        fu,
        {n: (k1 * f1[n] + k2 * f2[n]) / (k1 + k2) for n in names},
        tolerance(union),
        names=names,
        scales={n: (k1 * abs(f1[n]) + k2 * abs(f2[n])) / (k1 + k2) for n in names},
        what=f"the union of two batches with B'1 = {k1} and B'2 = {k2} kept examples gives "
        "(B'1 x1 + B'2 x2)/(B'1 + B'2) for every term and diagnostic",
        case=union,
    )


INVARIANTS = (
    Invariant(
        id="linear-in-token-nll",
        group="algebra",
        statement="for fixed b every term and J are linear in l: f(a l1 + l2) = a f(l1) + f(l2)",
        spec_refs=("linearity-in-l",),
        strategy=lambda domain: linear_combinations(domain),
        check=check_linear_in_token_nll,
        witness="shares_from_token_nll",
    ),
    Invariant(
        id="linear-in-weights",
        group="algebra",
        statement="J is the weighted sum of the returned terms, and linear in the weights",
        spec_refs=("linearity-in-weights",),
        strategy=lambda domain: weight_pairs(domain),
        check=check_linear_in_weights,
        witness="total_missing_cc",
    ),
    Invariant(
        id="zfree-scale-invariance",
        group="algebra",
        statement="b -> s b leaves pi and kappa (hence R_tok, R_cc, kappa) unchanged",
        spec_refs=("b-scale-invariance",),
        strategy=lambda domain: scaled_surprisals(domain),
        check=check_scale_of_b,
        witness="kappa_with_epsilon",
    ),
    Invariant(
        id="batch-decomposition",
        group="algebra",
        statement="the union of two batches is their kept-example-weighted mean, for every "
        "term and diagnostic",
        spec_refs=("batch-decomposition",),
        strategy=lambda domain: batch_pairs(domain),
        check=check_batch_decomposition,
        witness="global_token_mean",
    ),
)
