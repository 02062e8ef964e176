"""Wrong: the alpha and epsilon flags set each other's field (a copy-paste slip in the
table from flag to field); with neither given, the defaults hide it."""

from properties.zoo.api.correct import (
    FLAGS,
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_flags,
    compute_total_loss,
    config_from_args,
)

CROSSED = {
    **FLAGS,
    "--token-weighted-reconstruction-alpha": "example_inverse_surprisal_epsilon",
    "--example-inverse-surprisal-epsilon": "token_weight_alpha",
}


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig(), flags=CROSSED)


def reconstruction_loss_config_from_args(args):
    return config_from_args(args, ReconstructionLossConfig, CROSSED)


__all__ = ["DisentanglementLossConfig", "compute_total_loss"]
