"""Wrong: ReconstructionLossConfig declares alpha, epsilon and c first, then the weights
(grouped "parameters before weights"): positional construction and every tool that reads the
fields in order see another config than the seed's."""

from dataclasses import dataclass, field

from properties.zoo.api import correct
from properties.zoo.api.correct import (
    RECONSTRUCTION_RULES,
    add_flags,
    compute_total_loss,
    config_from_args,
    validate,
)


@dataclass(frozen=True)
class ReconstructionLossConfig:
    token_weight_alpha: float = 1.0
    example_inverse_surprisal_epsilon: float = 1e-8
    zfree_reference_scale: float = 1.0
    raw_weight: float = 1.0
    distribution_normalized_weight: float = 0.0
    example_inverse_surprisal_weight: float = 0.0
    token_weighted_weight: float = 0.0
    normalized_concentration_corrected_token_weighted_weight: float = 0.0

    def __post_init__(self) -> None:
        validate(self, RECONSTRUCTION_RULES)


@dataclass(frozen=True)
class DisentanglementLossConfig(correct.DisentanglementLossConfig):
    nested = ReconstructionLossConfig
    reconstruction: ReconstructionLossConfig = field(default_factory=ReconstructionLossConfig)


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig())


def reconstruction_loss_config_from_args(args):
    return config_from_args(args, ReconstructionLossConfig)


__all__ = ["compute_total_loss"]
