"""Wrong: both configs are plain dataclasses, not frozen: a trainer that changes a weight in
place after the run's metadata was logged logs a config it does not train with."""

from dataclasses import dataclass, field, fields
from typing import ClassVar

from properties.zoo.api.correct import (
    NESTED,
    NON_NEGATIVE,
    RECONSTRUCTION_RULES,
    SWITCH,
    add_flags,
    compute_total_loss,
    config_from_args,
    validate,
)


@dataclass  # the mistake: not frozen
class ReconstructionLossConfig:
    raw_weight: float = 1.0
    distribution_normalized_weight: float = 0.0
    example_inverse_surprisal_weight: float = 0.0
    token_weighted_weight: float = 0.0
    normalized_concentration_corrected_token_weighted_weight: float = 0.0
    token_weight_alpha: float = 1.0
    example_inverse_surprisal_epsilon: float = 1e-8
    zfree_reference_scale: float = 1.0

    def __post_init__(self) -> None:
        validate(self, RECONSTRUCTION_RULES)


@dataclass  # the mistake: not frozen
class DisentanglementLossConfig:
    nested: ClassVar[type] = ReconstructionLossConfig

    reconstruction: ReconstructionLossConfig = field(default_factory=ReconstructionLossConfig)
    beta: float = 1.0
    router_support_weight: float = 1.0
    posterior_entropy_weight: float = 0.0
    posterior_variance_weight: float = 0.0
    router_marginal_kl_to_prior_weight: float = 0.0
    router_supervision_weight: float = 0.0
    enable_router_support_loss: bool = True
    inter_latent_divergence_weight: float = 0.0

    def __post_init__(self) -> None:
        rules = {f.name: NON_NEGATIVE for f in fields(self)}
        rules.update(reconstruction=NESTED, enable_router_support_loss=SWITCH)
        validate(self, rules)


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig())


def reconstruction_loss_config_from_args(args):
    return config_from_args(args, ReconstructionLossConfig)


__all__ = ["compute_total_loss"]
