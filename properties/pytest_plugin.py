"""pytest plugin: the invariants as pytest tests, pointed at any implementation.

    pytest --pyargs properties --recon-impl MODULE:CALLABLE [-n 2]

The target may also come from the environment variable RECON_IMPL; without either, the
bundled ``recon_impl:reconstruction_losses`` is checked. As with ``recon-spec check`` the
target runs in a worker process (one per pytest process), and a target that cannot be
checked is never a pass: an empty or unloadable target makes every test an error, a crash
or a timeout fails its test, and in each of these cases the run exits with status 2.

Profiles: ``--recon-profile`` names one of the suite's; else ``--hypothesis-profile``
(any registered hypothesis profile, ``recon-spec-ci`` for instance) is used as hypothesis
users expect; else ``ci`` when CI=true, ``dev`` otherwise. ``--recon-seed``, else
``--hypothesis-seed``, fixes the draws. The plugin is registered through the ``pytest11``
entry point, so its options exist wherever recon-spec is installed.
"""

from __future__ import annotations

import contextlib

import pytest

from properties.options import RUN_OPTIONS

UNCHECKED = ("recon-spec", "unchecked")
_unchecked_reports: list[str] = []


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


def _collects_conformance(config: pytest.Config) -> bool:
    return any("properties" in str(arg) for arg in config.args)


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("--recon-impl") is None and not _collects_conformance(config):
        return None
    from properties.target import TargetLoadError, target_name

    try:
        return f"recon-spec target: {target_name(config.getoption('--recon-impl'))}"
    except TargetLoadError as error:
        return f"recon-spec target: none ({error})"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if UNCHECKED in report.user_properties and report.nodeid not in _unchecked_reports:
        _unchecked_reports.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _unchecked_reports and not hasattr(session.config, "workerinput"):
        session.exitstatus = 2  # the target could not be checked, as recon-spec check says


class _RunContext:
    """What every conformance test of a session shares: the target's worker, the options."""

    def __init__(self, config: pytest.Config) -> None:
        from dataclasses import replace

        from hypothesis import settings

        from properties.database import run_storage
        from properties.invariants import by_id
        from properties.invariants.edge_cases import EDGE_CASES
        from properties.options import domain_from
        from properties.profiles import default_profile, profile_settings, run_settings
        from properties.supervisor import Supervisor
        from properties.target import target_name

        option = config.getoption
        self.target = target_name(option("--recon-impl"))  # TargetLoadError: an error
        examples = option("--recon-max-examples")
        if option("--recon-profile") is None and option("hypothesis_profile", None):
            self.profile = option("hypothesis_profile")
            self.settings = run_settings(settings.default, max_examples=examples)
        else:
            self.profile = option("--recon-profile") or default_profile()
            self.settings = profile_settings(self.profile, max_examples=examples)
        seed = option("--recon-seed")
        self.seed = seed if seed is not None else option("hypothesis_seed", None)
        self.dtypes = option("--recon-dtypes")
        self.domain = domain_from(
            max_alpha=option("--recon-max-alpha"),
            max_loss=option("--recon-max-loss"),
            dtypes=self.dtypes,
            device=option("--recon-device"),
        )
        self.validation = option("--recon-validation")
        self.no_database = option("--recon-no-database")
        #: why the target cannot be checked, once that is known
        self.unusable: str | None = None
        self._resources = contextlib.ExitStack()
        environment = self._resources.enter_context(run_storage(not self.no_database))
        plain = replace(
            EDGE_CASES["single-token-rows"].case,
            dtype=self.domain.dtypes[0],
            device=self.domain.device,
        )
        self.supervisor = self._resources.enter_context(
            Supervisor(
                self.target,
                plain_input=plain,
                statement_of=lambda invariant_id: by_id(invariant_id).statement,
                call_timeout=option("--recon-call-timeout"),
                environment=environment,
            )
        )

    def draw_options(self, seed: int | None) -> dict:
        """The options a ``recon-spec check`` needs to repeat a test's run."""
        return {
            "profile": self.profile,
            "seed": seed,
            "max-examples": self.settings.max_examples,
            "max-alpha": self.domain.max_alpha,
            "max-loss": self.domain.max_loss,
            "dtypes": self.dtypes,
            "device": self.domain.device,
        }

    def close(self) -> None:
        self._resources.close()


@pytest.fixture(scope="session")
def recon_run(request: pytest.FixtureRequest):
    """The session's ``_RunContext``; an empty or malformed target name is an error."""
    context = _RunContext(request.config)
    yield context
    context.close()


@pytest.fixture
def recon_context(request: pytest.FixtureRequest):
    """``recon_run`` for one test; a target that cannot be named marks the test (and so the
    run) as not checked."""
    from properties.target import TargetLoadError

    try:
        return request.getfixturevalue("recon_run")
    except TargetLoadError as error:
        request.node.user_properties.append(UNCHECKED)
        raise pytest.UsageError(f"recon-spec: {error}") from None
