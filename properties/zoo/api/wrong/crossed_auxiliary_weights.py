"""Wrong: posterior_entropy is weighted by posterior_variance_weight and the other way round
(two neighbouring lines of a table, swapped)."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    auxiliary_weights,
    reconstruction_loss_config_from_args,
    total_loss,
)


def crossed_weights(config):
    weights = auxiliary_weights(config)
    weights["posterior_entropy"], weights["posterior_variance"] = (
        weights["posterior_variance"],
        weights["posterior_entropy"],
    )
    return weights


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    return total_loss(token_nll, zfree_token_nll, mask, config, terms, weights_of=crossed_weights)


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
