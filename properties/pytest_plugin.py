"""pytest plugin: the invariants as pytest tests, pointed at any implementation.

    pytest --pyargs properties --recon-impl MODULE:CALLABLE [-n 2]
    pytest --pyargs properties --recon-api MODULE[:NAME] [--recon-skip NAME] [-n 2]

The target may also come from the environment variable RECON_IMPL; without either, the
bundled ``recon_impl:reconstruction_losses`` is checked. As with ``recon-spec check`` the
target runs in a worker process (one per pytest process), and a target that cannot be
checked is never a pass: an empty or unloadable target makes every test an error, a crash
or a timeout fails its test, and in each of these cases the run exits with status 2.

``--recon-api MODULE`` (or RECON_API; ``path/to/file.py`` and ``MODULE:NAME`` too, named as
for ``recon-spec check-api``: ``properties.api.module``) runs the API invariants of
``recon-spec check-api`` against an API module instead (with ``--recon-impl`` as well, both
catalogs run): a name the module lacks fails the tests that need it as not checked (exit
status 2), unless ``--recon-skip NAME`` skips them.

Profiles: ``--recon-profile`` names one of the suite's; else ``--hypothesis-profile``
(any registered hypothesis profile, ``recon-spec-ci`` for instance) is used as hypothesis
users expect; else ``ci`` when CI=true, ``dev`` otherwise. ``--recon-seed``, else
``--hypothesis-seed``, fixes the draws. The plugin is registered through the ``pytest11``
entry point, so its options exist wherever recon-spec is installed; it imports torch,
hypothesis and sympy only for a run that uses it (a recon option, RECON_IMPL or RECON_API,
or the ``properties`` tests collected), never for an unrelated pytest run.
"""

from __future__ import annotations

import argparse
import contextlib
import os

import pytest

from properties.options import API_ENVIRONMENT_VARIABLE, ENVIRONMENT_VARIABLE, PROFILES, RUN_OPTIONS

UNCHECKED = ("recon-spec", "unchecked")
#: the name of the session's ``_Verdict`` among its config's plugins
_VERDICT = "recon-spec-verdict"


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
    group.addoption(
        "--recon-api",
        metavar="MODULE[:NAME]",
        help="API to check with the API invariants: a module, or MODULE:NAME for an object "
        "or a no-argument factory of one (default: $RECON_API; without "
        "either, the API invariants are deselected)",
    )
    group.addoption(
        "--recon-skip",
        action="append",
        default=[],
        type=_api_name,
        metavar="NAME",
        help="skip the API invariants that need NAME, one of the five (repeatable)",
    )
    group.addoption(
        "--recon-logits",
        action="store_true",
        help="also run the opt-in API invariants of recon_impl's logits helper, as "
        "recon-spec check-api --with-logits does",
    )


def _api_name(text: str) -> str:
    """A name ``--recon-skip`` may give: a type, not ``choices``, so that ``spec.api`` (and
    sympy with it) is imported only when the option is given."""
    from spec.api import PUBLIC_NAMES, TOKEN_NLL_FROM_LOGITS

    names = (*PUBLIC_NAMES, TOKEN_NLL_FROM_LOGITS)
    if text not in names:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {text!r} (choose from {', '.join(map(repr, names))})"
        )
    return text


class _Verdict:
    """The tests of one session that could not check their target (the run then exits 2).

    One per config, registered as a plugin of its own: module-level state would carry one
    session's verdict into the next session of the same process (``pytest.main``, pytester).
    """

    def __init__(self) -> None:
        self.unchecked: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if UNCHECKED in report.user_properties and report.nodeid not in self.unchecked:
            self.unchecked.append(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.unchecked and not hasattr(session.config, "workerinput"):
            session.exitstatus = 2  # the target could not be checked, as recon-spec check says


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Verdict(), _VERDICT)
    # hypothesis's own pytest_configure (after this one) loads --hypothesis-profile, so the
    # suite's profiles must be registered by then; other runs are spared hypothesis's import
    if config.getoption("hypothesis_profile", None) in PROFILES.values():
        import properties.profiles  # noqa: F401


STACK_TESTS = "properties.test_conformance"
API_TESTS = "properties.test_api_conformance"


def _collects_conformance(config: pytest.Config) -> bool:
    return any("properties" in str(arg) for arg in config.args)


def _checks_api(config: pytest.Config) -> bool:
    return config.getoption("--recon-api") is not None or API_ENVIRONMENT_VARIABLE in os.environ


