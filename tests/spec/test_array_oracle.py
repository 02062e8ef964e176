"""``spec.array_oracle`` against ``spec.oracle`` (50 digits): within its stated error bound on
every input the conformance suite draws, the same errors, and fast at training sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings

import spec
from properties.cases import LossCase
from properties.strategies import DEFAULT_DOMAIN, loss_cases
from spec.array_oracle import evaluate_arrays, output_magnitudes, relative_error_bound
from spec.oracle import evaluate_details
from spec.statistics import STATISTIC_NAMES

#: below float64's smallest normal number a rounding is absolute (the module docstring)
UNDERFLOW = 1e-300


def _arguments(case: LossCase) -> tuple:
    return (*case.tensors(), case.config)


def _close(observed: np.ndarray, exact: np.ndarray, magnitude: np.ndarray, bound: float) -> bool:
    return bool(np.all(np.abs(observed - exact) <= bound * np.abs(magnitude) + UNDERFLOW))


@settings(max_examples=150, deadline=None)
@given(loss_cases(DEFAULT_DOMAIN, dtypes=(torch.float64, torch.float32)))
@example(  # alpha = 1000 with b up to 10: b^alpha overflows float64 unless scaled by max b
    LossCase(((1.0, 2.0, 3.0),), ((10.0, 0.5, 9.9),), ((True, True, True),)).with_config(
        token_weight_alpha=1000.0, token_weighted_weight=1.0
    )
)
@example(  # a zero-base row beside an ordinary one, alpha 0 (0^0 = 1), a dropped row
    LossCase(
        ((1.0, 2.0), (3.0, 4.0), (5.0, 6.0)),
        ((0.0, 0.0), (0.0, 2.0), (1.0, 1.0)),
        ((True, True), (True, True), (False, False)),
    ).with_config(
        token_weight_alpha=0.0, normalized_concentration_corrected_token_weighted_weight=1.0
    )
)
def test_agrees_with_the_high_precision_oracle_within_its_bound(case: LossCase) -> None:
    if not case.has_valid_token:
        with pytest.raises(ValueError, match="mask must select at least one valid token"):
            evaluate_arrays(*_arguments(case))
        return
    exact = evaluate_details(*_arguments(case))
    fast = evaluate_arrays(*_arguments(case))
    magnitudes = output_magnitudes(*_arguments(case))
    bound = relative_error_bound(case.shape[1], case.config.token_weight_alpha)
    for name, value in exact.values.items():
        assert _close(fast.values[name], value, magnitudes[name], bound), name
    for name in (*STATISTIC_NAMES, "shares", "token_gradient"):
        exact_array, fast_array = getattr(exact, name), getattr(fast, name)
        assert _close(fast_array, exact_array, exact_array, bound), name
    for name, gradient in exact.term_gradients.items():
        assert _close(fast.term_gradients[name], gradient, gradient, bound), name
    assert np.array_equal(fast.kept, exact.kept) and fast.kept_count == exact.kept_count


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda l, b, m: (l, b.neg(), m), "zfree_token_nll must be >= 0"),
        (lambda l, b, m: (l.fill_(float("inf")), b, m), "token_nll must be finite"),
        (lambda l, b, m: (l, b, m.zero_()), "at least one valid token"),
        (lambda l, b, m: (l[:, :1], b, m), "must have the same shape"),
    ],
)
def test_rejects_what_the_high_precision_oracle_rejects(change, message) -> None:
    inputs = (torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 3, dtype=torch.bool))
    config = spec.config_mapping(raw_weight=1.0)
    for evaluate in (evaluate_details, evaluate_arrays):
        with pytest.raises(ValueError, match=message):
            evaluate(*change(*(x.clone() for x in inputs)), config)


def test_epsilon_zero_with_a_zero_base_row_is_an_error() -> None:
    config = spec.config_mapping(raw_weight=1.0, example_inverse_surprisal_epsilon=0.0)
    with pytest.raises(ValueError, match="example_inverse_surprisal_epsilon = 0 needs bbar_i > 0"):
        evaluate_arrays([[1.0, 2.0]], [[0.0, 0.0]], [[True, True]], config)


def test_a_long_row_agrees_with_its_closed_form() -> None:
    """At T = 65537 (past a 16-bit count) every statistic has a closed form to compare with:
    l = 1 + (t mod 3), b = 2 everywhere, so every share is 1/T and kappa is 1."""
    length = 65537
    loss = (1.0 + torch.arange(length, dtype=torch.float64) % 3).reshape(1, length)
    base = torch.full((1, length), 2.0, dtype=torch.float64)
    config = spec.config_mapping(
        raw_weight=1.0, token_weighted_weight=1.0, example_inverse_surprisal_epsilon=0.0
    )
    result = evaluate_arrays(loss, base, torch.ones(1, length, dtype=torch.bool), config)
    lbar = float(loss.mean())
    bound = relative_error_bound(length, 1.0)
    assert abs(result.values["reconstruction_loss"] - lbar) <= bound * lbar
    assert abs(result.values["token_weighted_reconstruction_loss"] - lbar) <= bound * lbar
    assert (
        abs(result.values["example_inverse_surprisal_weighted_reconstruction_loss"] - lbar / 2)
        <= bound
    )
    assert np.allclose(result.shares, 1 / length, rtol=bound, atol=0)
    assert np.allclose(result.token_gradient, 2 / length, rtol=bound, atol=0)
