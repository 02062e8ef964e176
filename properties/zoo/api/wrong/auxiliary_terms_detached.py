"""Wrong: the auxiliary terms are added to the total as logged numbers (detached), so the
total's value is right but only the reconstruction part trains: the KL never reaches the
encoder."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    total_loss,
)


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    detached = {n: None if v is None else v.detach() for n, v in terms.items()}  # the mistake
    out = total_loss(token_nll, zfree_token_nll, mask, config, detached)
    return {**out, **{n: v for n, v in terms.items() if v is not None}}


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
