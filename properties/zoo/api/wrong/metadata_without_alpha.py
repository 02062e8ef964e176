"""Wrong: to_dict() logs the weights only ("the numbers that are trained on"), so the run
metadata loses token_weight_alpha, epsilon and c."""

from dataclasses import dataclass, field

from properties.zoo.api import correct
from properties.zoo.api.correct import add_flags, compute_total_loss, config_from_args

WEIGHTS = (
    "raw_weight",
    "distribution_normalized_weight",
    "example_inverse_surprisal_weight",
    "token_weighted_weight",
    "normalized_concentration_corrected_token_weighted_weight",
)


@dataclass(frozen=True)
class ReconstructionLossConfig(correct.ReconstructionLossConfig):
    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in WEIGHTS}  # the mistake


@dataclass(frozen=True)
class DisentanglementLossConfig(correct.DisentanglementLossConfig):
    reconstruction: correct.ReconstructionLossConfig = field(
        default_factory=ReconstructionLossConfig
    )

    def to_dict(self) -> dict:
        values = {name: value for name, value in vars(self).items() if name != "reconstruction"}
        return {"reconstruction": self.reconstruction.to_dict(), **values}


def add_reconstruction_loss_arguments(parser):
    add_flags(parser, ReconstructionLossConfig())


def reconstruction_loss_config_from_args(args):
    return config_from_args(args, ReconstructionLossConfig)


__all__ = ["compute_total_loss"]
