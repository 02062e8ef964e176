"""The run options ``recon-spec check`` and the pytest plugin share.

``recon-spec check --NAME`` and ``pytest --recon-NAME`` are the same option: one table,
one parser for each value (a bad value is a usage error before anything runs), one way to
build the domain from them, and one way to write them back into a command that repeats a
run exactly (``rerun_command``).

It imports nothing heavy (no torch, hypothesis or sympy at import): the pytest plugin reads
its table in every pytest run of an environment where recon-spec is installed.
"""

from __future__ import annotations

import argparse
import math
import shlex
from typing import Any

#: the suite's hypothesis profiles, short name -> the name ``properties.profiles`` registers
#: them under; here, not there, because that module imports hypothesis to register them
PROFILES: dict[str, str] = {
    "dev": "recon-spec-dev",
    "ci": "recon-spec-ci",
    "thorough": "recon-spec-thorough",
}
#: where ``properties.target`` and ``properties.api.module`` find the default target and
#: API module; here so that the pytest plugin can tell whether a run names one cheaply
ENVIRONMENT_VARIABLE = "RECON_IMPL"
API_ENVIRONMENT_VARIABLE = "RECON_API"

DTYPE_CHOICES = ("float64", "float32", "bfloat16", "float16")
#: the default of --call-timeout, in seconds: far beyond any call on a batch of at most
#: 8 x 8 tokens, including a first call that compiles (torch.compile) or starts a GPU
DEFAULT_CALL_TIMEOUT = 120.0
#: the largest loss the strategies may draw: the whole domain MATH.md promises (b up to
#: 1e4, where every exact output is representable in float32); --max-loss only narrows it
LARGEST_MAX_LOSS = 1e4
#: positive losses are drawn no smaller than this (smaller ones become 0): then
#: l / bbar <= 1e4 * 8 / 1e-30 stays far inside float32, as must every exact output. It is
#: the least --max-loss too: a smaller one would leave only zero losses to draw.
MIN_POSITIVE_LOSS = 1e-30


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_float(text: str) -> float:
    """A number > 0 (inf allowed: "no limit")."""
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def positive_finite_float(text: str) -> float:
    value = positive_float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def max_loss(text: str) -> float:
    value = positive_finite_float(text)
    if value < MIN_POSITIVE_LOSS:
        raise argparse.ArgumentTypeError(
            f"must be at least {MIN_POSITIVE_LOSS:g} (the smallest positive loss the "
            f"strategies draw), got {text}"
        )
    if value > LARGEST_MAX_LOSS:
        raise argparse.ArgumentTypeError(
            f"must be at most {LARGEST_MAX_LOSS:g} (the domain MATH.md promises; the option "
            f"only narrows it), got {text}"
        )
    return value


def _whole_number(text: str, smallest: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < smallest:
        raise argparse.ArgumentTypeError(f"must be at least {smallest}, got {text}")
    return value


def positive_int(text: str) -> int:
    return _whole_number(text, 1)


def seed_value(text: str) -> int:
    return _whole_number(text, 0)


def dtype_list(text: str) -> str:
    names = text.split(",")
    if not text or any(name not in DTYPE_CHOICES for name in names):
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {', '.join(DTYPE_CHOICES)}, got {text!r}"
        )
    return text


def device_name(text: str) -> str:
    """A device torch knows and this machine has (the inputs are made there)."""
    if text == "cpu":
        # argparse converts the string default too, and every torch has a cpu: no torch
        # import for a pytest run that gives no --recon-device
        return text
    import torch  # here, not at import: the pytest plugin loads this module in every run

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError) as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch device: {error}") from None
    if device.type == "meta":
        raise argparse.ArgumentTypeError("'meta' tensors hold no values to check")
    try:
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise argparse.ArgumentTypeError(
            f"{text!r} is not available on this machine: {first}"
        ) from None
    return text


