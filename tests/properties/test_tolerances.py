"""The tolerances: the underflow allowance covers what float32 cannot hold, and no more."""

from __future__ import annotations

import dataclasses

import torch
from hypothesis import given, settings

from properties.cases import LossCase
from properties.default_target import reconstruction_losses
from properties.invariants.edge_cases import EDGE_CASES
from properties.oracle import expected
from properties.strategies import loss_cases
from properties.tolerances import (
    case_tolerance,
    gradient_tolerance,
    output_tolerance,
    share_amplification,
    underflow_unit,
)

#: properties of every drawn case: random, so that each seed (CI runs several) draws anew
SOME = settings(max_examples=200, deadline=None, database=None)
R_TOK = "token_weighted_reconstruction_loss"


def test_underflow_unit_is_half_the_smallest_subnormal() -> None:
    for dtype in (torch.float32, torch.float64):
        smallest = torch.tensor(1.0, dtype=dtype)
        while (half := smallest / 2) > 0:
            smallest = half
        assert underflow_unit(dtype) == smallest.item() / 2


@SOME
@given(loss_cases())
def test_the_allowance_stays_far_below_every_drawn_output(case: LossCase) -> None:
    # tolerances.py: atol < 1e-33 in float32 on the strategies' domain, nothing in float64
    atol = case_tolerance(case).atol
    assert atol < (1e-33 if case.dtype != torch.float64 else 1e-300)
    assert (
        case_tolerance(case).rtol
        == output_tolerance(
            case.dtype, length=case.shape[1], alpha=case.config.token_weight_alpha
        ).rtol
    )


def test_amplification_bounds_each_share_weighted_output() -> None:
    case = EDGE_CASES["tail-share-float32"].case
    cfg = case.config
    # S_l = 1 (one kept row, |l| sums to 1), S_b = 24.5, T = 5
    inverse_scale = 1 + 1 / cfg.zfree_reference_scale
    share_weights = 1 + cfg.token_weighted_weight
    share_weights += cfg.normalized_concentration_corrected_token_weighted_weight
    assert share_amplification(case) == 1 + 5 + 24.5 + share_weights * 1.0 * inverse_scale


def test_subnormal_shares_are_allowed_their_absolute_error_only() -> None:
    case = EDGE_CASES["subnormal-tail-shares"].case
    exact = expected(case).values[R_TOK]
    assert 0 < exact < torch.finfo(torch.float32).smallest_normal  # a subnormal output
    tolerance = case_tolerance(case)
    # The bundled float32 computation is within the allowance ...
    token_nll, zfree, mask = case.tensors()
    observed = reconstruction_losses(token_nll, zfree, mask, case.config)[R_TOK].item()
    assert tolerance.allows(observed, exact, exact)
    # ... which is some thousand subnormal steps (a bound over all eight outputs), far
    # from a licence to return 0.
    assert tolerance.atol < exact / 10
    assert not tolerance.allows(0.0, exact, exact)
    # A normal-sized output of the same shape gets no practical slack from it.
    bigger = dataclasses.replace(case, dtype=torch.float32)
    assert case_tolerance(bigger).atol < 1e-40


def test_gradient_allowance_is_one_rounding_to_the_input_dtype_below_its_normals() -> None:
    case = EDGE_CASES["subnormal-float16-gradient"].case
    tolerance = gradient_tolerance(torch.float16, length=7, alpha=1.0)
    assert tolerance.atol == underflow_unit(torch.float16) < 3e-8
    token_nll, zfree, mask = case.tensors(requires_grad=True)
    reconstruction_losses(token_nll, zfree, mask, case.config).total_reconstruction_loss.backward()
    exact = 0.001 / 35  # w_cc / (c kappa) * pi / B' with every share 1/7, 5 examples
    assert exact < torch.finfo(torch.float16).smallest_normal
    observed = token_nll.grad.double()
    assert tolerance.allows(float((observed - exact).abs().max()), 0.0, exact)
    # float32 and float64 gradients never need it: their largest entry is a normal number.
    assert gradient_tolerance(torch.float32, length=7, alpha=1.0).atol < 1e-45
