"""Wrong: the stack runs with a fresh ReconstructionLossConfig(), not config.reconstruction:
the reconstruction weights, alpha, epsilon and c of the run are never used."""

import dataclasses

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    total_loss,
)


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    stack_config = dataclasses.replace(config, reconstruction=ReconstructionLossConfig())
    return total_loss(token_nll, zfree_token_nll, mask, stack_config, terms)


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
