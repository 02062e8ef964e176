"""Numerical behaviour: finiteness at extreme alpha and losses, and what kappa must obey."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from hypothesis import strategies as st

from properties.assertions import assert_values_close
from properties.cases import LossCase
from properties.invariant import Invariant, InvariantViolation
from properties.invariants.common import (
    ALL_NAMES,
    TOTAL,
    assume_gradient_representable,
    kept_rows,
    mean,
    tolerance,
)
from properties.invariants.edge_cases import named
from properties.strategies import Domain, alphas, loss_cases
from properties.target import Probe
from spec.terms import KAPPA, TOK

#: alpha values far past where b^alpha overflows float32 (and float64): any finite alpha.
HUGE_ALPHAS: tuple[float, ...] = (1e3, 1e6, 1e30, 3.4e38, 1e300)


@st.composite
def extreme_cases(draw: st.DrawFn, domain: Domain) -> LossCase:
    """Cases at the domain's largest alpha, with losses up to its largest value."""
    huge = [a for a in HUGE_ALPHAS if a <= domain.max_alpha] or [domain.max_alpha]
    alpha = draw(st.sampled_from(huge))
    dtypes = tuple(d for d in domain.dtypes if d != torch.float64) or domain.dtypes
    return draw(loss_cases(domain, dtypes=dtypes, alpha=alpha))


def check_finite(probe: Probe, case: LossCase) -> None:
    assume_gradient_representable(case)
    values, grad, _ = probe.gradients(case, of=TOTAL)
    bad = [f"{n} = {values[n]}" for n in ALL_NAMES if not math.isfinite(values[n])]
    if bad:
        raise InvariantViolation(
            f"every output must be finite for alpha = {case.config.token_weight_alpha} and "
            f"losses up to 1e4 (shares in log space), got {', '.join(bad)}",
            case=case,
            failing=tuple(n for n in ALL_NAMES if not math.isfinite(values[n])),
        )
    if not bool(torch.isfinite(grad).all()):
        raise InvariantViolation(
            f"the gradient must be finite, got {grad.tolist()}", case=case, failing=("gradient",)
        )


@st.composite
def concentration_cases(draw: st.DrawFn, domain: Domain) -> LossCase:
    """Integer-valued b, so that the largest surprisal leads the next by a ratio of at
    least (k+1)/k: at alpha >= 1e6 every other share is below exp(-1e4), i.e. 0."""
    case = draw(loss_cases(domain, alpha=draw(st.sampled_from([1e6, 1e30]))))
    zfree = tuple(
        tuple(float(round(v)) if valid else v for v, valid in zip(row, m, strict=True))
        for row, m in zip(case.zfree_token_nll, case.mask, strict=True)
    )
    case = replace(case, zfree_token_nll=zfree)
    return case.with_config(example_inverse_surprisal_epsilon=1.0)


def check_concentration(probe: Probe, case: LossCase) -> None:
    out = probe.values(case)
    tops = []
    for l, b in kept_rows(case):
        top = max(b)
        tops.append(mean([lv for lv, bv in zip(l, b, strict=True) if bv == top]))
    assert_values_close(
        out,
        {TOK.name: mean(tops)},
        tolerance(case, alpha=0.0),  # the shares are exactly 0 or 1/#ties: no alpha error
        what=f"alpha = {case.config.token_weight_alpha} puts every share on the largest "
        "surprisal of each example (split evenly between ties)",
        case=case,
    )


def _kappa_upper_bound(case: LossCase) -> float:
    # kappa_i = btok_i / bbar_i <= max_t b_it / bbar_i, and 1 where bbar_i = 0
    return mean([max(b) / mean(b) if mean(b) > 0 else 1.0 for _, b in kept_rows(case)])


def check_kappa_bounds(probe: Probe, case: LossCase) -> None:
    kappa = probe.values(case)[KAPPA.name]
    upper = _kappa_upper_bound(case)
    slack = tolerance(case).rtol * upper
    if not (1.0 - slack <= kappa <= upper + slack):
        raise InvariantViolation(
            f"token_concentration_factor must lie in [1, mean_i max_t b_it / bbar_i] = "
            f"[1, {upper:.9g}] (Chebyshev's sum inequality), got {kappa:.9g}",
            expected={"lower": 1.0, "upper": upper},
            observed={KAPPA.name: kappa},
            case=case,
            failing=(KAPPA.name,),
        )


@dataclass(frozen=True)
class AlphaPair:
    """A case at its alpha, and a larger alpha to compare it with."""

    case: LossCase
    larger_alpha: float


@st.composite
def alpha_pairs(draw: st.DrawFn, domain: Domain) -> AlphaPair:
    case = draw(loss_cases(domain))
    smaller, larger = sorted([case.config.token_weight_alpha, draw(alphas(domain.max_alpha))])
    return AlphaPair(case.with_config(token_weight_alpha=smaller), larger)


def check_kappa_monotone(probe: Probe, drawn: AlphaPair) -> None:
    case, larger_alpha = drawn.case, drawn.larger_alpha
    smaller = probe.values(case)[KAPPA.name]
    larger = probe.values(case.with_config(token_weight_alpha=larger_alpha))[KAPPA.name]
    slack = tolerance(case, alpha=larger_alpha).rtol * (smaller + larger)
    if larger < smaller - slack:
        raise InvariantViolation(
            f"kappa never decreases as alpha grows, but token_concentration_factor is "
            f"{smaller:.9g} at alpha = {case.config.token_weight_alpha} and {larger:.9g} at "
            f"alpha = {larger_alpha}",
            expected={"at larger alpha, at least": smaller},
            observed={KAPPA.name: larger},
            case=case.with_config(token_weight_alpha=larger_alpha),
            failing=(KAPPA.name,),
        )


INVARIANTS = (
    Invariant(
        id="finite-at-extremes",
        group="numerics",
        statement="outputs and gradients stay finite for any finite alpha >= 0 and losses up "
        "to 1e4 in float32",
        spec_refs=("MATH.md#per-example",),
        strategy=lambda domain: extreme_cases(domain),
        check=check_finite,
        examples=(named("huge-alpha-float32"),),
        witness="no_max_subtraction",
    ),
    Invariant(
        id="huge-alpha-concentration",
        group="numerics",
        statement="as alpha grows the shares concentrate on the largest surprisal",
        spec_refs=("alpha-infinity-concentration",),
        strategy=lambda domain: concentration_cases(domain),
        check=check_concentration,
        examples=(
            named(
                "ties-at-max",
                lambda case: case.with_config(token_weight_alpha=1e6),
                note="alpha = 1e6",
            ),
        ),
        applies=lambda domain: domain.max_alpha >= 1e6,
        witness="alpha_ignored",
    ),
    Invariant(
        id="kappa-bounds",
        group="numerics",
        statement="1 <= kappa_i <= max_t b_it / bbar_i, so their mean too",
        spec_refs=("kappa-at-least-one",),
        strategy=lambda domain: loss_cases(domain),
        check=check_kappa_bounds,
        examples=(
            named("all-zero-surprisal-row"),
            named("ties-at-max"),
            named("uneven-concentration-rows"),
        ),
        witness="kappa_ratio_of_means",
    ),
    Invariant(
        id="kappa-monotone-in-alpha",
        group="numerics",
        statement="kappa never decreases as alpha grows",
        spec_refs=("kappa-monotone-in-alpha",),
        strategy=lambda domain: alpha_pairs(domain),
        check=check_kappa_monotone,
        witness="kappa_from_token_nll",
    ),
)
