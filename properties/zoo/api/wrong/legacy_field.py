"""Wrong: normalize_reconstruction_loss is kept as an ignored field, so that old run configs
still load: the shim a hard migration does without."""

from dataclasses import dataclass, field

from properties.zoo.api import correct
from properties.zoo.api.correct import add_flags, compute_total_loss, config_from_args


@dataclass(frozen=True)
class ReconstructionLossConfig(correct.ReconstructionLossConfig):
    normalize_reconstruction_loss: bool = False  # the mistake: ignored, kept for old configs


@dataclass(frozen=True)
class DisentanglementLossConfig(correct.DisentanglementLossConfig):
    reconstruction: correct.ReconstructionLossConfig = field(
        default_factory=ReconstructionLossConfig
    )


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig())


def reconstruction_loss_config_from_args(args):
    return config_from_args(args, ReconstructionLossConfig)


__all__ = ["compute_total_loss"]
