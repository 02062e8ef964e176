"""Wrong: the five reconstruction terms are returned detached, as logged numbers; total_loss
keeps its graph, so training on the total works, but a trainer that builds its loss from the
terms (or an ablation on one of them) trains nothing."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    total_loss,
)
from spec.terms import TERM_NAMES


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    out = total_loss(token_nll, zfree_token_nll, mask, config, terms)
    return {n: v.detach() if n in TERM_NAMES else v for n, v in out.items()}  # the mistake


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
