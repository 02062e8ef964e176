"""Known wrong variants of the stack, to name the mistake behind a failure.

Each variant recomputes one output the way a common mistake would (in float64, on the
failing input). When an implementation's output misses the spec's value but hits a
variant's, the report says so: "your reconstruction_loss matches the global-token-mean
variant". Variants explain failures; they never decide them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from properties.assertions import close
from properties.cases import LossCase
from properties.tolerances import Tolerance, case_tolerance

R_RAW = "reconstruction_loss"
R_DIST = "distribution_normalized_reconstruction_loss"
R_EX = "example_inverse_surprisal_weighted_reconstruction_loss"
R_TOK = "token_weighted_reconstruction_loss"
R_CC = "normalized_concentration_corrected_token_weighted_reconstruction_loss"
BTOK = "token_weighted_base_loss"
KAPPA = "token_concentration_factor"
TOTAL = "total_reconstruction_loss"


@dataclass(frozen=True)
class Batch:
    """The case as float64 arrays with zeros at padded positions."""

    l: np.ndarray
    b: np.ndarray
    m: np.ndarray
    alpha: float
    epsilon: float
    c: float
    weights: dict[str, float]

    @classmethod
    def of(cls, case: LossCase) -> Batch:
        m = np.array(case.mask, dtype=bool).reshape(case.shape)
        l = np.where(m, np.array(case.token_nll, dtype=np.float64).reshape(case.shape), 0.0)
        b = np.where(m, np.array(case.zfree_token_nll, dtype=np.float64).reshape(case.shape), 0.0)
        cfg = case.config
        return cls(
            l,
            b,
            m,
            cfg.token_weight_alpha,
            cfg.example_inverse_surprisal_epsilon,
            cfg.zfree_reference_scale,
            {
                R_RAW: cfg.raw_weight,
                R_DIST: cfg.distribution_normalized_weight,
                R_EX: cfg.example_inverse_surprisal_weight,
                R_TOK: cfg.token_weighted_weight,
                R_CC: cfg.normalized_concentration_corrected_token_weighted_weight,
            },
        )

    @property
    def n(self) -> np.ndarray:
        return self.m.sum(1)

    @property
    def kept(self) -> np.ndarray:
        return self.n > 0

    def per_example_mean(self, x: np.ndarray) -> np.ndarray:
        return x.sum(1)[self.kept] / self.n[self.kept]

    def shares(self, alpha: float | None = None, values: np.ndarray | None = None) -> np.ndarray:
        """Per-example tempered shares of ``values`` (b by default), with the spec's
        conventions (0^0 = 1, all-zero rows uniform)."""
        alpha = self.alpha if alpha is None else alpha
        values = self.b if values is None else values
        top = np.where(self.m, values, 0.0).max(1, keepdims=True)
        ratio = np.where(top > 0, values / np.where(top > 0, top, 1.0), 1.0)
        with np.errstate(all="ignore"):
            numerator = np.where(self.m, ratio**alpha, 0.0)
        return numerator / np.maximum(numerator.sum(1, keepdims=True), 1e-300)

    def ltok(self, shares: np.ndarray) -> np.ndarray:
        return (shares * self.l).sum(1)[self.kept]

    def kappa(self, shares: np.ndarray) -> np.ndarray:
        bbar = self.per_example_mean(self.b)
        btok = (shares * self.b).sum(1)[self.kept]
        return np.where(bbar > 0, btok / np.where(bbar > 0, bbar, 1.0), 1.0)


Variant = Callable[[Batch], float]


def _ratio_of_means_ex(x: Batch) -> float:
    return float(x.per_example_mean(x.l).mean() / (x.per_example_mean(x.b).mean() + x.epsilon))


def _token_level_ex(x: Batch) -> float:
    per_token = np.where(x.m, x.l / (x.b + x.epsilon + (~x.m)), 0.0)
    return float(x.per_example_mean(per_token).mean())


def _batch_normalized_shares(x: Batch) -> np.ndarray:
    """b^alpha over its sum over the whole batch (``sum(...)`` without ``dim=1``)."""
    top = x.b[x.m].max() if x.m.any() else 0.0
    with np.errstate(all="ignore"):
        numerator = np.where(x.m, (x.b / top if top > 0 else 1.0) ** x.alpha, 0.0)
    return numerator / numerator.sum()


#: mistakes in the shares, each reaching all four share-weighted outputs (below)
SHARE_MISTAKES: dict[str, Callable[[Batch], np.ndarray]] = {
    "alpha-ignored (linear shares whatever alpha)": lambda x: x.shares(1.0),
    "uniform-shares (alpha treated as 0)": lambda x: x.shares(0.0),
    "shares-from-token_nll (pi built from l, not b)": lambda x: x.shares(values=x.l),
    "batch-normalized-shares (b^alpha normalized over the whole batch)": (_batch_normalized_shares),
}


def _share_weighted(x: Batch, shares: np.ndarray) -> dict[str, float]:
    """R_tok, R_cc, token_weighted_base_loss and kappa with the given shares."""
    ltok, kappa = x.ltok(shares), x.kappa(shares)
    return {
        R_TOK: float(ltok.mean()),
        R_CC: float((ltok / kappa).mean() / x.c),
        BTOK: float((shares * x.b).sum(1)[x.kept].mean()),
        KAPPA: float(kappa.mean()),
    }


#: output name -> {variant name: what that output would be under the mistake}
VARIANTS: dict[str, dict[str, Variant]] = {
    R_RAW: {
        "global-token-mean (sum of l over all valid tokens / their count)": lambda x: float(
            x.l.sum() / x.m.sum()
        ),
        "padding-counted (each example's sum divided by T, not n_i)": lambda x: float(
            (x.l.sum(1)[x.kept] / x.m.shape[1]).mean()
        ),
        "empty-rows-counted (mean over all B examples, not the B' kept)": lambda x: float(
            x.per_example_mean(x.l).sum() / x.m.shape[0]
        ),
    },
    R_DIST: {
        "scale-missing (R_raw, not R_raw / c)": lambda x: float(x.per_example_mean(x.l).mean()),
        "scale-multiplied (R_raw * c)": lambda x: float(x.per_example_mean(x.l).mean() * x.c),
        "global-token-mean / c": lambda x: float(x.l.sum() / x.m.sum() / x.c),
    },
    R_EX: {
        "epsilon-as-floor (lbar / max(bbar, eps))": lambda x: float(
            (x.per_example_mean(x.l) / np.maximum(x.per_example_mean(x.b), x.epsilon)).mean()
        ),
        "epsilon-missing (lbar / bbar)": lambda x: float(
            (x.per_example_mean(x.l) / x.per_example_mean(x.b)).mean()
        ),
        "ratio-of-means (mean lbar / (mean bbar + eps))": _ratio_of_means_ex,
        "token-level-ratio (mean_t l_t / (b_t + eps))": _token_level_ex,
    },
    R_TOK: {
        "global-token-mean": lambda x: float(x.l.sum() / x.m.sum()),
    },
    R_CC: {
        "kappa-missing (mean ltok / c)": lambda x: float(x.ltok(x.shares()).mean() / x.c),
        "scale-missing (mean ltok / kappa)": lambda x: float(
            (x.ltok(x.shares()) / x.kappa(x.shares())).mean()
        ),
        "kappa-multiplied (mean ltok * kappa / c)": lambda x: float(
            (x.ltok(x.shares()) * x.kappa(x.shares())).mean() / x.c
        ),
        "ratio-of-means (mean ltok / mean kappa / c)": lambda x: float(
            x.ltok(x.shares()).mean() / x.kappa(x.shares()).mean() / x.c
        ),
    },
    BTOK: {},
    KAPPA: {
        "ratio-of-means (mean btok / mean bbar)": lambda x: float(
            ((x.shares() * x.b).sum(1)[x.kept]).mean() / x.per_example_mean(x.b).mean()
        ),
        "empty-rows-counted (sum of kappa / B)": lambda x: float(
            x.kappa(x.shares()).sum() / x.m.shape[0]
        ),
    },
}
for _mistake, _make in SHARE_MISTAKES.items():
    for _name in (R_TOK, R_CC, BTOK, KAPPA):
        VARIANTS[_name][_mistake] = lambda x, make=_make, name=_name: _share_weighted(x, make(x))[
            name
        ]


def diagnose(
    case: LossCase,
    observed: dict[str, float],
    expected: dict[str, float],
    tolerance: Tolerance,
) -> list[str]:
    """One sentence per output that misses the spec but matches a known variant, and one
    per output that is NaN or inf where the spec's value is finite."""
    batch = Batch.of(case)
    # A non-finite output fails every comparison, including those of the relational
    # invariants, which compare the implementation with itself: say so first.
    findings = [
        f"your {name} is {observed[name]} where the spec's is {expected[name]:.9g}: a NaN or "
        "inf fails every comparison (relational invariants included), so fix it first"
        for name in expected
        if name in observed and math.isfinite(expected[name]) and not math.isfinite(observed[name])
    ]
    for name, variants in VARIANTS.items():
        if name not in observed or close(observed[name], expected[name], tolerance, expected[name]):
            continue
        for variant_name, variant in variants.items():
            with np.errstate(all="ignore"):
                try:
                    value = variant(batch)
                except (ZeroDivisionError, ValueError, FloatingPointError):
                    continue
            if not np.isfinite(value) or close(value, expected[name], tolerance, expected[name]):
                continue  # the variant cannot tell itself from the spec on this input
            if close(observed[name], value, tolerance, value):
                findings.append(
                    f"your {name} matches the {variant_name} variant: observed "
                    f"{observed[name]:.9g}, that variant gives {value:.9g}, the spec "
                    f"{expected[name]:.9g}"
                )
    total_off = TOTAL in observed and not close(
        observed[TOTAL], expected[TOTAL], tolerance, expected[TOTAL]
    )
    if total_off:
        for name, weight in batch.weights.items():
            if weight == 0 or name not in observed:
                continue
            without = expected[TOTAL] - weight * expected[name]
            if close(observed[TOTAL], without, tolerance, expected[TOTAL]):
                findings.append(
                    f"your {TOTAL} matches the spec's total without the {name} term "
                    f"(weight {weight}): is that term left out of J?"
                )
    return findings


def diagnose_violation(error: BaseException, calls: list) -> list[str]:
    """``diagnose`` on the call whose outputs the failure shows as observed (the violation's
    ``case``), against the spec's values for that same input; nothing when there is none."""
    from properties.oracle import expected  # the oracle imports sympy: only when needed

    case = getattr(error, "case", None)
    if not isinstance(case, LossCase):
        return []
    call = next((c for c in reversed(calls) if c.case is case and c.values), None)
    if call is None:
        return []
    try:
        reference = expected(case).values
    except ValueError:  # an input the spec rejects (validation): nothing to compare with
        return []
    return diagnose(case, call.values, reference, case_tolerance(case))
