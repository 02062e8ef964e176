"""Wrong: token_weight_alpha is returned with the losses, "so that it is logged with them":
the seed keeps it in the run metadata, never in the loss bundle."""

import torch

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    total_loss,
)


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    out = total_loss(token_nll, zfree_token_nll, mask, config, terms)
    out["token_weight_alpha"] = torch.tensor(config.reconstruction.token_weight_alpha)
    return out


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
