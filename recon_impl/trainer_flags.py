"""Trainer command-line flags of the reconstruction stack.

``zfree_reference_scale`` has no flag: it is measured from data, not chosen.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_reconstruction_loss_arguments(parser)
    >>> args = parser.parse_args(["--token-weighted-reconstruction-weight", "0.5"])
    >>> reconstruction_loss_config_from_args(args).token_weighted_weight
    0.5
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

from recon_impl.config import ReconstructionLossConfig

# flag -> (config field, what it weighs or sets)
RECONSTRUCTION_FLAGS: dict[str, tuple[str, str]] = {
    "--raw-reconstruction-weight": (
        "raw_weight",
        "weight on reconstruction_loss, the raw per-example-mean token NLL",
    ),
    "--distribution-normalized-reconstruction-weight": (
        "distribution_normalized_weight",
        "weight on distribution_normalized_reconstruction_loss, the raw loss divided by "
        "the dataset-level z-free reference scale",
    ),
    "--example-inverse-surprisal-reconstruction-weight": (
        "example_inverse_surprisal_weight",
        "weight on example_inverse_surprisal_weighted_reconstruction_loss, each example's "
        "loss divided by its mean z-free loss plus epsilon",
    ),
    "--token-weighted-reconstruction-weight": (
        "token_weighted_weight",
        "weight on token_weighted_reconstruction_loss, the token NLL weighted by tempered "
        "z-free surprisal shares",
    ),
    "--normalized-concentration-corrected-token-weighted-reconstruction-weight": (
        "normalized_concentration_corrected_token_weighted_weight",
        "weight on normalized_concentration_corrected_token_weighted_reconstruction_loss, "
        "the token-weighted loss divided by its concentration factor and the reference scale",
    ),
    "--token-weighted-reconstruction-alpha": (
        "token_weight_alpha",
        "tempering exponent alpha >= 0 of both token-weighted terms (0: uniform shares, "
        "1: linear surprisal shares)",
    ),
    "--example-inverse-surprisal-epsilon": (
        "example_inverse_surprisal_epsilon",
        "stabilizer epsilon >= 0 added to each example's mean z-free loss in the "
        "inverse-surprisal term",
    ),
}

REMOVED_FLAGS: dict[str, str] = {
    "--normalize-reconstruction-loss": "--distribution-normalized-reconstruction-weight",
}


def _non_negative_finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be finite and >= 0, got {text!r}")
    return value


class _RemovedFlag(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help=argparse.SUPPRESS)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        flag = self.option_strings[0]
        parser.error(
            f"{flag} was removed: use {REMOVED_FLAGS[flag]} W to weigh "
            "distribution_normalized_reconstruction_loss (and --raw-reconstruction-weight 0 "
            "to drop the raw term)"
        )


def add_reconstruction_loss_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the seven reconstruction flags; defaults are the config dataclass defaults."""
    defaults = {f.name: f.default for f in fields(ReconstructionLossConfig)}
    group = parser.add_argument_group("reconstruction loss")
    for flag, (field_name, meaning) in RECONSTRUCTION_FLAGS.items():
        group.add_argument(
            flag,
            dest=field_name,
            type=_non_negative_finite_float,
            default=defaults[field_name],
            metavar="X",
            help=f"{meaning} (default: %(default)s)",
        )
    for flag in REMOVED_FLAGS:
        group.add_argument(flag, action=_RemovedFlag)


def reconstruction_loss_config_from_args(
    args: argparse.Namespace, base: ReconstructionLossConfig | None = None
) -> ReconstructionLossConfig:
    """The config the parsed flags describe; fields without a flag come from ``base``."""
    values = {name: getattr(args, name) for name, _ in RECONSTRUCTION_FLAGS.values()}
    return replace(base or ReconstructionLossConfig(), **values)
