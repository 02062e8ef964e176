"""Wrong: router_support is weighted by router_support_weight whatever
enable_router_support_loss says."""

from properties.zoo.api.correct import (
    AUXILIARY,
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    total_loss,
)


def weights_without_switch(config):
    return {name: getattr(config, weight) for name, weight in AUXILIARY.items()}  # the mistake


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    return total_loss(
        token_nll, zfree_token_nll, mask, config, terms, weights_of=weights_without_switch
    )


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
