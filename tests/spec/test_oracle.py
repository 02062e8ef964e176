"""The oracle, ``spec.evaluate`` and ``spec.evaluate_details``.

Hand-computed examples, the special cases of MATH.md, every ``ValueError`` rule, the
input types, precision, and the closed-form gradient against sympy's derivative of J.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import sympy as sp
import torch

import spec
from spec.definitions import LOSS_NAMES, ExplicitBatch, loss_terms
from spec.oracle import batch_function, example_function
from spec.parameters import PARAMETERS
from spec.terms import TERMS, WEIGHT_FIELDS, distinct_weights

NAN, INF = math.nan, math.inf


def config(**changes: float) -> dict[str, float]:
    values = spec.config_mapping(
        raw_weight=1.0,
        distribution_normalized_weight=0.5,
        example_inverse_surprisal_weight=0.25,
        token_weighted_weight=1.0,
        normalized_concentration_corrected_token_weighted_weight=0.5,
        token_weight_alpha=2.0,
        example_inverse_surprisal_epsilon=0.1,
        zfree_reference_scale=1.5,
    )
    values.update(changes)
    return values


# Two examples, the second with one padded position (NaN there).
NLL = [[2.0, 4.0, 1.0], [0.5, 1.5, NAN]]
BASE = [[1.0, 3.0, 0.5], [1.0, 2.0, NAN]]
MASK = [[True, True, True], [True, True, False]]


def test_hand_computed_example() -> None:
    # alpha = 2. Row 0: b^2 = (1, 9, 1/4), Z = 41/4, pi = (4, 36, 1)/41.
    # Row 1: b^2 = (1, 4), pi = (1, 4)/5.
    lbar = (Fraction(7, 3), Fraction(1))
    bbar = (Fraction(3, 2), Fraction(3, 2))
    ltok = (Fraction(4 * 2 + 36 * 4 + 1 * 1, 41), Fraction(13, 10))
    btok = (Fraction(225, 82), Fraction(9, 5))
    kappa = (btok[0] / bbar[0], btok[1] / bbar[1])
    assert kappa == (Fraction(75, 41), Fraction(6, 5))
    eps, c = Fraction(1, 10), Fraction(3, 2)
    raw = sum(lbar) / 2
    dist = raw / c
    ex = sum(x / (y + eps) for x, y in zip(lbar, bbar, strict=True)) / 2
    tok = sum(ltok) / 2
    cc = sum(x / k for x, k in zip(ltok, kappa, strict=True)) / 2 / c
    total = raw + Fraction(1, 2) * dist + Fraction(1, 4) * ex + tok + Fraction(1, 2) * cc
    expected = {
        "reconstruction_loss": raw,
        "distribution_normalized_reconstruction_loss": dist,
        "example_inverse_surprisal_weighted_reconstruction_loss": ex,
        "token_weighted_reconstruction_loss": tok,
        "normalized_concentration_corrected_token_weighted_reconstruction_loss": cc,
        "token_weighted_base_loss": sum(btok) / 2,
        "token_concentration_factor": sum(kappa) / 2,
        # every other weight is 0 in this config
        "total_reconstruction_loss": total,
    }
    assert raw == Fraction(5, 3) and ex == Fraction(25, 24)

    result = spec.evaluate_details(NLL, BASE, MASK, config())
    assert list(result.values) == list(LOSS_NAMES)
    assert {name: result.values[name] for name in expected} == {
        name: float(x) for name, x in expected.items()
    }
    shares = [
        [Fraction(4, 41), Fraction(36, 41), Fraction(1, 41)],
        [Fraction(1, 5), Fraction(4, 5), 0],
    ]
    assert result.shares.tolist() == [[float(x) for x in row] for row in shares]
    assert result.kappa.tolist() == [float(k) for k in kappa]
    assert result.lbar.tolist() == [float(x) for x in lbar]
    assert result.btok.tolist() == [float(x) for x in btok]
    # dJ/dl = (1/B') [(w_raw + w_dist/c + w_ex/(bbar+eps))/n + (w_tok + w_cc/(c kappa)) pi]
    for r in range(2):
        n = 3 - r
        uniform = (1 + Fraction(1, 2) / c + Fraction(1, 4) / (bbar[r] + eps)) / n
        for t in range(n):
            weight = (uniform + (1 + Fraction(1, 2) / (c * kappa[r])) * shares[r][t]) / 2
            assert result.token_gradient[r, t] == float(weight)
    assert result.token_gradient[1, 2] == 0.0


def test_linear_shares_example_from_math() -> None:
    # MATH.md / recon_impl's example: l = (2, 4), b = (1, 3), alpha = 1.
    cfg = spec.config_mapping(raw_weight=1.0, token_weighted_weight=1.0, token_weight_alpha=1.0)
    result = spec.evaluate_details([[2.0, 4.0, 0.0]], [[1.0, 3.0, NAN]], [[1, 1, 0]], cfg)
    assert result.values["reconstruction_loss"] == 3.0
    assert result.values["token_weighted_reconstruction_loss"] == 3.5
    assert result.token_gradient.tolist() == [[0.75, 1.25, 0.0]]


def test_alpha_zero_with_zero_b_gives_uniform_shares() -> None:
    result = spec.evaluate_details(
        [[1.0, 2.0, 3.0]], [[0.0, 0.0, 6.0]], [[True] * 3], config(token_weight_alpha=0.0)
    )
    assert result.shares.tolist() == [[1 / 3, 1 / 3, 1 / 3]]
    assert result.kappa.tolist() == [1.0]
    values = result.values
    assert values["token_weighted_reconstruction_loss"] == values["reconstruction_loss"]
    assert values["token_weighted_base_loss"] == 2.0


def test_positive_alpha_with_an_all_zero_row() -> None:
    nll = [[1.0, 2.0, 4.0], [3.0, 1.0, 0.0]]
    base = [[0.0, 0.0, 0.0], [1.0, 3.0, 0.0]]
    result = spec.evaluate_details(
        nll, base, [[1, 1, 1], [1, 1, 0]], config(token_weight_alpha=3.0)
    )
    assert result.shares[0].tolist() == [1 / 3, 1 / 3, 1 / 3]
    assert result.kappa[0] == 1.0
    assert result.btok[0] == 0.0
    assert result.ltok[0] == result.lbar[0] == 7 / 3
    # Partly zero b and alpha > 0: 0^alpha = 0.
    assert result.shares[1].tolist() == [1 / 28, 27 / 28, 0.0]


def test_empty_rows_are_dropped() -> None:
    nll = [[9.0, 9.0, 9.0], [2.0, 4.0, 1.0], [5.0, 5.0, 5.0], [0.5, 1.5, 7.0]]
    base = [[NAN, INF, -1.0], [1.0, 3.0, 0.5], [1.0, 1.0, 1.0], [1.0, 2.0, NAN]]
    mask = [[0, 0, 0], [1, 1, 1], [0, 0, 0], [1, 1, 0]]
    result = spec.evaluate_details(nll, base, mask, config())
    assert result.kept.tolist() == [False, True, False, True]
    assert result.kept_count == 2
    assert result.values == spec.evaluate(NLL, BASE, MASK, config())
    assert result.kappa[[0, 2]].tolist() == [1.0, 1.0]
    assert result.lbar[[0, 2]].tolist() == [0.0, 0.0]
    assert not result.token_gradient[[0, 2]].any() and not result.shares[[0, 2]].any()


def test_padded_values_are_never_read() -> None:
    expected = spec.evaluate_details(NLL, BASE, MASK, config())
    for garbage in (NAN, INF, -INF, -1e308):
        nll = [[2.0, 4.0, 1.0], [0.5, 1.5, garbage]]
        base = [[1.0, 3.0, 0.5], [1.0, 2.0, garbage]]
        result = spec.evaluate_details(nll, base, MASK, config())
        assert result.values == expected.values
        assert np.array_equal(result.token_gradient, expected.token_gradient)


def test_no_weight_skips_a_term() -> None:
    zero = dict.fromkeys(WEIGHT_FIELDS, 0.0)
    values = spec.evaluate(NLL, BASE, MASK, config(**zero))
    assert values["total_reconstruction_loss"] == 0.0
    reference = spec.evaluate(NLL, BASE, MASK, config())
    assert all(values[name] == reference[name] for name in LOSS_NAMES[:-1])


# ---------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    ("nll", "base", "mask", "changes", "message"),
    [
        ([1.0, 2.0], [1.0, 2.0], [True, True], {}, "token_nll must be 2-D"),
        ([[[1.0]]], [[[1.0]]], [[[True]]], {}, "token_nll must be 2-D"),
        ([[1.0, 2.0]], [[1.0]], [[True, True]], {}, "same shape"),
        ([[1.0, 2.0]], [[1.0, 2.0]], [[True]], {}, "same shape"),
        ([[1.0, NAN]], [[1.0, 2.0]], [[True, True]], {}, "token_nll must be finite"),
        ([[1.0, 2.0]], [[-INF, 2.0]], [[True, True]], {}, "zfree_token_nll must be finite"),
        ([[1.0, 2.0]], [[1.0, -0.25]], [[True, True]], {}, "zfree_token_nll must be >= 0"),
        ([[1.0, 2.0]], [[1.0, 2.0]], [[False, False]], {}, "at least one valid token"),
        ([[1.0, 2.0]], [[0.0, 0.0]], [[True, True]], {"example_inverse_surprisal_epsilon": 0.0},
         "bbar_i > 0"),
        ([[1.0, 2.0]], [[1.0, 2.0]], [[2, 1]], {}, "mask must hold only 0 and 1"),
        ([[1.0, 2.0]], [[1.0, 2.0]], [[1.0, 0.0]], {}, "mask must be bool or integer"),
        ([[1.0]], [[1.0]], [[True]], {"raw_weight": -1.0}, "raw_weight must be >= 0"),
        ([[1.0]], [[1.0]], [[True]], {"token_weight_alpha": NAN}, "alpha must be finite"),
        ([[1.0]], [[1.0]], [[True]], {"zfree_reference_scale": 0.0}, "must be > 0"),
        ([[1.0]], [[1.0]], [[True]], {"example_inverse_surprisal_epsilon": INF}, "finite"),
        ([[1.0]], [[1.0]], [[True]], {"token_weighted_weight": True}, "real number"),
    ],
)  # fmt: skip
def test_value_errors(nll, base, mask, changes, message) -> None:
    with pytest.raises(ValueError, match=message):
        spec.evaluate(nll, base, mask, config(**changes))


def test_empty_batch_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one valid token"):
        spec.evaluate(
            torch.zeros(0, 3), torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.bool), config()
        )


def test_eps_zero_is_fine_when_the_zero_row_is_dropped() -> None:
    values = spec.evaluate(
        [[1.0, 2.0], [3.0, 4.0]],
        [[0.0, 0.0], [1.0, 3.0]],
        [[False, False], [True, True]],
        config(example_inverse_surprisal_epsilon=0.0),
    )
    assert values["example_inverse_surprisal_weighted_reconstruction_loss"] == 3.5 / 2.0


def test_non_floating_tensors_and_missing_config_fields() -> None:
    ints = torch.ones(1, 2, dtype=torch.int64)
    with pytest.raises(ValueError, match="token_nll must have a floating dtype"):
        spec.evaluate(ints, torch.ones(1, 2), torch.ones(1, 2, dtype=torch.bool), config())
    with pytest.raises(ValueError, match="zfree_token_nll must have a floating dtype"):
        spec.evaluate(np.ones((1, 2)), np.ones((1, 2), dtype=np.int32), [[1, 1]], config())
    incomplete = config()
    del incomplete["zfree_reference_scale"]
    with pytest.raises(ValueError, match="zfree_reference_scale"):
        spec.evaluate([[1.0]], [[1.0]], [[True]], incomplete)
    with pytest.raises(ValueError, match="attribute 'distribution_normalized_weight'"):
        spec.evaluate([[1.0]], [[1.0]], [[True]], SimpleNamespace(raw_weight=1.0))


# ---------------------------------------------------------------------------------------
# Inputs


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16, torch.float32, torch.float64))
def test_torch_inputs_are_read_exactly(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(3)
    nll = (torch.rand(3, 4, generator=generator) * 5).to(dtype)
    base = (torch.rand(3, 4, generator=generator) * 5).to(dtype)
    mask = torch.rand(3, 4, generator=generator) > 0.3
    mask[0, 0] = True
    exact = spec.evaluate(nll.double().tolist(), base.double().tolist(), mask.tolist(), config())
    assert spec.evaluate(nll, base, mask, config()) == exact
    assert spec.evaluate(nll, base, mask.to(torch.uint8), config()) == exact
    assert (
        spec.evaluate(nll.double().numpy(), base.double().numpy(), mask.numpy(), config()) == exact
    )


def test_inputs_are_not_modified_and_gradients_are_ignored() -> None:
    nll = torch.tensor(NLL, dtype=torch.float64, requires_grad=True)
    base = torch.tensor(BASE, dtype=torch.float64)
    before = (nll.detach().clone(), base.clone())
    spec.evaluate(nll, base, torch.tensor(MASK), config())
    assert torch.equal(nll.detach().nan_to_num(), before[0].nan_to_num())
    assert torch.equal(base.nan_to_num(), before[1].nan_to_num())
    assert nll.grad is None


def test_config_object_and_mapping_agree() -> None:
    as_object = SimpleNamespace(**config())
    assert spec.evaluate(NLL, BASE, MASK, as_object) == spec.evaluate(NLL, BASE, MASK, config())


# ---------------------------------------------------------------------------------------
# Precision


@pytest.mark.parametrize("alpha", (0.0, 1.0, 7.3, 1000.0))
def test_precision_suffices(alpha: float) -> None:
    # b^1000 with b up to 1e4 overflows float64 by far; at 50 digits the result is already
    # what 120 digits give, to the last float64 bit.
    rng = np.random.default_rng(12)
    nll = rng.uniform(0, 1e4, size=(4, 6))
    base = rng.uniform(0, 1e4, size=(4, 6))
    base[1, :3] = 0.0
    mask = rng.random((4, 6)) < 0.8
    mask[:, 0] = True
    cfg = config(token_weight_alpha=alpha)
    default = spec.evaluate_details(nll, base, mask, cfg)
    finer = spec.evaluate_details(nll, base, mask, cfg, precision=120)
    assert default.values == finer.values
    assert np.array_equal(default.token_gradient, finer.token_gradient)
    assert np.array_equal(default.shares, finer.shares)
    assert all(math.isfinite(v) for v in default.values.values())


def test_large_alpha_concentrates_on_the_largest_b() -> None:
    result = spec.evaluate_details(
        [[1.0, 2.0, 3.0]],
        [[9000.0, 9999.0, 9998.0]],
        [[True] * 3],
        config(token_weight_alpha=1000.0),
    )
    shares = result.shares[0]
    assert shares[1] > 0.5 and shares[0] < 1e-40 and math.isclose(sum(shares), 1.0)


# ---------------------------------------------------------------------------------------
# The gradient against sympy's derivative of J


def test_token_gradient_is_the_derivative_of_j() -> None:
    sizes = (2, 3, 1)
    batch = ExplicitBatch.of_sizes(sizes)
    total = loss_terms(batch)[spec.LOSS_NAMES[-1]]
    rng = np.random.default_rng(5)
    # every weight non-zero and distinct, every parameter off its default
    cfg = spec.config_mapping(
        **distinct_weights(tuple(0.5 + 0.25 * k for k in range(len(TERMS)))),
        **{p.field: p.edge_values[-1] for p in PARAMETERS},
    )
    values = {
        **{p.symbol: sp.Rational(cfg[p.field]) for p in PARAMETERS},
        **{term.weight: sp.Rational(cfg[term.weight_field]) for term in TERMS},
    }
    nll = np.zeros((3, 3))
    base = np.zeros((3, 3))
    mask = np.zeros((3, 3), dtype=bool)
    for r, example in enumerate(batch.examples):
        for t, token in enumerate(example.tokens.tokens):
            nll[r, t], base[r, t] = rng.integers(1, 9) / 4, rng.integers(1, 9) / 4
            values[token.loss], values[token.base] = sp.Rational(nll[r, t]), sp.Rational(base[r, t])
            mask[r, t] = True
    result = spec.evaluate_details(nll, base, mask, cfg)
    for r, example in enumerate(batch.examples):
        for t, token in enumerate(example.tokens.tokens):
            derivative = sp.diff(total, token.loss).subs(values)
            expected = float(sp.N(derivative, 30))
            assert math.isclose(result.token_gradient[r, t], expected, rel_tol=1e-15)
    assert math.isclose(
        result.values["total_reconstruction_loss"],
        float(sp.N(total.subs(values), 30)),
        rel_tol=1e-15,
    )


# ---------------------------------------------------------------------------------------
# The result and the caches


def test_result_is_frozen_and_read_only() -> None:
    result = spec.evaluate_details(NLL, BASE, MASK, config())
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.kept_count = 3
    with pytest.raises(ValueError):
        result.token_gradient[0, 0] = 1.0
    assert result.token_gradient.dtype == np.float64 and result.token_gradient.shape == (2, 3)
    assert result.kept.dtype == np.bool_ and result.kappa.shape == (2,)


def test_lambdified_functions_are_cached() -> None:
    spec.evaluate(NLL, BASE, MASK, config())
    before = example_function.cache_info().hits, batch_function.cache_info().hits
    spec.evaluate(NLL, BASE, MASK, config())
    assert example_function.cache_info().hits == before[0] + 2
    assert batch_function.cache_info().hits == before[1] + 1
