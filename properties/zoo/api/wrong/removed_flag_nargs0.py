"""Wrong: the removed flag's action takes no value (nargs=0), so argparse itself answers
--normalize-reconstruction-loss=true, with "ignored explicit argument", before the action
can name the replacement."""

import argparse

from properties.zoo.api.correct import (
    REMOVED_FLAG,
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_flags,
    compute_total_loss,
    reconstruction_loss_config_from_args,
)


class RemovedBoolean(argparse.Action):
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS)  # the mistake

    def __call__(self, parser, *args):
        parser.error(
            f"{REMOVED_FLAG} was removed: use --distribution-normalized-reconstruction-weight"
        )


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig(), removed=RemovedBoolean)


__all__ = [
    "DisentanglementLossConfig",
    "compute_total_loss",
    "reconstruction_loss_config_from_args",
]
