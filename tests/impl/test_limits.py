"""Where the stack's domain ends, and what it does there.

* ``torch.func.vmap`` with ``validate=True``: a ``ValueError`` (the checks branch on the
  data); with ``validate=False`` it runs (``test_stack.py``).
* float32 inputs near float32's largest number: the values of the float64 computation
  (rounded to float32), or a ``ValueError`` where a per-example sum overflows float32;
  never a silent NaN.
* ``estimate_zfree_reference_scale`` on float64 values near 1.8e308: the exact mean, or
  a ``ValueError`` where a float64 sum overflows.
* meta tensors: ``validate=False`` gives the outputs' shapes, dtypes and a gradient;
  ``validate=True`` a ``ValueError`` (no values to check).
* float8 inputs: a ``ValueError`` naming the argument, with or without validation.
"""

from __future__ import annotations

import math

import pytest
import torch

from properties.tolerances import gradient_tolerance, output_tolerance
from recon_impl import (
    RECONSTRUCTION_LOSS_NAMES,
    ReconstructionLossConfig,
    estimate_zfree_reference_scale,
    reconstruction_losses,
)
from tests.impl.configs import EVERY_TERM_CONFIG

FLOAT32_MAX = torch.finfo(torch.float32).max
FLOAT8 = [getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name)]


def test_vmap_with_validation_is_a_clear_error() -> None:
    mask = torch.ones(1, 4, dtype=torch.bool)

    def row_total(row: torch.Tensor) -> torch.Tensor:
        losses = reconstruction_losses(row[None], row[None], mask, EVERY_TERM_CONFIG)
        return losses.total_reconstruction_loss

    rows = torch.rand(3, 4) + 0.5
    with pytest.raises(ValueError, match=r"validate=True cannot run under torch\.func\.vmap"):
        torch.func.vmap(row_total)(rows)
    # also inside another transform, and with vmap outermost
    with pytest.raises(ValueError, match=r"torch\.func\.vmap"):
        torch.func.vmap(torch.func.grad(row_total))(rows)
    with pytest.raises(ValueError, match=r"torch\.func\.vmap"):
        torch.func.grad(lambda r: torch.func.vmap(row_total)(r).sum())(rows)
    # torch.func.grad alone reads the data like eager code: validation runs
    with pytest.raises(ValueError, match=r"zfree_token_nll must be >= 0"):
        torch.func.grad(row_total)(-rows[0])


# Inputs near float32's largest number whose per-example sums do not overflow: one valid
# token per example, or tokens whose sum stays below the maximum.
NEAR_MAX_CASES = [
    ([[3e38], [1.0]], [[3e38], [2.0]]),
    ([[3e38, 0.0], [1e38, 1e38]], [[1.0, 3e38], [3e38, 0.0]]),
    ([[1.5e38, 1.5e38]], [[1.6e38, 1.6e38]]),
]


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 2.0, 1e3])
@pytest.mark.parametrize(("l", "b"), NEAR_MAX_CASES)
def test_float32_near_its_maximum_gives_the_float64_values(l, b, alpha: float) -> None:
    config = ReconstructionLossConfig(
        raw_weight=1e-39,  # keeps the total finite: 3e38 * 4 terms would overflow float32
        token_weighted_weight=1e-39,
        token_weight_alpha=alpha,
        example_inverse_surprisal_epsilon=1.0,
    )
    l32 = torch.tensor(l, dtype=torch.float32, requires_grad=True)
    b32 = torch.tensor(b, dtype=torch.float32)
    mask = torch.ones(l32.shape, dtype=torch.bool)
    losses = reconstruction_losses(l32, b32, mask, config)
    l64 = l32.detach().double().requires_grad_()
    exact = reconstruction_losses(l64, b32.double(), mask, config)
    tolerance = output_tolerance(torch.float32, length=l32.shape[1], alpha=alpha)
    for name in RECONSTRUCTION_LOSS_NAMES:
        observed, expected = losses[name].item(), exact[name].item()
        if abs(expected) > FLOAT32_MAX:  # beyond float32: its rounding is inf
            assert observed == math.copysign(math.inf, expected), name
        else:
            assert tolerance.allows(observed, expected, expected), (name, observed, expected)
    losses.total_reconstruction_loss.backward()
    exact.total_reconstruction_loss.backward()
    rtol = gradient_tolerance(torch.float32, length=l32.shape[1], alpha=alpha).rtol
    torch.testing.assert_close(l32.grad.double(), l64.grad, rtol=rtol, atol=0.0)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 2.0, 1e3])
