"""Wrong: the trainer sets its own default for the epsilon flag (0.0, "no stabilizer"), so a
run without the flag trains with another config than ReconstructionLossConfig()."""

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_flags,
    compute_total_loss,
    reconstruction_loss_config_from_args,
)


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig())
    parser.set_defaults(example_inverse_surprisal_epsilon=0.0)  # the mistake


__all__ = [
    "DisentanglementLossConfig",
    "compute_total_loss",
    "reconstruction_loss_config_from_args",
]