#: (name, argparse keyword arguments)
RUN_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "profile",
        dict(
            choices=tuple(PROFILES),
            help="hypothesis profile (default: ci when CI=true, else dev)",
        ),
    ),
    ("max-examples", dict(type=positive_int, metavar="N", help="examples per invariant")),
    (
        "seed",
        dict(type=seed_value, help="seed of the random draws (the failure report gives it)"),
    ),
    (
        "device",
        dict(type=device_name, default="cpu", help="device of the input tensors (default: cpu)"),
    ),
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
        dict(
            type=max_loss,
            default=LARGEST_MAX_LOSS,
            help=f"largest loss value drawn, from {MIN_POSITIVE_LOSS:g} to {LARGEST_MAX_LOSS:g} "
            "(the default)",
        ),
    ),
    *(
        (
            f"max-{name}",
            dict(
                type=positive_int,
                metavar="N",
                help=f"largest {what} the scale invariants draw (default: {default}); "
                "the other invariants draw at most 8",
            ),
        )
        for name, what, default in (
            ("length", "row length T", "65537"),
            ("batch", "batch size B", "256"),
            ("positions", "number of positions B x T of one call", "1048576"),
        )
    ),
    (
        "dtypes",
        dict(
            type=dtype_list,
            default=",".join(DTYPE_CHOICES),
            help="comma-separated input dtypes to draw (default: all four)",
        ),
    ),
    (
        "call-timeout",
        dict(
            type=positive_finite_float,
            default=DEFAULT_CALL_TIMEOUT,
            metavar="SECONDS",
            help="longest a call of the target may take; a call past it is reported as "
            f"timed out (default: {DEFAULT_CALL_TIMEOUT:g})",
        ),
    ),
    (
        "no-database",
        dict(
            action="store_true",
            help="neither read nor write hypothesis's example database (.hypothesis/): "
            "nothing is written to the working directory",
        ),
    ),
)

#: the options that change what is drawn (and so belong in a command that repeats a run)
DRAW_OPTIONS = (
    "profile",
    "seed",
    "max-examples",
    "max-alpha",
    "max-loss",
    "max-length",
    "max-batch",
    "max-positions",
    "dtypes",
    "device",
)
#: the options of the sizes the scale invariants draw: None (not given) is the default
SIZE_OPTIONS = ("max-length", "max-batch", "max-positions")


def domain_from(
    *,
    max_alpha: float,
    max_loss: float,
    dtypes: str,
    device: str,
    max_length: int | None = None,
    max_batch: int | None = None,
    max_positions: int | None = None,
):
    """The domain (``properties.strategies.Domain``) the run options describe; a size not
    given is the default (``properties.scale``). The invariants of small batches draw at
    most 8 rows and positions, and never more than the sizes given."""
    import torch

    from properties.strategies import DEFAULT_DOMAIN, Domain

    length = DEFAULT_DOMAIN.scale_length if max_length is None else max_length
    batch = DEFAULT_DOMAIN.scale_batch if max_batch is None else max_batch
    positions = DEFAULT_DOMAIN.scale_positions if max_positions is None else max_positions
    return Domain(
        max_batch=min(DEFAULT_DOMAIN.max_batch, batch),
        max_length=min(DEFAULT_DOMAIN.max_length, length),
        max_alpha=max_alpha,
        max_loss=max_loss,
        dtypes=tuple(getattr(torch, name) for name in dtypes.split(",")),
        device=device,
        scale_length=length,
        scale_batch=batch,
        scale_positions=positions,
    )


def domain_options(args: Any) -> dict[str, Any]:
    """The keyword arguments of ``domain_from`` in parsed options (``args.max_alpha``, ...)."""
    names = ("max-alpha", "max-loss", "dtypes", "device", *SIZE_OPTIONS)
    return {name.replace("-", "_"): getattr(args, name.replace("-", "_")) for name in names}


def rerun_command(
    target: str,
    invariant_id: str,
    options: dict[str, Any],
    *,
    no_database: bool,
    command: str = "check",
) -> str:
    """``recon-spec check`` (or ``check-api``) with every option that decides what a run
    draws, shell-quoted: run as printed, it repeats the run of ``invariant_id``."""
    words: list[str] = ["recon-spec", command, target, "--invariant", invariant_id]
    short_names = {registered: short for short, registered in PROFILES.items()}
    for name in DRAW_OPTIONS:
        value = options.get(name)
        if name == "profile" and value not in PROFILES:
            # a hypothesis profile of the user's: the seed and --max-examples stand for it
            value = short_names.get(value)
        if value is not None:
            words += [f"--{name}", repr(value) if isinstance(value, float) else str(value)]
    if no_database:
        words.append("--no-database")
    return shlex.join(words)
