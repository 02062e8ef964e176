"""Wrong: the removed flag is a usage error that names its replacement, but its action keeps
argparse's default, so every parsed namespace holds normalize_reconstruction_loss=False for
old code to read."""

from properties.zoo.api import correct
from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_flags,
    compute_total_loss,
    reconstruction_loss_config_from_args,
)


class RemovedFlag(correct.RemovedFlag):
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.default = False  # the mistake: argparse.SUPPRESS leaves nothing in the namespace


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig(), removed=RemovedFlag)


__all__ = [
    "DisentanglementLossConfig",
    "compute_total_loss",
    "reconstruction_loss_config_from_args",
]
