"""Hypothesis settings profiles of the conformance suite, registered with hypothesis.

* ``dev``: quick, random; for the edit-run loop.
* ``ci``: deterministic (derandomized: the same examples every run of the same code), the
  default when the environment variable CI is true.
* ``thorough``: ten times the examples of ``ci``, random; for nightly runs.

They are registered as ``recon-spec-dev``, ``recon-spec-ci`` and ``recon-spec-thorough``
(``settings.register_profile``), so that ``pytest --hypothesis-profile recon-spec-ci``
selects one as hypothesis users expect, without replacing a project's own ``ci`` profile
(or hypothesis's). ``recon-spec check --profile ci`` and ``--recon-profile ci`` name them
by their short names.

How the runner reads a profile (``properties/runner.py``): ``max_examples`` inputs are
drawn per invariant; ``derandomize`` means a fixed seed per invariant (else a random one,
reported); ``phases`` are honoured (no ``generate``: only the named edge cases and the
saved failures run; no ``shrink``: failures are reported as found). The example database
is the run's own choice (``--no-database``), whatever the profile says.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Verbosity, settings

from properties.options import PROFILES  # short name -> the name registered below

settings.register_profile(PROFILES["dev"], max_examples=20, deadline=None)
settings.register_profile(PROFILES["ci"], max_examples=60, deadline=None, derandomize=True)
settings.register_profile(PROFILES["thorough"], max_examples=600, deadline=None)

# The suite's strategies draw whole batches, and a slow implementation under test is not
# the strategies' fault; the runner writes its own report, so hypothesis stays quiet.
_COMMON = dict(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    report_multiple_bugs=False,
    verbosity=Verbosity.quiet,
)


def default_profile() -> str:
    return "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"


def run_settings(base: settings, *, max_examples: int | None = None) -> settings:
    """``base`` (any hypothesis settings) as the runner uses it."""
    chosen = settings(base, **_COMMON)
    if max_examples is not None:
        chosen = settings(chosen, max_examples=max_examples)
    return chosen


def profile_settings(name: str | None = None, *, max_examples: int | None = None) -> settings:
    """The settings of profile ``name`` (a short name; default: ``default_profile()``)."""
    name = name or default_profile()
    if name not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {name!r}")
    return run_settings(settings.get_profile(PROFILES[name]), max_examples=max_examples)