def _checks_stack(config: pytest.Config) -> bool:
    explicit = config.getoption("--recon-impl") is not None or ENVIRONMENT_VARIABLE in os.environ
    return explicit or not _checks_api(config)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    named = config.getoption("--recon-impl") is not None or _checks_api(config)
    if not named and not _collects_conformance(config):
        return None
    from properties.api.module import api_target_name
    from properties.target import TargetLoadError, target_name

    lines = []
    if _checks_stack(config):
        try:
            lines.append(f"recon-spec target: {target_name(config.getoption('--recon-impl'))}")
        except TargetLoadError as error:
            lines.append(f"recon-spec target: none ({error})")
    if _checks_api(config):
        try:
            lines.append(
                f"recon-spec API module: {api_target_name(config.getoption('--recon-api'))}"
            )
        except TargetLoadError as error:
            lines.append(f"recon-spec API module: none ({error})")
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The stack's invariants run unless only an API module is named; the API invariants
    run when one is. Only this plugin's own test modules are touched."""
    unwanted = set()
    if not _checks_api(config):
        unwanted.add(API_TESTS)
    if not _checks_stack(config):
        unwanted.add(STACK_TESTS)
    if not unwanted:
        return
    kept, dropped = [], []
    for item in items:
        module = getattr(getattr(item, "module", None), "__name__", None)
        (dropped if module in unwanted else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


class _RunContext:
    """What every conformance test of a session shares: the target's worker, the options.
    ``kind`` is ``stack`` (``--recon-impl``) or ``api`` (``--recon-api``)."""

    def __init__(self, config: pytest.Config, kind: str = "stack") -> None:

        from hypothesis import settings

        from properties.api.module import api_target_name
        from properties.database import run_storage
        from properties.invariants.contract import plain_input
        from properties.options import SIZE_OPTIONS, domain_from
        from properties.profiles import default_profile, profile_settings, run_settings
        from properties.supervisor import Supervisor
        from properties.target import target_name

        option = config.getoption
        self.kind = kind
        self.command = "check-api" if kind == "api" else "check"
        if kind == "api":
            from properties.api import by_id

            self.target = api_target_name(option("--recon-api"))  # TargetLoadError: an error
        else:
            from properties.invariants import by_id

            self.target = target_name(option("--recon-impl"))  # TargetLoadError: an error
        self.skip = tuple(option("--recon-skip") or ())
        self.logits = option("--recon-logits")
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
        #: the sizes given (None: the default), as a rerun repeats them
        self._sizes = {name: option(f"--recon-{name}") for name in SIZE_OPTIONS}
        self.domain = domain_from(
            max_alpha=option("--recon-max-alpha"),
            max_loss=option("--recon-max-loss"),
            dtypes=self.dtypes,
            device=option("--recon-device"),
            **{name.replace("-", "_"): value for name, value in self._sizes.items()},
        )
        self.validation = option("--recon-validation")
        self.no_database = option("--recon-no-database")
        #: why the target cannot be checked, once that is known
        self.unusable: str | None = None
        self._resources = contextlib.ExitStack()
        environment = self._resources.enter_context(run_storage(not self.no_database))
        plain = plain_input(self.domain)
        self.supervisor = self._resources.enter_context(
            Supervisor(
                self.target,
                plain_input=None if kind == "api" else plain,
                statement_of=lambda invariant_id: by_id(invariant_id).statement,
                call_timeout=option("--recon-call-timeout"),
                environment=environment,
                kind=kind,
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
            **self._sizes,
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


@pytest.fixture(scope="session")
def recon_api_run(request: pytest.FixtureRequest):
    """The session's ``_RunContext`` for the API module."""
    context = _RunContext(request.config, kind="api")
    yield context
    context.close()


def _context(request: pytest.FixtureRequest, name: str):
    from properties.target import TargetLoadError

    try:
        return request.getfixturevalue(name)
    except TargetLoadError as error:
        request.node.user_properties.append(UNCHECKED)
        raise pytest.UsageError(f"recon-spec: {error}") from None


@pytest.fixture
def recon_context(request: pytest.FixtureRequest):
    """``recon_run`` for one test; a target that cannot be named marks the test (and so the
    run) as not checked."""
    return _context(request, "recon_run")


@pytest.fixture
def recon_api_context(request: pytest.FixtureRequest):
    """``recon_api_run`` for one test, as ``recon_context``."""
    return _context(request, "recon_api_run")


def run_conformance_test(invariant, context: _RunContext, request: pytest.FixtureRequest) -> None:
    """One invariant as one test: passes, fails with the report's section, or fails as not
    checked (the run then exits 2)."""
    import io

    from properties.report import failure_section
    from properties.runner import invariant_seed
    from properties.supervisor import TargetUnusable
    from properties.worker import SearchSettings, WorkRequest

    if not invariant.applies(context.domain):
        pytest.skip(f"{invariant.id} says nothing on the chosen domain")
    if context.unusable is not None:
        request.node.user_properties.append(UNCHECKED)
        pytest.fail(context.unusable, pytrace=False)
    seed = invariant_seed(invariant, context.seed, context.settings)
    work = WorkRequest(
        invariant.id,
        SearchSettings.of(context.settings),
        seed,
        context.domain,
        use_database=not context.no_database,
    )
    try:
        (result,) = context.supervisor.run([work])
    except TargetUnusable as error:
        context.unusable = f"recon-spec: {context.target} cannot be checked: {error}"
        request.node.user_properties.append(UNCHECKED)
        pytest.fail(context.unusable, pytrace=False)
    if result.status == "passed":
        return
    if result.status != "failed":  # crashed, timed out, not checked, or the suite's error
        request.node.user_properties.append(UNCHECKED)
    text = io.StringIO()
    failure_section(
        invariant,
        result,
        context.target,
        context.draw_options(result.seed),
        text,
        no_database=context.no_database,
        command=context.command,
    )
    pytest.fail(text.getvalue(), pytrace=False)
