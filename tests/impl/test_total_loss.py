"""compute_total_loss: the arithmetic of the total, which terms must be given, one shard."""

from __future__ import annotations

import math

import numpy
import pytest
import torch

from recon_impl import (
    AUXILIARY_TERM_NAMES,
    RECONSTRUCTION_LOSS_NAMES,
    TOTAL_LOSS_NAMES,
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    compute_total_loss,
    reconstruction_losses,
)
from tests.impl.test_zfree_reference_scale import guide_examples

L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]], dtype=torch.float64)
B = torch.tensor([[0.5, 1.0, 2.0], [1.0, 3.0, 0.0]], dtype=torch.float64)
MASK = torch.tensor([[True, True, True], [True, True, False]])
RECON = ReconstructionLossConfig(raw_weight=0.5, token_weighted_weight=2.0)
AUX = {
    "kl": 0.5,
    "router_support": 0.25,
    "posterior_entropy": 1.5,
    "posterior_variance": 2.5,
    "router_marginal_kl_to_prior": 3.5,
    "router_supervision": 4.5,
    "inter_latent_divergence": 5.5,
}


def full_config(**changes) -> DisentanglementLossConfig:
    weights = dict(
        reconstruction=RECON,
        beta=1.0,
        router_support_weight=2.0,
        posterior_entropy_weight=3.0,
        posterior_variance_weight=4.0,
        router_marginal_kl_to_prior_weight=5.0,
        router_supervision_weight=6.0,
        inter_latent_divergence_weight=7.0,
    )
    return DisentanglementLossConfig(**{**weights, **changes})


def aux_tensors(**overrides) -> dict[str, torch.Tensor]:
    values = {**AUX, **overrides}
    return {name: torch.tensor(value, dtype=torch.float64) for name, value in values.items()}


def test_total_is_the_weighted_sum() -> None:
    out = compute_total_loss(L, B, MASK, full_config(), **aux_tensors())
    recon = reconstruction_losses(L, B, MASK, RECON)
    expected = recon.total_reconstruction_loss.item() + (
        1.0 * 0.5 + 2.0 * 0.25 + 3.0 * 1.5 + 4.0 * 2.5 + 5.0 * 3.5 + 6.0 * 4.5 + 7.0 * 5.5
    )
    assert out["total_loss"].item() == pytest.approx(expected, rel=1e-15)
    assert set(out) == {*RECONSTRUCTION_LOSS_NAMES, *AUX, "total_loss"}
    for name in RECONSTRUCTION_LOSS_NAMES:
        assert out[name].item() == recon[name].item()
    for name, value in AUX.items():
        assert out[name].item() == value


def test_router_support_counts_only_when_enabled() -> None:
    aux = aux_tensors()
    on = compute_total_loss(L, B, MASK, full_config(), **aux)["total_loss"].item()
    off_config = full_config(enable_router_support_loss=False)
    off = compute_total_loss(L, B, MASK, off_config, **aux)["total_loss"].item()
    assert on - off == pytest.approx(2.0 * 0.25, rel=1e-12)
    # disabled: it may be omitted although its weight is non-zero
    del aux["router_support"]
    assert compute_total_loss(L, B, MASK, off_config, **aux)["total_loss"].item() == off


@pytest.mark.parametrize("missing", list(AUX))
def test_a_weighted_term_must_be_given(missing: str) -> None:
    aux = aux_tensors()
    del aux[missing]
    with pytest.raises(ValueError, match=rf"{missing} must be given"):
        compute_total_loss(L, B, MASK, full_config(), **aux)


def test_zero_weight_terms_may_be_omitted_and_never_count() -> None:
    config = DisentanglementLossConfig(
        reconstruction=RECON, beta=0.0, enable_router_support_loss=False
    )
    out = compute_total_loss(L, B, MASK, config)
    assert set(out) == {*RECONSTRUCTION_LOSS_NAMES, "total_loss"}
    assert out["total_loss"].item() == out["total_reconstruction_loss"].item()
    # given but weighted 0: returned for logging, not added (a NaN stays out of the total)
    out = compute_total_loss(L, B, MASK, config, kl=torch.tensor(math.nan))
    assert math.isnan(out["kl"].item())
    assert out["total_loss"].item() == out["total_reconstruction_loss"].item()


