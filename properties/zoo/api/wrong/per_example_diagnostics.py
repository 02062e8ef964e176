"""Wrong: the two diagnostics are returned per example, [B] (each row's own value, NaN for an
empty row), where the seed's bundle holds batch means."""

import torch

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    reconstruction_losses,
    total_loss,
)

DIAGNOSTICS = ("token_weighted_base_loss", "token_concentration_factor")


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    out = total_loss(token_nll, zfree_token_nll, mask, config, terms)
    rows = [
        reconstruction_losses(
            token_nll[i : i + 1], zfree_token_nll[i : i + 1], mask[i : i + 1], config.reconstruction
        )
        for i in range(token_nll.shape[0])
    ]
    for name in DIAGNOSTICS:
        out[name] = torch.stack([row[name] for row in rows])  # the mistake
    return out


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
