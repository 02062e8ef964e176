"""Wrong: validation refuses a Python bool and converts everything else with float(): a
numpy bool (numpy.True_ is no Python bool) passes as 1.0, and so does a 0-dim tensor."""

import math
from dataclasses import dataclass, field, fields

from properties.zoo.api import correct
from properties.zoo.api.correct import add_flags, compute_total_loss, config_from_args


def _converted(config) -> None:
    owner = type(config).__name__
    for f in fields(config):
        value = getattr(config, f.name)
        if f.name == "reconstruction":
            correct.validate(config, {f.name: correct.NESTED})
            continue
        if f.name == "enable_router_support_loss":
            correct.validate(config, {f.name: correct.SWITCH})
            continue
        if isinstance(value, (bool, str)) or value is None:
            raise ValueError(f"{owner}.{f.name} must be a real number, got {value!r}")
        try:
            number = float(value)  # the mistake: numpy.True_ and torch.tensor(1.0) convert
        except OverflowError:
            raise ValueError(f"{owner}.{f.name} must be finite") from None
        positive = f.name == "zfree_reference_scale"
        if not math.isfinite(number) or number < 0 or (positive and number == 0):
            raise ValueError(f"{owner}.{f.name} must be finite and >= 0, got {value!r}")
        object.__setattr__(config, f.name, number)


@dataclass(frozen=True)
class ReconstructionLossConfig(correct.ReconstructionLossConfig):
    def __post_init__(self) -> None:
        _converted(self)


@dataclass(frozen=True)
class DisentanglementLossConfig(correct.DisentanglementLossConfig):
    nested = ReconstructionLossConfig
    reconstruction: correct.ReconstructionLossConfig = field(
        default_factory=ReconstructionLossConfig
    )

    def __post_init__(self) -> None:
        _converted(self)


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig())


def reconstruction_loss_config_from_args(args):
    return config_from_args(args, ReconstructionLossConfig)


__all__ = ["compute_total_loss"]
