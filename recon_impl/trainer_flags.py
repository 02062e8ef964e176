"""Trainer command-line flags of the reconstruction stack.

The flags of the design (``RECONSTRUCTION_FLAGS``, from the term table) set the weights,
alpha and epsilon; their defaults are the ``ReconstructionLossConfig`` defaults. Beside them,
``--zfree-reference-scale C`` passes the z-free reference scale c: it is measured from data
(``estimate_zfree_reference_scale``), not chosen, so it has no default of its own; left
out, c comes from the ``base`` config of ``reconstruction_loss_config_from_args``.

The removed ``--normalize-reconstruction-loss`` is a usage error naming its replacement, in
every spelling argparse accepts (bare, ``=VALUE``, a unique prefix), and leaves nothing in
the parsed namespace.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_reconstruction_loss_arguments(parser)
    >>> args = parser.parse_args(
    ...     ["--token-weighted-reconstruction-weight", "0.5", "--zfree-reference-scale", "2.65"]
    ... )
    >>> config = reconstruction_loss_config_from_args(args)
    >>> config.token_weighted_weight, config.zfree_reference_scale
    (0.5, 2.65)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

from recon_impl.config import ReconstructionLossConfig
from recon_impl.terms import FLAGS, RULES

#: flag -> (config field, what it weighs or sets), from the term table
RECONSTRUCTION_FLAGS: dict[str, tuple[str, str]] = dict(FLAGS)

ZFREE_REFERENCE_SCALE_FLAG = "--zfree-reference-scale"

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


def _positive_finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be finite and > 0, got {text!r}")
    return value


# a flag's value checked by its field's rule
_FLAG_TYPES = {"non-negative": _non_negative_finite_float, "positive": _positive_finite_float}


class _RemovedFlag(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        # nargs="?": with nargs=0 argparse rejects "--flag=true" itself, without our message.
        # default=SUPPRESS: nothing of the flag lands in the namespace.
        super().__init__(
            option_strings, dest, nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        flag = self.option_strings[0]
        parser.error(
            f"{flag} was removed: use {REMOVED_FLAGS[flag]} W to weigh "
            "distribution_normalized_reconstruction_loss (and --raw-reconstruction-weight 0 "
            "to drop the raw term)"
        )


def add_reconstruction_loss_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags of ``RECONSTRUCTION_FLAGS`` (defaults: the config dataclass defaults)
    and ``--zfree-reference-scale`` (default: None, meaning the base config's c)."""
    defaults = {f.name: f.default for f in fields(ReconstructionLossConfig)}
    group = parser.add_argument_group("reconstruction loss")
    for flag, (field_name, meaning) in RECONSTRUCTION_FLAGS.items():
        group.add_argument(
            flag,
            dest=field_name,
            type=_FLAG_TYPES[RULES[field_name]],
            default=defaults[field_name],
            metavar="X",
            help=f"{meaning} (default: %(default)s)",
        )
    group.add_argument(
        ZFREE_REFERENCE_SCALE_FLAG,
        dest="zfree_reference_scale",
        type=_positive_finite_float,
        default=None,
        metavar="C",
        help="the dataset-level z-free reference scale c > 0 that "
        "distribution_normalized_reconstruction_loss and the concentration-corrected term "
        "divide by: the mean per-example z-free loss over the training data, as "
        "estimate_zfree_reference_scale measures it (default: the base config's c)",
    )
    for flag in REMOVED_FLAGS:
        group.add_argument(flag, action=_RemovedFlag)


def reconstruction_loss_config_from_args(
    args: argparse.Namespace, base: ReconstructionLossConfig | None = None
) -> ReconstructionLossConfig:
    """The config the parsed flags describe; c, when its flag was not given, and fields
    without a flag come from ``base`` (the dataclass defaults when ``base`` is None)."""
    values = {name: getattr(args, name) for name, _ in RECONSTRUCTION_FLAGS.values()}
    scale = getattr(args, "zfree_reference_scale", None)
    if scale is not None:
        values["zfree_reference_scale"] = scale
    return replace(base or ReconstructionLossConfig(), **values)
