"""Wrong: a weighted term that is not given counts as 0, so a model that forgot to pass its
KL trains on the reconstruction alone, silently."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    auxiliary_weights,
    reconstruction_loss_config_from_args,
    reconstruction_losses,
)


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    weights = auxiliary_weights(config)
    given = {name: value for name, value in terms.items() if value is not None}
    out = reconstruction_losses(token_nll, zfree_token_nll, mask, config.reconstruction)
    total = out["total_reconstruction_loss"]
    for name, value in given.items():  # the mistake: nothing says what was not given
        if weights[name] != 0:
            total = total + weights[name] * value
    return {**out, **given, "total_loss": total}


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
