"""Wrong: validation checks the sign of numbers alone: NaN (NaN < 0 is False), inf, strings,
None and bools pass, and c = 0 is caught but c = NaN is not."""

from dataclasses import dataclass, field, fields
from numbers import Number

from properties.zoo.api import correct
from properties.zoo.api.correct import add_flags, compute_total_loss, config_from_args


def _sign_only(config) -> None:
    for f in fields(config):
        value = getattr(config, f.name)
        if not isinstance(value, Number):
            continue
        if value < 0 or (f.name == "zfree_reference_scale" and value == 0):
            raise ValueError(f"{type(config).__name__}.{f.name} must not be {value!r}")


@dataclass(frozen=True)
class ReconstructionLossConfig(correct.ReconstructionLossConfig):
    def __post_init__(self) -> None:
        _sign_only(self)


@dataclass(frozen=True)
class DisentanglementLossConfig(correct.DisentanglementLossConfig):
    reconstruction: correct.ReconstructionLossConfig = field(
        default_factory=ReconstructionLossConfig
    )

    def __post_init__(self) -> None:
        _sign_only(self)


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig())


def reconstruction_loss_config_from_args(args):
    return config_from_args(args, ReconstructionLossConfig)


__all__ = ["compute_total_loss"]
