"""The spec's expected values for a ``LossCase`` (the high-precision oracle of ``spec``)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import torch

from properties.cases import LossCase
from spec.terms import TERMS, TOTAL_NAME


@lru_cache(maxsize=4096)
def expected(case: LossCase):  # -> spec.OracleResult
    """``spec.evaluate_details`` on the case's exact values (cached: invariants share cases)."""
    from spec import evaluate_details

    return evaluate_details(case.token_nll, case.zfree_token_nll, case.mask, case.config)


def expected_mix_gradient(
    case: LossCase, coefficients: Mapping[str, float]
) -> tuple[torch.Tensor, float]:
    """d(sum_k a_k R_k + a_J J)/dl = sum_k (a_k + a_J w_k) dR_k/dl (MATH.md, "Gradients") for
    the coefficients by output name (a term or J; any other name is ignored), in float64, and
    the largest entry of sum_k (|a_k| + |a_J| w_k) |dR_k/dl|: the magnitude its rounding is
    relative to, whatever cancels between signed coefficients."""
    oracle = expected(case)
    a_total = coefficients.get(TOTAL_NAME, 0.0)
    mix = torch.zeros(case.shape, dtype=torch.float64)
    scale = torch.zeros(case.shape, dtype=torch.float64)
    for term in TERMS:
        weight = getattr(case.config, term.weight_field)
        a = coefficients.get(term.name, 0.0)
        gradient = torch.tensor(oracle.term_gradients[term.name], dtype=torch.float64)
        mix += (a + a_total * weight) * gradient
        scale += (abs(a) + abs(a_total) * weight) * gradient.abs()
    return mix, float(scale.max()) if scale.numel() else 0.0
