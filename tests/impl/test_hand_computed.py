"""recon_impl against values worked out by hand from MATH.md.

The batch: example 0 has l = (1, 2, 3), b = (1, 1, 2); example 1 has one valid token,
l = 4, b = 2, then two padded positions holding NaN and inf; example 2 is fully padded.
"""

from __future__ import annotations

import math

import pytest
import torch

from properties.tolerances import output_tolerance
from recon_impl import ReconstructionLossConfig, reconstruction_losses
from tests.impl.configs import TERM_WEIGHT_FIELDS, distinct_weights

NAN, INF = math.nan, math.inf
L = [[1.0, 2.0, 3.0], [4.0, NAN, INF], [NAN, 0.0, -INF]]
B = [[1.0, 1.0, 2.0], [2.0, INF, NAN], [0.0, NAN, 1.0]]
MASK = [[True, True, True], [True, False, False], [False, False, False]]
# every term of the table weighted (a term without a hand-computed value fails total())
ALL_WEIGHTS = distinct_weights((1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0))


def run(alpha: float, epsilon: float = 0.0, scale: float = 2.0, l=L, b=B, **weights):
    config = ReconstructionLossConfig(
        **{**ALL_WEIGHTS, **weights},
        token_weight_alpha=alpha,
        example_inverse_surprisal_epsilon=epsilon,
        zfree_reference_scale=scale,
    )
    token_nll = torch.tensor(l, dtype=torch.float64, requires_grad=True)
    zfree = torch.tensor(b, dtype=torch.float64)
    losses = reconstruction_losses(token_nll, zfree, torch.tensor(MASK), config)
    return losses, token_nll, config


def assert_values(losses, expected: dict[str, float]) -> None:
    tolerance = output_tolerance(torch.float64, length=3, alpha=2.0)
    for name, value in expected.items():
        observed = losses[name].item()
        assert tolerance.allows(observed, value, value), f"{name}: {observed} != {value}"


def total(expected: dict[str, float], config: ReconstructionLossConfig) -> float:
    """J from the hand-computed terms: every term of the table must have one."""
    return sum(
        getattr(config, field) * expected[name] for name, field in TERM_WEIGHT_FIELDS.items()
    )


def test_alpha_one_linear_surprisal_shares() -> None:
    # pi_0 = (1, 1, 2)/4, ltok_0 = 9/4, btok_0 = 3/2, bbar_0 = 4/3, kappa_0 = 9/8;
    # example 1: pi = 1, ltok = 4, btok = 2, bbar = 2, kappa = 1. B' = 2, c = 2, eps = 0.
    losses, _, config = run(alpha=1.0)
    expected = {
        "reconstruction_loss": 3.0,
        "distribution_normalized_reconstruction_loss": 1.5,
        "example_inverse_surprisal_weighted_reconstruction_loss": (2 / (4 / 3) + 4 / 2) / 2,
        "token_weighted_reconstruction_loss": (9 / 4 + 4) / 2,
        "normalized_concentration_corrected_token_weighted_reconstruction_loss": 1.5,
        "token_weighted_base_loss": 1.75,
        "token_concentration_factor": 17 / 16,
    }
    expected["total_reconstruction_loss"] = total(expected, config)
    assert_values(losses, expected)


def test_alpha_two_tempered_shares() -> None:
    # pi_0 = (1, 1, 4)/6, ltok_0 = 15/6, btok_0 = 10/6, kappa_0 = (10/6)/(4/3) = 5/4.
    losses, _, _ = run(alpha=2.0)
    assert_values(
        losses,
        {
            "token_weighted_reconstruction_loss": (15 / 6 + 4) / 2,
            "normalized_concentration_corrected_token_weighted_reconstruction_loss": (
                (15 / 6) / (5 / 4) + 4
            )
            / 2
            / 2,
            "token_weighted_base_loss": (10 / 6 + 2) / 2,
            "token_concentration_factor": (5 / 4 + 1) / 2,
        },
    )


def test_alpha_zero_uniform_shares() -> None:
    losses, _, _ = run(alpha=0.0)
    assert_values(
        losses,
        {
            "token_weighted_reconstruction_loss": 3.0,  # = R_raw
            "normalized_concentration_corrected_token_weighted_reconstruction_loss": 1.5,  # R_dist
            "token_weighted_base_loss": (4 / 3 + 2) / 2,  # = mean bbar
            "token_concentration_factor": 1.0,
        },
    )