@pytest.mark.parametrize(
    ("l", "b", "argument"),
    [
        ([[3e38, 3e38]], [[1.0, 1.0]], "token_nll"),
        ([[1.0, 1.0]], [[3e38, 3e38]], "zfree_token_nll"),
        ([[2.0, 1.0], [2e38, 2e38]], [[1.0, 1.0], [1.0, 1.0]], "token_nll"),
    ],
)
def test_float32_sums_past_its_maximum_are_an_error(l, b, argument: str, alpha: float) -> None:
    config = ReconstructionLossConfig(token_weighted_weight=1.0, token_weight_alpha=alpha)
    tensors = torch.tensor(l), torch.tensor(b), torch.ones(len(l), len(l[0]), dtype=torch.bool)
    with pytest.raises(ValueError, match=rf"^{argument} is too large .* float32 .* float64"):
        reconstruction_losses(*tensors, config)


@pytest.mark.parametrize("scale", [1e-300, 1e-46])
def test_a_nan_that_float32_arithmetic_would_return_is_an_error(scale: float) -> None:
    # c rounds to 0 in float32: R_dist = R_raw / c is 0/0 where R_raw = 0
    config = ReconstructionLossConfig(zfree_reference_scale=scale)
    l, b, mask = torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"distribution_normalized_reconstruction_loss.* NaN"):
        reconstruction_losses(l, b, mask, config)
    # in float64 the same config is fine
    losses = reconstruction_losses(l.double(), b.double(), mask, config)
    assert losses.distribution_normalized_reconstruction_loss.item() == 0.0


def test_the_estimate_near_float64s_maximum() -> None:
    big = 1.7e308
    one, single = torch.ones(1, 1, dtype=torch.bool), torch.tensor([[big]], dtype=torch.float64)
    # one valid value per example, padding beside it: the exact mean
    b = torch.tensor([[big, big]], dtype=torch.float64)
    assert estimate_zfree_reference_scale([(b, torch.tensor([[True, False]]))]) == big
    assert (
        estimate_zfree_reference_scale([(torch.tensor([[big]], dtype=torch.float64), one)]) == big
    )
    # a float64 sum that overflows: per example, over a batch's examples, over batches
    for batches, pattern in [
        ([(b, torch.ones(1, 2, dtype=torch.bool))], r"batch 0: .* example 0's valid positions"),
        ([(b.t().contiguous(), torch.ones(2, 1, dtype=torch.bool))], r"batch 0: .* bbar_i"),
        ([(single, one)] * 2, r"batch 1: the running sum"),
    ]:
        with pytest.raises(ValueError, match=rf"{pattern}.* overflows"):
            estimate_zfree_reference_scale(batches)


def test_meta_tensors() -> None:
    l = torch.empty(3, 5, device="meta", requires_grad=True)
    b = torch.empty(3, 5, device="meta", dtype=torch.float16)
    mask = torch.empty(3, 5, device="meta", dtype=torch.bool)
    for alpha in (0.0, 1.0, 2.0):
        config = ReconstructionLossConfig(token_weighted_weight=1.0, token_weight_alpha=alpha)
        losses = reconstruction_losses(l, b, mask, config, validate=False)
        for value in losses.values():
            assert value.device.type == "meta" and value.shape == () and value.dtype == l.dtype
        losses.total_reconstruction_loss.backward()
        assert l.grad.device.type == "meta" and l.grad.shape == l.shape
    with pytest.raises(ValueError, match=r"meta tensors hold none: pass validate=False"):
        reconstruction_losses(l, b, mask, ReconstructionLossConfig())


@pytest.mark.skipif(not FLOAT8, reason="this torch has no float8 dtypes")
@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("argument", ["token_nll", "zfree_token_nll"])
def test_float8_inputs_are_an_error(dtype: torch.dtype, validate: bool, argument: str) -> None:
    ones = torch.ones(2, 3)
    l, b = (ones.to(dtype), ones) if argument == "token_nll" else (ones, ones.to(dtype))
    pattern = rf"^{argument} must be float16, bfloat16, float32 or float64, got {dtype}"
    with pytest.raises(ValueError, match=pattern):
        reconstruction_losses(l, b, ones.bool(), EVERY_TERM_CONFIG, validate=validate)
