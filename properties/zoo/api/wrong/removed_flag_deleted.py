"""Wrong: --normalize-reconstruction-loss is deleted outright. argparse rejects it, but as
"unrecognized arguments", without a word about its replacement."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_flags,
    compute_total_loss,
    reconstruction_loss_config_from_args,
)


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig(), removed=None)


__all__ = [
    "DisentanglementLossConfig",
    "compute_total_loss",
    "reconstruction_loss_config_from_args",
]
