"""Wrong: token_weight_alpha defaults to 0.0 (uniform shares), not the seed's 1.0. The flags
take their defaults from the dataclass, so they change with it."""

from dataclasses import dataclass, field

from properties.zoo.api import correct
from properties.zoo.api.correct import add_flags, compute_total_loss, config_from_args


@dataclass(frozen=True)
class ReconstructionLossConfig(correct.ReconstructionLossConfig):
    token_weight_alpha: float = 0.0  # the mistake


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
