"""``spec.evaluate`` against ``recon_impl.reconstruction_losses`` on random float64 inputs.

The oracle is exact to float64 rounding; recon_impl computes in float64. They must agree
to 1e-9 relative on every output, and the oracle's closed-form ``token_gradient`` must
agree with recon_impl's autograd gradient of ``total_reconstruction_loss``.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

import spec
from recon_impl import ReconstructionLossConfig, reconstruction_losses
from spec.terms import WEIGHT_FIELDS

RELATIVE = 1e-9
ALPHAS = (0.0, 0.5, 1.0, 2.0, 7.3)
EPSILONS = (0.0, 1e-8, 0.1, 1.0, 1e3)
SCALES = (0.3, 1.0, 4.2)
SEEDS = (0, 1, 2, 3)


def _random_batch(
    seed: int, *, positive_b: bool, high: float = 10.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A ragged batch: B, T in 1..8, some empty rows, NaN/inf at padded positions."""
    rng = random.Random(seed)
    rows, width = rng.randint(1, 8), rng.randint(1, 8)
    nll = torch.empty(rows, width, dtype=torch.float64)
    base = torch.empty(rows, width, dtype=torch.float64)
    mask = torch.zeros(rows, width, dtype=torch.bool)
    for r in range(rows):
        kind = rng.random()
        if kind < 0.15:
            valid = []  # an empty row: dropped
        elif kind < 0.55:
            valid = list(range(rng.randint(1, width)))  # right padding
        else:
            valid = [t for t in range(width) if rng.random() < 0.6]  # holes anywhere
        for t in range(width):
            if t in valid:
                mask[r, t] = True
                nll[r, t] = rng.uniform(0.0, high)
                low = 0.01 if positive_b else 0.0
                # Some exact zeros of b where allowed: 0^alpha and 0^0 matter.
                zero = not positive_b and rng.random() < 0.15
                base[r, t] = 0.0 if zero else rng.uniform(low, high)
            else:
                nll[r, t] = rng.choice((math.nan, math.inf, -math.inf, 1e300))
                base[r, t] = rng.choice((math.nan, math.inf, -math.inf, -5.0))
    if not mask.any():
        mask[0, 0] = True
        nll[0, 0], base[0, 0] = 1.5, 0.75
    return nll, base, mask


def _random_config(
    seed: int, alpha: float, epsilon: float, scale: float
) -> ReconstructionLossConfig:
    rng = random.Random(1000 + seed)
    weights = {name: rng.choice((0.0, rng.uniform(0.0, 3.0))) for name in WEIGHT_FIELDS}
    return ReconstructionLossConfig(
        **weights,
        token_weight_alpha=alpha,
        example_inverse_surprisal_epsilon=epsilon,
        zfree_reference_scale=scale,
    )


def _assert_close(actual: float, expected: float, what: str) -> None:
    assert math.isclose(actual, expected, rel_tol=RELATIVE, abs_tol=1e-300), (
        f"{what}: recon_impl {actual!r} vs spec {expected!r} "
        f"(relative {abs(actual - expected) / max(abs(expected), 1e-300):.3g})"
    )


def _compare(nll: torch.Tensor, base: torch.Tensor, mask: torch.Tensor, config) -> None:
    token_nll = nll.clone().requires_grad_(True)
    zfree_token_nll = base.clone().requires_grad_(True)
    losses = reconstruction_losses(token_nll, zfree_token_nll, mask, config)
    oracle = spec.evaluate_details(nll, base, mask, config)
    assert list(losses.keys()) == list(oracle.values.keys())
    for name, expected in oracle.values.items():
        _assert_close(losses[name].item(), expected, name)
    losses.total_reconstruction_loss.backward()
    # MATH.md, "Gradients": the z-free losses are a fixed reference.
    assert zfree_token_nll.grad is None, "a gradient reached zfree_token_nll"
    gradient = token_nll.grad.numpy()
    assert np.all(gradient[~mask.numpy()] == 0.0), "gradient at padded positions"
    for (r, t), expected in np.ndenumerate(oracle.token_gradient):
        if mask[r, t]:
            _assert_close(float(gradient[r, t]), float(expected), f"dJ/dl[{r}, {t}]")


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_batches(seed: int, alpha: float, epsilon: float, scale: float) -> None:
    # epsilon = 0 needs bbar_i > 0 on every kept example: strictly positive b there.
    nll, base, mask = _random_batch(seed * 7919 + int(alpha * 10), positive_b=epsilon == 0.0)
    _compare(nll, base, mask, _random_config(seed, alpha, epsilon, scale))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("alpha", (50.0, 1000.0))
