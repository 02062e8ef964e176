"""Wrong: the stack runs in float64 whatever the inputs ("for accuracy"), and its entries come
back as float64 for float32 and half-precision inputs alike."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    total_loss,
)


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    # the mistake: float64 results where the contract keeps float32
    return total_loss(token_nll.double(), zfree_token_nll.double(), mask, config, terms)


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
