"""Wrong: a term weighted 0 is left out of the bundle ("it is not trained on"), where the
seed computes and logs all five whatever the weights."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    total_loss,
)

WEIGHT_OF = {
    "reconstruction_loss": "raw_weight",
    "distribution_normalized_reconstruction_loss": "distribution_normalized_weight",
    "example_inverse_surprisal_weighted_reconstruction_loss": "example_inverse_surprisal_weight",
    "token_weighted_reconstruction_loss": "token_weighted_weight",
    "normalized_concentration_corrected_token_weighted_reconstruction_loss": (
        "normalized_concentration_corrected_token_weighted_weight"
    ),
}


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    out = total_loss(token_nll, zfree_token_nll, mask, config, terms)
    weight = {name: getattr(config.reconstruction, field) for name, field in WEIGHT_OF.items()}
    return {name: value for name, value in out.items() if weight.get(name, 1.0) != 0}


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
