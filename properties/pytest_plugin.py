"""pytest plugin: the invariants as pytest tests, pointed at any implementation.

    pytest --pyargs properties --recon-impl MODULE:CALLABLE [-n 2]

The target may also come from the environment variable RECON_IMPL; without either, the
bundled ``recon_impl:reconstruction_losses`` is checked. The plugin is registered through
the ``pytest11`` entry point, so its options exist wherever recon-spec is installed.
"""

from __future__ import annotations

import pytest

from properties.options import RUN_OPTIONS, domain_from


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recon-spec", "recon-spec conformance suite")
    group.addoption(
        "--recon-impl",
        metavar="MODULE:CALLABLE",
        help="implementation to check (default: $RECON_IMPL, else the bundled one)",
    )
    for name, options in RUN_OPTIONS:
        group.addoption(f"--recon-{name}", **options)
    group.addoption(
        "--recon-validation",
        action="store_true",
        help="also run the opt-in validation invariants",
    )


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
    from properties.profiles import default_profile, profile_settings

    option = request.config.getoption
    profile = option("--recon-profile") or default_profile()
    settings = profile_settings(profile, max_examples=option("--recon-max-examples"))
    domain = domain_from(
        max_alpha=option("--recon-max-alpha"),
        max_loss=option("--recon-max-loss"),
        dtypes=option("--recon-dtypes"),
        device=option("--recon-device"),
    )
    return {
        "profile": profile,
        "settings": settings,
        "domain": domain,
        "seed": option("--recon-seed"),
        "validation": option("--recon-validation"),
    }