def test_total_is_differentiable() -> None:
    l = L.clone().requires_grad_()
    kl = torch.tensor(0.5, requires_grad=True)
    config = DisentanglementLossConfig(reconstruction=RECON, beta=3.0, router_support_weight=0.0)
    compute_total_loss(l, B, MASK, config, kl=kl)["total_loss"].backward()
    assert kl.grad.item() == 3.0
    assert l.grad is not None and l.grad[~MASK].eq(0).all()


@pytest.mark.parametrize("bad", [torch.ones(2), 0.5, [0.5]])
def test_auxiliary_terms_must_be_scalar_tensors(bad) -> None:
    config = DisentanglementLossConfig(enable_router_support_loss=False)
    with pytest.raises(ValueError, match=r"kl must be a 0-dim tensor"):
        compute_total_loss(L, B, MASK, config, kl=bad)


def test_config_type_is_checked() -> None:
    with pytest.raises(ValueError, match=r"config must be a recon_impl\.config\.Disentangle"):
        compute_total_loss(L, B, MASK, RECON)


# --- one shard of a batch: weight= ------------------------------------------------------


def test_a_weighted_shard_is_every_entry_times_its_weight() -> None:
    out = compute_total_loss(L, B, MASK, full_config(), **aux_tensors())
    weighted = compute_total_loss(L, B, MASK, full_config(), **aux_tensors(), weight=0.375)
    assert list(weighted) == list(out) == list(TOTAL_LOSS_NAMES)
    for name, value in out.items():
        assert weighted[name].item() == pytest.approx(0.375 * value.item(), rel=1e-15)


def test_a_weighted_shard_without_a_valid_token_contributes_exactly_nothing() -> None:
    l = L.clone().requires_grad_()
    aux = {name: torch.tensor(math.nan, requires_grad=True) for name in AUX}
    empty = torch.zeros_like(MASK)
    out = compute_total_loss(
        l, torch.full_like(B, math.nan), empty, full_config(), **aux, weight=0.0
    )
    assert list(out) == list(TOTAL_LOSS_NAMES)
    assert all(value.item() == 0.0 for value in out.values())
    out["total_loss"].backward()  # connected to token_nll and to every auxiliary term
    assert torch.equal(l.grad, torch.zeros_like(L))
    assert all(term.grad is not None and term.grad.item() == 0.0 for term in aux.values())
    # the rules on what must be given still hold
    with pytest.raises(ValueError, match=r"kl must be given"):
        compute_total_loss(L, B, empty, full_config(), weight=0.0)
    with pytest.raises(ValueError, match=r"must have the same shape"):
        compute_total_loss(L, B[:, :2], empty, full_config(), **aux, weight=0.0)
    # without a weight, a batch without a valid token is an error
    with pytest.raises(ValueError, match=r"valid token"):
        compute_total_loss(L, B, empty, full_config(), **aux_tensors())


@pytest.mark.parametrize(
    ("weight", "pattern"),
    [
        (-0.5, r"weight must be >= 0"),
        (math.inf, r"finite"),
        (10**400, r"weight must be finite"),  # float() overflows: still a ValueError
        (True, r"real"),
        (numpy.True_, r"real"),
        (torch.tensor(0.5), r"real"),
        ("1", r"real"),
    ],
)
def test_bad_shard_weight(weight, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        compute_total_loss(L, B, MASK, full_config(), **aux_tensors(), weight=weight)


def test_auxiliary_term_names() -> None:
    assert tuple(AUX) == AUXILIARY_TERM_NAMES
    assert (*RECONSTRUCTION_LOSS_NAMES, *AUX, "total_loss") == TOTAL_LOSS_NAMES


def test_guide_example_runs() -> None:
    blocks = guide_examples("The total loss and its auxiliary terms")
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/GUIDE.md", "exec"), namespace)