def test_large_alpha_and_large_losses(seed: int, alpha: float) -> None:
    # b^alpha overflows float64 here; recon_impl takes b/b_max first, the oracle uses mpmath.
    nll, base, mask = _random_batch(500 + seed, positive_b=False, high=1e4)
    _compare(nll, base, mask, _random_config(seed, alpha, 0.5, 2.0))


def test_all_zero_row_and_alpha_zero_with_zeros() -> None:
    nll = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [0.5, 0.25, 9.0]], dtype=torch.float64)
    base = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 2.0], [3.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True], [True, True, True], [True, True, False]])
    for alpha in (0.0, 0.5, 1.0, 3.0):
        config = ReconstructionLossConfig(1.0, 0.5, 0.25, 2.0, 1.5, alpha, 0.2, 1.1)
        _compare(nll, base, mask, config)


def test_integer_mask() -> None:
    nll, base, mask = _random_batch(77, positive_b=False)
    config = _random_config(77, 1.0, 0.1, 1.0)
    expected = spec.evaluate(nll, base, mask, config)
    losses = reconstruction_losses(nll, base, mask.to(torch.int64), config)
    for name, value in expected.items():
        _assert_close(losses[name].item(), value, name)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16))
def test_narrow_dtypes_are_read_exactly(dtype: torch.dtype) -> None:
    # The oracle reads a narrow tensor exactly; recon_impl computes in float32 there, so
    # the two agree to float32 accuracy (not 1e-9).
    nll, base, mask = _random_batch(11, positive_b=False)
    nll, base = nll.to(dtype), base.to(dtype)
    config = _random_config(11, 2.0, 0.1, 1.0)
    expected = spec.evaluate(nll, base, mask, config)
    exact = spec.evaluate(nll.to(torch.float64), base.to(torch.float64), mask, config)
    assert expected == exact
    losses = reconstruction_losses(nll, base, mask, config)
    for name, value in expected.items():
        assert math.isclose(losses[name].item(), value, rel_tol=1e-5), name


_NAN, _INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("nll", "base", "mask", "epsilon"),
    [
        ([[1.0, _NAN]], [[1.0, 1.0]], [[True, True]], 0.1),  # NaN l at a valid position
        ([[1.0, 2.0]], [[_INF, 1.0]], [[True, True]], 0.1),  # inf b at a valid position
        ([[1.0, 2.0]], [[1.0, -0.5]], [[True, True]], 0.1),  # negative b
        ([[1.0, 2.0]], [[1.0, 1.0]], [[False, False]], 0.1),  # no valid token
        ([[1.0, 2.0], [3.0, 4.0]], [[0.0, 0.0], [1.0, 1.0]], [[True, True]] * 2, 0.0),
    ],
    ids=["nan-l", "inf-b", "negative-b", "no-valid-token", "eps0-zero-bbar"],
)
def test_both_reject_the_same_data(nll, base, mask, epsilon) -> None:
    config = ReconstructionLossConfig(example_inverse_surprisal_epsilon=epsilon)
    tensors = (
        torch.tensor(nll, dtype=torch.float64),
        torch.tensor(base, dtype=torch.float64),
        torch.tensor(mask),
    )
    with pytest.raises(ValueError):
        reconstruction_losses(*tensors, config)
    with pytest.raises(ValueError):
        spec.evaluate(*tensors, config)
