"""Wrong: validation rejects every invalid value, but its ValueError says only "invalid
config", so the user cannot tell which of fifteen fields to fix."""

from dataclasses import dataclass, field

from properties.zoo.api import correct
from properties.zoo.api.correct import add_flags, compute_total_loss, config_from_args


def _unnamed(check, config) -> None:
    try:
        check(config)
    except ValueError:
        raise ValueError("invalid config") from None  # the mistake: no field named


@dataclass(frozen=True)
class ReconstructionLossConfig(correct.ReconstructionLossConfig):
    def __post_init__(self) -> None:
        _unnamed(correct.ReconstructionLossConfig.__post_init__, self)


@dataclass(frozen=True)
class DisentanglementLossConfig(correct.DisentanglementLossConfig):
    nested = ReconstructionLossConfig
    reconstruction: correct.ReconstructionLossConfig = field(
        default_factory=ReconstructionLossConfig
    )

    def __post_init__(self) -> None:
        _unnamed(correct.DisentanglementLossConfig.__post_init__, self)


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig())


def reconstruction_loss_config_from_args(args):
    return config_from_args(args, ReconstructionLossConfig)


__all__ = ["compute_total_loss"]
