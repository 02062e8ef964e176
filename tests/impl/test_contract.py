"""The implementation contract: bundle, padding, dtypes, stop-gradient, no input mutation."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import spec.api
from properties.tolerances import output_tolerance
from recon_impl import (
    DIAGNOSTIC_NAMES,
    RECONSTRUCTION_LOSS_NAMES,
    RECONSTRUCTION_TERM_NAMES,
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    ReconstructionLosses,
    reconstruction_losses,
)
from tests.impl.configs import EVERY_TERM_CONFIG

CONFIG = EVERY_TERM_CONFIG


def batch(dtype=torch.float64, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    l = torch.rand(4, 6, generator=generator, dtype=torch.float64) * 5
    b = torch.rand(4, 6, generator=generator, dtype=torch.float64) * 5
    mask = torch.tensor(
        [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]],
        dtype=torch.bool,
    )
    return l.to(dtype), b.to(dtype), mask


def values(losses) -> dict[str, float]:
    return {name: value.item() for name, value in losses.items()}


def test_bundle_is_a_read_only_mapping_of_the_eight_names() -> None:
    l, b, mask = batch()
    losses = reconstruction_losses(l, b, mask, CONFIG)
    assert isinstance(losses, ReconstructionLosses)
    assert tuple(losses) == RECONSTRUCTION_LOSS_NAMES
    assert len(losses) == len(RECONSTRUCTION_LOSS_NAMES)
    for name in RECONSTRUCTION_LOSS_NAMES:
        assert losses[name] is getattr(losses, name)
        assert losses[name].dim() == 0
    assert "token_weight_alpha" not in losses
    with pytest.raises(KeyError):
        losses["token_weight_alpha"]
    with pytest.raises(TypeError):
        losses["reconstruction_loss"] = torch.tensor(0.0)  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        losses.reconstruction_loss = torch.tensor(0.0)  # type: ignore[misc]
    assert "reconstruction_loss=" in repr(losses)


def test_padded_values_change_neither_values_nor_gradients() -> None:
    l, b, mask = batch()
    clean_l = l.clone().requires_grad_()
    clean = reconstruction_losses(clean_l, b, mask, CONFIG)
    clean.total_reconstruction_loss.backward()

    junk = torch.tensor([math.nan, math.inf, -math.inf, 1e30, -7.0], dtype=torch.float64)
    fill = junk[torch.arange(l.numel()) % len(junk)].view_as(l)
    dirty_l = torch.where(mask, l, fill).requires_grad_()
    dirty_b = torch.where(mask, b, fill.flip(0))
    dirty = reconstruction_losses(dirty_l, dirty_b, mask, CONFIG)
    dirty.total_reconstruction_loss.backward()

    assert values(dirty) == values(clean)
    assert torch.equal(dirty_l.grad, clean_l.grad)
    assert torch.all(dirty_l.grad[~mask] == 0)


def test_integer_masks_are_treated_as_bool() -> None:
    l, b, mask = batch()
    expected = values(reconstruction_losses(l, b, mask, CONFIG))
    for dtype in (torch.uint8, torch.int32, torch.int64):
        assert values(reconstruction_losses(l, b, mask.to(dtype), CONFIG)) == expected


def test_inputs_are_never_modified() -> None:
    l, b, mask = batch()
    l[~mask] = math.nan
    b[~mask] = math.inf
    l.requires_grad_()
    before = [t.detach().clone() for t in (l, b, mask)]
    losses = reconstruction_losses(l, b, mask, CONFIG)
    losses.total_reconstruction_loss.backward()
    for original, now in zip(before, (l, b, mask), strict=True):
        assert torch.equal(original.nan_to_num(), now.detach().nan_to_num())
        assert torch.equal(original.isnan(), now.detach().isnan())


def test_no_gradient_reaches_the_zfree_losses() -> None:
    l, b, mask = batch()
    l.requires_grad_()
    b.requires_grad_()
    losses = reconstruction_losses(l, b, mask, CONFIG)
    for name in RECONSTRUCTION_TERM_NAMES:
        (grad,) = torch.autograd.grad(losses[name], l, retain_graph=True)
        assert grad.abs().sum() > 0
    for name in DIAGNOSTIC_NAMES:
        assert not losses[name].requires_grad
    losses.total_reconstruction_loss.backward()
    assert b.grad is None
    assert l.grad is not None


def test_same_tensor_as_model_and_reference() -> None:
    # The z-free baseline with l and b the very same tensor: the gradient still treats b
    # as a constant.
    l, _, mask = batch()
    l.requires_grad_()
    losses = reconstruction_losses(l, l, mask, CONFIG)
    losses.total_reconstruction_loss.backward()
    detached = l.detach().clone().requires_grad_()
    reference = reconstruction_losses(detached, l.detach(), mask, CONFIG)
    reference.total_reconstruction_loss.backward()
    assert torch.equal(l.grad, detached.grad)


@pytest.mark.parametrize(
    ("l_dtype", "b_dtype", "result_dtype"),
    [
        (torch.float64, torch.float64, torch.float64),
        (torch.float32, torch.float32, torch.float32),
        (torch.bfloat16, torch.bfloat16, torch.float32),
        (torch.float16, torch.float16, torch.float32),
        (torch.bfloat16, torch.float16, torch.float32),
        (torch.float16, torch.float64, torch.float64),
        (torch.float32, torch.float64, torch.float64),
    ],
)
def test_computes_in_float32_or_better(l_dtype, b_dtype, result_dtype) -> None:
    l, b, mask = batch()
    l_low, b_low = l.to(l_dtype).requires_grad_(), b.to(b_dtype)
    losses = reconstruction_losses(l_low, b_low, mask, CONFIG)
    # float64 on the rounded inputs: only the computation's own rounding is left.
    exact = reconstruction_losses(l_low.double(), b_low.double(), mask, CONFIG)
    tolerance = output_tolerance(
        torch.promote_types(l_dtype, b_dtype), length=6, alpha=CONFIG.token_weight_alpha
    )
    for name in RECONSTRUCTION_LOSS_NAMES:
        assert losses[name].dtype == result_dtype
        assert losses[name].device == l.device
        observed, expected = losses[name].item(), exact[name].item()
        assert tolerance.allows(observed, expected, expected), (name, observed, expected)
    losses.total_reconstruction_loss.backward()
    assert l_low.grad.dtype == l_dtype


def test_float32_stays_finite_for_huge_alpha_and_losses() -> None:
    generator = torch.Generator().manual_seed(1)
    l = torch.rand(3, 5, generator=generator) * 1e4
    b = torch.rand(3, 5, generator=generator) * 1e4
    b[0, :2] = 0.0
    b[1] = 1e4  # ties at the largest value
    mask = torch.ones(3, 5, dtype=torch.bool)
    for alpha in (0.0, 1.0, 1e3, 1e30, 3e38, 1e300):
        config = dataclasses.replace(CONFIG, token_weight_alpha=alpha)
        losses = reconstruction_losses(l.clone().requires_grad_(), b, mask, config)
        for name, value in losses.items():
            assert torch.isfinite(value), (alpha, name)
    # huge alpha puts all weight on the largest surprisal (split evenly between ties)
    config = dataclasses.replace(CONFIG, token_weight_alpha=1e300)
    losses = reconstruction_losses(l, b, mask, config)
    top = b.argmax(dim=1)
    expected = (l[0, top[0]] + l[1].mean() + l[2, top[2]]) / 3
    torch.testing.assert_close(losses.token_weighted_reconstruction_loss, expected)


def test_validation_off_gives_the_same_values() -> None:
    l, b, mask = batch()
    assert values(reconstruction_losses(l, b, mask, CONFIG, validate=False)) == values(
        reconstruction_losses(l, b, mask, CONFIG)
    )


def test_weights_never_skip_a_term() -> None:
    l, b, mask = batch()
    zero = ReconstructionLossConfig(raw_weight=0.0)
    losses = reconstruction_losses(l, b, mask, zero)
    assert losses.total_reconstruction_loss.item() == 0.0
    assert all(losses[name].item() > 0 for name in (*RECONSTRUCTION_TERM_NAMES, *DIAGNOSTIC_NAMES))


def test_config_to_dict_is_nested_run_metadata() -> None:
    config = DisentanglementLossConfig(reconstruction=CONFIG, beta=0.5)
    metadata = config.to_dict()
    assert metadata["beta"] == 0.5
    assert metadata["reconstruction"]["token_weight_alpha"] == 1.3
    assert metadata["reconstruction"] == CONFIG.to_dict()
    assert set(CONFIG.to_dict()) == {f.name for f in dataclasses.fields(CONFIG)}
    assert ReconstructionLossConfig(raw_weight=1).to_dict()["raw_weight"] == 1.0


def test_config_defaults_are_the_design_defaults() -> None:
    defaults = ReconstructionLossConfig().to_dict()
    # every field the registries declare, with its recorded default
    assert defaults == {f.name: f.default for f in spec.api.RECONSTRUCTION_FIELDS}
    # and seed 001's, as the seed gives them
    assert (
        defaults.items()
        >= {
            "raw_weight": 1.0,
            "distribution_normalized_weight": 0.0,
            "example_inverse_surprisal_weight": 0.0,
            "token_weighted_weight": 0.0,
            "normalized_concentration_corrected_token_weighted_weight": 0.0,
            "token_weight_alpha": 1.0,
            "example_inverse_surprisal_epsilon": 1e-8,
            "zfree_reference_scale": 1.0,
        }.items()
    )
    defaults = DisentanglementLossConfig().to_dict()
    defaults.pop("reconstruction")
    assert defaults == {
        "beta": 1.0,
        "router_support_weight": 1.0,
        "posterior_entropy_weight": 0.0,
        "posterior_variance_weight": 0.0,
        "router_marginal_kl_to_prior_weight": 0.0,
        "router_supervision_weight": 0.0,
        "enable_router_support_loss": True,
        "inter_latent_divergence_weight": 0.0,
    }


def test_outputs_may_be_modified_in_place() -> None:
    # gradient accumulation: each output is a tensor of its own, not a view
    l, b, mask = batch()
    for name in (*RECONSTRUCTION_TERM_NAMES, "total_reconstruction_loss"):
        leaf = l.clone().requires_grad_()
        losses = reconstruction_losses(leaf, b, mask, CONFIG)
        before = values(losses)
        (expected,) = torch.autograd.grad(losses[name], leaf, retain_graph=True)
        loss = losses[name]
        loss /= 4
        aux = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
        loss += aux
        loss.backward()
        assert loss.item() == pytest.approx(before[name] / 4 + 0.5, rel=1e-15)
        torch.testing.assert_close(leaf.grad, expected / 4, rtol=1e-15, atol=0.0)
        assert aux.grad.item() == 1.0
        assert {k: v for k, v in values(losses).items() if k != name} == {
            k: v for k, v in before.items() if k != name
        }


@pytest.mark.parametrize(
    "config",
    [
        # R_ex = 1 / 1e-40 overflows float32; R_dist = 1 / 1e-39 too
        ReconstructionLossConfig(example_inverse_surprisal_epsilon=0.0),
        ReconstructionLossConfig(distribution_normalized_weight=0.0, zfree_reference_scale=1e-39),
    ],
)
def test_a_zero_weighted_term_that_overflows_stays_out_of_the_total(config) -> None:
    l = torch.ones(1, 2, requires_grad=True)
    b = torch.full((1, 2), 1e-40)
    losses = reconstruction_losses(l, b, torch.ones(1, 2, dtype=torch.bool), config)
    assert losses.total_reconstruction_loss.item() == 1.0  # raw_weight 1 on R_raw = 1
    assert any(math.isinf(v.item()) for v in losses.values())  # still computed and returned
    losses.total_reconstruction_loss.backward()
    assert l.grad.tolist() == [[0.5, 0.5]]


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize(
    "changes",
    [
        {"normalized_concentration_corrected_token_weighted_weight": 1e300},
        {"zfree_reference_scale": 1e-300},
        {
            "normalized_concentration_corrected_token_weighted_weight": 1.0,
            "zfree_reference_scale": 1e-300,
        },
        {"example_inverse_surprisal_weight": 1e300, "token_weighted_weight": 1e300},
    ],
)
def test_the_gradient_is_exactly_zero_at_padded_positions_whatever_overflows(
    changes, validate: bool
) -> None:
    # float32: the coefficients overflow to inf, and 0 * inf at a padded position is NaN
    # unless the gradient is selected there
    config = dataclasses.replace(CONFIG, **changes)
    l, b, mask = batch(torch.float32)
    for alpha in (0.0, 1.0, 2.0):
        leaf = l.clone().requires_grad_()
        cfg = dataclasses.replace(config, token_weight_alpha=alpha)
        losses = reconstruction_losses(leaf, b, mask, cfg, validate=validate)
        losses.total_reconstruction_loss.backward()
        assert torch.all(leaf.grad[~mask] == 0), (alpha, leaf.grad)
        assert not torch.isnan(leaf.grad[mask]).any()


def test_a_total_without_weighted_terms_has_a_zero_gradient() -> None:
    l, b, mask = batch()
    leaf = l.clone().requires_grad_()
    total = reconstruction_losses(leaf, b, mask, ReconstructionLossConfig(raw_weight=0.0))
    assert total.total_reconstruction_loss.item() == 0.0
    total.total_reconstruction_loss.backward()
    assert torch.equal(leaf.grad, torch.zeros_like(l))
