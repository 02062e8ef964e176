"""Wrong: the flags parse with type=float, so -1, nan and inf get through argparse and end in
the config's ValueError traceback (or, for a trainer that builds its config later, in a run
with a NaN weight) instead of a usage error."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_flags,
    compute_total_loss,
    reconstruction_loss_config_from_args,
)


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig(), value_type=float)  # the mistake


__all__ = [
    "DisentanglementLossConfig",
    "compute_total_loss",
    "reconstruction_loss_config_from_args",
]
