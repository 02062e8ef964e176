"""The spec's expected values for a ``LossCase`` (the high-precision oracle of ``spec``)."""

from __future__ import annotations

from functools import lru_cache

from properties.cases import LossCase


@lru_cache(maxsize=4096)
def expected(case: LossCase):  # -> spec.OracleResult
    """``spec.evaluate_details`` on the case's exact values (cached: invariants share cases)."""
    from spec import evaluate_details

    return evaluate_details(case.token_nll, case.zfree_token_nll, case.mask, case.config)
