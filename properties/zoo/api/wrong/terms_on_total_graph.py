"""Wrong: each returned term carries the total's graph (``R.detach() + (J - J.detach())``, a
trick to keep logged terms attached): every value is right, and so is total_loss's
gradient, but differentiating one term, or a mix of terms, differentiates J instead."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
    total_loss,
)
from spec.terms import TERM_NAMES, TOTAL_NAME


def compute_total_loss(token_nll, zfree_token_nll, mask, config, **terms):
    out = total_loss(token_nll, zfree_token_nll, mask, config, terms)
    graph = out[TOTAL_NAME] - out[TOTAL_NAME].detach()  # the mistake: J's graph, value 0
    return {n: v.detach() + graph if n in TERM_NAMES else v for n, v in out.items()}


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "reconstruction_loss_config_from_args",
]
