"""pytest plugin: the invariants as pytest tests, pointed at any implementation.

    pytest --pyargs properties --recon-impl MODULE:CALLABLE [-n 2]

The target may also come from the environment variable RECON_IMPL; without either, the
bundled ``recon_impl:reconstruction_losses`` is checked. The plugin is registered through
the ``pytest11`` entry point, so its options exist wherever recon-spec is installed.
"""

from __future__ import annotations

import math

import pytest

from properties.cli import DTYPE_CHOICES


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recon-spec", "recon-spec conformance suite")
    group.addoption(
        "--recon-impl",
        metavar="MODULE:CALLABLE",
        help="implementation to check (default: $RECON_IMPL, else the bundled one)",
    )
    group.addoption(
        "--recon-profile",
        choices=("dev", "ci", "thorough"),
        help="hypothesis profile (default: ci when CI=true, else dev)",
    )
    group.addoption("--recon-max-examples", type=int, metavar="N", help="examples per invariant")
    group.addoption("--recon-seed", type=int, help="seed for the random draws")
    group.addoption(
        "--recon-validation",
        action="store_true",
        help="also run the opt-in validation invariants",
    )
    group.addoption(
        "--recon-max-alpha",
        type=float,
        default=math.inf,
        help="largest alpha the implementation is meant for (default: any)",
    )
    group.addoption(
        "--recon-dtypes",
        default=",".join(DTYPE_CHOICES),
        help="comma-separated input dtypes to draw",
    )
    group.addoption("--recon-device", default="cpu", help="device of the input tensors")


def _target_name(config: pytest.Config) -> str:
    import os

    from properties.target import DEFAULT_TARGET, ENVIRONMENT_VARIABLE

    return (
        config.getoption("--recon-impl") or os.environ.get(ENVIRONMENT_VARIABLE) or DEFAULT_TARGET
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("--recon-impl") is None and not _collects_conformance(config):
        return None
    return f"recon-spec target: {_target_name(config)}"


def _collects_conformance(config: pytest.Config) -> bool:
    return any("properties" in str(arg) for arg in config.args)


@pytest.fixture(scope="session")
def recon_target(request: pytest.FixtureRequest):
    """``(name, callable)`` of the implementation under test."""
    from properties.target import TargetLoadError, load_target

    try:
        return load_target(_target_name(request.config))
    except TargetLoadError as error:
        pytest.exit(f"recon-spec: {error}", returncode=2)


@pytest.fixture(scope="session")
def recon_run_options(request: pytest.FixtureRequest):
    """Profile settings, domain and seed chosen on the command line."""
    import torch

    from properties.profiles import default_profile, profile_settings
    from properties.strategies import Domain

    option = request.config.getoption
    profile = option("--recon-profile") or default_profile()
    settings = profile_settings(profile, max_examples=option("--recon-max-examples"))
    domain = Domain(
        max_alpha=option("--recon-max-alpha"),
        dtypes=tuple(getattr(torch, name) for name in option("--recon-dtypes").split(",")),
        device=option("--recon-device"),
    )
    return {
        "profile": profile,
        "settings": settings,
        "domain": domain,
        "seed": option("--recon-seed"),
        "validation": option("--recon-validation"),
    }
