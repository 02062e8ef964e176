"""Wrong: a term must be given whenever its weight is non-zero, even router_support with
enable_router_support_loss=False, whose effective weight is 0: a plain VAE that switched
router support off still has to pass one."""

from properties.zoo.api.correct import (
    AUXILIARY,
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    total_loss,
)


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    for name, weight in AUXILIARY.items():
        if getattr(config, weight) != 0 and terms.get(name) is None:  # the switch not looked at
            raise ValueError(f"{name} must be given: its weight is {getattr(config, weight)}")
    return total_loss(token_nll, zfree_token_nll, mask, config, terms)


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
