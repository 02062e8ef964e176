"""Hypothesis settings profiles of the conformance suite.

* ``dev``: quick, random; for the edit-run loop.
* ``ci``: deterministic (derandomized: the same examples every run of the same code), the
  default when the environment variable CI is true.
* ``thorough``: ten times the examples of ``ci``, random; for nightly runs.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Verbosity, settings

PROFILES: dict[str, settings] = {
    "dev": settings(max_examples=20, deadline=None),
    "ci": settings(max_examples=60, deadline=None, derandomize=True, database=None),
    "thorough": settings(max_examples=600, deadline=None),
}

# The suite's strategies draw whole batches, and a slow implementation under test is not
# the strategies' fault.
_COMMON = dict(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    report_multiple_bugs=False,
    verbosity=Verbosity.quiet,
)


def default_profile() -> str:
    return "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"


def profile_settings(name: str | None = None, *, max_examples: int | None = None) -> settings:
    """The settings of profile ``name`` (default: ``default_profile()``)."""
    name = name or default_profile()
    if name not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {name!r}")
    chosen = settings(PROFILES[name], **_COMMON)
    if max_examples is not None:
        chosen = settings(chosen, max_examples=max_examples)
    return chosen
