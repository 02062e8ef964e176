"""The run options ``recon-spec check`` and the pytest plugin share.

``recon-spec check --NAME`` and ``pytest --recon-NAME`` are the same option: one table,
one parser for each value, one way to build the domain from them.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from properties.profiles import PROFILES

DTYPE_CHOICES = ("float64", "float32", "bfloat16", "float16")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def dtype_list(text: str) -> str:
    unknown = [name for name in text.split(",") if name not in DTYPE_CHOICES]
    if unknown:
        raise argparse.ArgumentTypeError(f"dtypes must be among {', '.join(DTYPE_CHOICES)}")
    return text


#: (name, argparse keyword arguments)
RUN_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "profile",
        dict(
            choices=tuple(PROFILES), help="hypothesis profile (default: ci when CI=true, else dev)"
        ),
    ),
    ("max-examples", dict(type=int, metavar="N", help="examples per invariant")),
    ("seed", dict(type=int, help="seed for the random draws (the failure report gives it)")),
    ("device", dict(default="cpu", help="device of the input tensors (default: cpu)")),
    (
        "max-alpha",
        dict(
            type=positive_float,
            default=math.inf,
            help="largest alpha the target is meant for (default: any finite alpha)",
        ),
    ),
    (
        "max-loss",
        dict(type=positive_float, default=1e4, help="largest loss value drawn (default: 1e4)"),
    ),
    (
        "dtypes",
        dict(
            type=dtype_list,
            default=",".join(DTYPE_CHOICES),
            help="comma-separated input dtypes to draw (default: all four)",
        ),
    ),
)


def domain_from(*, max_alpha: float, max_loss: float, dtypes: str, device: str):
    """The domain (``properties.strategies.Domain``) the run options describe."""
    import torch  # here, not at import: the pytest plugin loads this module in every run

    from properties.strategies import Domain

    return Domain(
        max_alpha=max_alpha,
        max_loss=max_loss,
        dtypes=tuple(getattr(torch, name) for name in dtypes.split(",")),
        device=device,
    )
