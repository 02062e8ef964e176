"""Wrong: validation checks each number but stores it as given: numpy.float32(0.5) stays a
numpy scalar in the config, and json.dumps of the run metadata fails on it."""

from dataclasses import dataclass, field, fields

from properties.zoo.api import correct
from properties.zoo.api.correct import add_flags, compute_total_loss, config_from_args


def _kept(check, config) -> None:
    given = {f.name: getattr(config, f.name) for f in fields(config)}
    check(config)
    for name, value in given.items():  # the mistake: the checked float is thrown away
        object.__setattr__(config, name, value)


@dataclass(frozen=True)
class ReconstructionLossConfig(correct.ReconstructionLossConfig):
    def __post_init__(self) -> None:
        _kept(correct.ReconstructionLossConfig.__post_init__, self)


@dataclass(frozen=True)
class DisentanglementLossConfig(correct.DisentanglementLossConfig):
    nested = ReconstructionLossConfig
    reconstruction: correct.ReconstructionLossConfig = field(
        default_factory=ReconstructionLossConfig
    )

    def __post_init__(self) -> None:
        _kept(correct.DisentanglementLossConfig.__post_init__, self)


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig())


def reconstruction_loss_config_from_args(args):
    return config_from_args(args, ReconstructionLossConfig)


__all__ = ["compute_total_loss"]
