"""Wrong: the concentration-corrected weight's flag is spelt
--normalized-concentration-corrected-token-weighted-weight (without "-reconstruction"), after
the field's name rather than the seed's flag."""

from properties.zoo.api.correct import (
    FLAGS,
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_flags,
    compute_total_loss,
    config_from_args,
)

MY_FLAGS = {
    ("--normalized-concentration-corrected-token-weighted-weight" if "concentration" in f else f): (
        name
    )
    for f, name in FLAGS.items()
}


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig(), flags=MY_FLAGS)


def reconstruction_loss_config_from_args(args):
    return config_from_args(args, ReconstructionLossConfig, MY_FLAGS)


__all__ = ["DisentanglementLossConfig", "compute_total_loss"]
