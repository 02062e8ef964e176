"""Small helpers the invariant modules share."""

from __future__ import annotations

import math

import torch
from hypothesis import assume

from properties.cases import LossCase, MaskRows, Rows
from properties.tolerances import Tolerance, case_tolerance
from recon_impl import RECONSTRUCTION_LOSS_NAMES, RECONSTRUCTION_TERM_NAMES

TERMS = RECONSTRUCTION_TERM_NAMES
DIAGNOSTICS = ("token_weighted_base_loss", "token_concentration_factor")
ALL_NAMES = RECONSTRUCTION_LOSS_NAMES
TOTAL = "total_reconstruction_loss"


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


def transpose_rows(rows: Rows | MaskRows) -> list[list]:
    return [list(row) for row in rows]


def gradient_bound(case: LossCase) -> float:
    """An upper bound of |dJ/dl_it| from the closed form (MATH.md, "Gradients").

    With pi_it <= 1, kappa_i >= 1, n_i >= 1 and B' >= 1:
    dJ/dl_it <= w_raw + w_dist/c + w_ex/min_i(bbar_i + eps) + w_tok + w_cc/c.
    """
    cfg = case.config
    rows = kept_rows(case)
    smallest = min(mean(b) for _, b in rows) + cfg.example_inverse_surprisal_epsilon
    inverse = cfg.example_inverse_surprisal_weight / smallest if smallest > 0 else math.inf
    c = cfg.zfree_reference_scale
    return (
        cfg.raw_weight
        + cfg.distribution_normalized_weight / c
        + inverse
        + cfg.token_weighted_weight
        + cfg.normalized_concentration_corrected_token_weighted_weight / c
    )


def assume_gradient_representable(case: LossCase) -> None:
    """Skip inputs whose gradient the input dtype cannot hold.

    The gradient with respect to a float16 ``token_nll`` is float16: w_ex/(bbar + eps) with
    eps = 1e-8 is far beyond its largest value (65504), whatever the implementation does.
    """
    assume(gradient_bound(case) < torch.finfo(case.dtype).max / 4)