def test_alpha_zero_gives_zero_surprisal_tokens_their_share() -> None:
    # 0^0 = 1: b = (0, 1, 2) still gives uniform shares at alpha = 0, and zero share at 1.
    b = [[0.0, 1.0, 2.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    losses, _, _ = run(alpha=0.0, epsilon=0.5, b=b)
    assert_values(losses, {"token_weighted_reconstruction_loss": 3.0})
    losses, _, _ = run(alpha=1.0, epsilon=0.5, b=b)
    assert_values(losses, {"token_weighted_reconstruction_loss": ((2 + 6) / 3 + 4) / 2})


def test_all_zero_surprisal_row_falls_back_to_uniform_shares() -> None:
    b = [[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    losses, _, _ = run(alpha=3.0, epsilon=0.5, b=b)
    assert_values(
        losses,
        {
            "token_weighted_reconstruction_loss": (2 + 4) / 2,
            "token_concentration_factor": 1.0,  # kappa = 1 where bbar = 0
            "example_inverse_surprisal_weighted_reconstruction_loss": (2 / 0.5 + 4 / 2.5) / 2,
        },
    )


def test_z_free_baseline() -> None:
    # l = b on valid positions, c = mean bbar = (4/3 + 2)/2 = 5/3.
    losses, _, _ = run(alpha=1.7, epsilon=0.0, scale=5 / 3, l=B)
    assert_values(
        losses,
        {
            "distribution_normalized_reconstruction_loss": 1.0,
            "normalized_concentration_corrected_token_weighted_reconstruction_loss": 1.0,
            "example_inverse_surprisal_weighted_reconstruction_loss": 1.0,
            "token_weighted_reconstruction_loss": losses.token_weighted_base_loss.item(),
        },
    )
    losses, _, _ = run(alpha=1.7, epsilon=0.25, scale=5 / 3, l=B)
    assert_values(
        losses,
        {
            "example_inverse_surprisal_weighted_reconstruction_loss": (
                (4 / 3) / (4 / 3 + 0.25) + 2 / 2.25
            )
            / 2
        },
    )


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0])
def test_gradient_closed_form(alpha: float) -> None:
    # dJ/dl_it = (1/B') [ (w_raw + w_dist/c + w_ex/(bbar_i+eps)) / n_i
    #                    + (w_tok + w_cc/(c kappa_i)) pi_it ]
    epsilon, c = 0.5, 2.0
    losses, token_nll, _ = run(alpha=alpha, epsilon=epsilon, scale=c)
    losses.total_reconstruction_loss.backward()
    pi_0 = torch.tensor([1.0, 1.0, 2.0], dtype=torch.float64) ** alpha
    pi_0 = pi_0 / pi_0.sum()
    kappa_0 = float((pi_0 * torch.tensor([1.0, 1.0, 2.0], dtype=torch.float64)).sum()) / (4 / 3)
    expected = torch.zeros(3, 3, dtype=torch.float64)
    for row, n, bbar, kappa, shares in ((0, 3, 4 / 3, kappa_0, pi_0), (1, 1, 2.0, 1.0, [1.0])):
        uniform = (1.0 + 2.0 / c + 3.0 / (bbar + epsilon)) / n
        shared = 4.0 + 5.0 / (c * kappa)
        for t in range(n):
            expected[row, t] = (uniform + shared * float(shares[t])) / 2
    rtol = output_tolerance(torch.float64, length=3, alpha=alpha).rtol
    torch.testing.assert_close(token_nll.grad, expected, rtol=rtol, atol=0.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_alpha_too_small_for_the_dtype_still_gives_zero_surprisal_no_share(dtype) -> None:
    # 1e-300 rounds to 0 in float32, but 0^(1e-300) is 0, not 0^0 = 1.
    config = ReconstructionLossConfig(token_weighted_weight=1.0, token_weight_alpha=1e-300)
    l = torch.tensor([[1.0, 5.0]], dtype=dtype)
    b = torch.tensor([[2.0, 0.0]], dtype=dtype)
    losses = reconstruction_losses(l, b, torch.ones(1, 2, dtype=torch.bool), config)
    assert losses.token_weighted_reconstruction_loss.item() == 1.0
    assert losses.token_concentration_factor.item() == 2.0


def test_tiny_epsilon_with_zero_loss_and_zero_surprisal_is_zero() -> None:
    # lbar = 0 and bbar = 0: 0 / (0 + 5e-324) = 0, while 0 * (1 / 5e-324) = 0 * inf = NaN.
    config = ReconstructionLossConfig(example_inverse_surprisal_epsilon=5e-324)
    l = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
    b = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    losses = reconstruction_losses(l, b, torch.ones(2, 1, dtype=torch.bool), config)
    value = losses.example_inverse_surprisal_weighted_reconstruction_loss.item()
    assert value == pytest.approx(1.0, rel=1e-15)
