"""Small helpers the invariant modules share."""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import assume

from properties.cases import LossCase
from properties.oracle import expected
from properties.tolerances import Tolerance, case_tolerance
from spec.terms import DIAGNOSTIC_NAMES, LOSS_NAMES, TERM_NAMES, TOTAL_NAME

TERMS = TERM_NAMES
DIAGNOSTICS = DIAGNOSTIC_NAMES
ALL_NAMES = LOSS_NAMES
TOTAL = TOTAL_NAME


def tolerance(case: LossCase, *, alpha: float | None = None) -> Tolerance:
    """The tolerance of one output of ``case`` (properties/tolerances.py)."""
    return case_tolerance(case, alpha=alpha)


def valid_values(row: tuple[float, ...], mask_row: tuple[bool, ...]) -> list[float]:
    return [v for v, valid in zip(row, mask_row, strict=True) if valid]


def kept_rows(case: LossCase) -> list[tuple[list[float], list[float]]]:
    """``(l, b)`` at the valid positions of every kept example."""
    return [
        (valid_values(lr, mr), valid_values(br, mr))
        for lr, br, mr in zip(case.token_nll, case.zfree_token_nll, case.mask, strict=True)
        if any(mr)
    ]


def mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def representable(case: LossCase, gradient: np.ndarray) -> bool:
    """Whether ``case``'s dtype holds every entry of a gradient with respect to token_nll.

    The gradient with respect to a float16 ``token_nll`` is float16: w_ex/(bbar + eps) with
    eps = 1e-8 is far beyond its largest value (65504), whatever the implementation does.
    """
    return float(np.abs(gradient).max(initial=0.0)) < torch.finfo(case.dtype).max / 4


def assume_gradient_representable(case: LossCase) -> None:
    """Skip inputs whose gradient of J (the spec's closed form, MATH.md "Gradients") the
    input dtype cannot hold (``representable``)."""
    assume(representable(case, expected(case).token_gradient))
