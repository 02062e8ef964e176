"""The identities of MATH.md at alpha = 0, alpha = 1 and at the z-free baseline.

Each is checked on the implementation's own outputs, with the right-hand side computed
here in float64 from the case, so a failure names the identity rather than a number.
"""

from __future__ import annotations

import math

from properties.assertions import assert_values_close
from properties.cases import LossCase
from properties.invariant import Invariant
from properties.invariants.common import kept_rows, mean, tolerance
from properties.invariants.edge_cases import named
from properties.strategies import baseline_cases, loss_cases
from properties.target import Probe
from spec.terms import BTOK, CC, DIST, EX, KAPPA, RAW, TOK


def check_alpha_zero(probe: Probe, case: LossCase) -> None:
    out = probe.values(case)
    bbar_mean = mean([mean(b) for _, b in kept_rows(case)])
    assert_values_close(
        {
            TOK.name: out[TOK.name],
            CC.name: out[CC.name],
            KAPPA.name: out[KAPPA.name],
            BTOK.name: out[BTOK.name],
        },
        {
            TOK.name: out[RAW.name],
            CC.name: out[DIST.name],
            KAPPA.name: 1.0,
            BTOK.name: bbar_mean,
        },
        tolerance(case),
        # R_tok's and R_cc's expected values are the target's own R_raw and R_dist: the table
        # says so, since a wrong R_raw shows there as a wrong R_tok
        what="alpha = 0 gives uniform shares: R_tok = R_raw, R_cc = R_dist, kappa = 1, btok = bbar "
        "(R_tok and R_cc expected: the target's own R_raw and R_dist)",
        case=case,
    )


def check_alpha_one(probe: Probe, case: LossCase) -> None:
    out = probe.values(case)
    token_weighted, base, kappa = [], [], []
    for l, b in kept_rows(case):
        total_b = math.fsum(b)
        # pi_t = b_t / sum_s b_s (uniform when every b is 0)
        shares = [v / total_b for v in b] if total_b > 0 else [1 / len(b)] * len(b)
        token_weighted.append(math.fsum(p * v for p, v in zip(shares, l, strict=True)))
        base.append(math.fsum(p * v for p, v in zip(shares, b, strict=True)))
        kappa.append(base[-1] / mean(b) if total_b > 0 else 1.0)
    assert_values_close(
        out,
        {
            TOK.name: mean(token_weighted),
            BTOK.name: mean(base),
            KAPPA.name: mean(kappa),
        },
        tolerance(case),
        what="alpha = 1 gives linear surprisal shares pi_t = b_t / sum_s b_s",
        case=case,
    )


def check_baseline(probe: Probe, case: LossCase) -> None:
    out = probe.values(case)
    epsilon = case.config.example_inverse_surprisal_epsilon
    expected_ex = mean([mean(b) / (mean(b) + epsilon) for _, b in kept_rows(case)])
    assert_values_close(
        out,
        {
            DIST.name: 1.0,
            CC.name: 1.0,
            EX.name: expected_ex,
            TOK.name: out[BTOK.name],
        },
        tolerance(case),
        what="at the z-free baseline (l = b, c = mean bbar): R_dist = R_cc = 1, "
        "R_ex = mean bbar/(bbar + eps), R_tok = token_weighted_base_loss",
        case=case,
    )


INVARIANTS = (
    Invariant(
        id="alpha-zero-uniform",
        group="identities",
        statement="alpha = 0: uniform shares even where b = 0, so R_tok = R_raw, R_cc = R_dist "
        "and kappa = 1",
        spec_refs=(
            "alpha0-uniform-shares",
            "alpha0-kappa-one",
            "alpha0-tok-equals-raw",
            "alpha0-cc-equals-dist",
            "zero-to-the-zero",
        ),
        strategy=lambda domain: loss_cases(domain, alpha=0.0),
        check=check_alpha_zero,
        examples=(named("alpha0-zero-surprisal"),),
        witness="exp_log_shares",
    ),
    Invariant(
        id="alpha-one-linear",
        group="identities",
        statement="alpha = 1: the shares are b_t / sum_s b_s",
        spec_refs=("alpha1-linear-shares",),
        strategy=lambda domain: loss_cases(domain, alpha=1.0),
        check=check_alpha_one,
        examples=(named("zero-base-row-with-padding"),),
        witness="shares_over_padding",
    ),
    Invariant(
        id="zfree-baseline",
        group="identities",
        statement="l = b and c = mean bbar give R_dist = R_cc = 1, R_ex = mean bbar/(bbar+eps) "
        "and R_tok = token_weighted_base_loss",
        spec_refs=(
            "baseline-dist-one",
            "baseline-cc-one",
            "baseline-ex",
            "baseline-ex-one-at-eps0",
            "baseline-tok-equals-base",
        ),
        strategy=lambda domain: baseline_cases(domain),
        check=check_baseline,
        witness="epsilon_as_floor",
    ),
)
