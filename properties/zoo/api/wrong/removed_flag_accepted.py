"""Wrong: --normalize-reconstruction-loss is kept as a deprecated no-op, so that old launch
scripts still run: they now train without the normalization they asked for, silently."""

from properties.zoo.api.correct import (
    REMOVED_FLAG,
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_flags,
    compute_total_loss,
    reconstruction_loss_config_from_args,
)


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig(), removed=None)
    parser.add_argument(REMOVED_FLAG, action="store_true", help="deprecated, ignored")


__all__ = [
    "DisentanglementLossConfig",
    "compute_total_loss",
    "reconstruction_loss_config_from_args",
]
