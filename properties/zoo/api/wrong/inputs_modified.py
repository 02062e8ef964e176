"""Wrong: padded positions of the caller's z-free losses are zeroed in place before the stack
runs ("cleaning" NaN padding), so the caller's tensor changes under it."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    total_loss,
)


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    with_grad = zfree_token_nll.requires_grad
    zfree_token_nll.requires_grad_(False)
    zfree_token_nll.masked_fill_(~mask.bool(), 0.0)  # the mistake: the caller's tensor
    zfree_token_nll.requires_grad_(with_grad)
    return total_loss(token_nll, zfree_token_nll, mask, config, terms)


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
