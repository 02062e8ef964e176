"""``pytest --pyargs properties``: the invariants as pytest tests, with the verdict rules of
``recon-spec check`` (a target that cannot be checked is never a pass)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
TARGETS = Path(__file__).parent / "targets"

# each test is a pytest process of its own: heavy, and of the second tier
pytestmark = [pytest.mark.heavy, pytest.mark.slow]


def conformance(*args: str, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "properties", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), **environment},
    )


def test_the_plugin_runs_the_catalog_against_a_target() -> None:
    done = conformance(
        "--recon-impl",
        "properties.zoo.wrong:float64_outputs",
        "--recon-max-examples",
        "3",
        "-k",
        "outputs-contract or kappa-bounds",
    )
    assert "recon-spec target: properties.zoo.wrong:float64_outputs" in done.stdout
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
    assert done.returncode == 1


@pytest.mark.parametrize(
    ("args", "environment"),
    [(("--recon-impl", ""), {}), ((), {"RECON_IMPL": ""})],
    ids=["option", "environment"],
)
def test_an_empty_target_is_an_error_never_a_pass(args, environment) -> None:
    done = conformance(*args, "-k", "kappa-bounds", **environment)
    assert done.returncode == 2, done.stdout[-3000:]
    assert "passed" not in done.stdout.splitlines()[-1]
    assert "empty" in done.stdout


def test_an_unloadable_target_is_an_error_never_a_pass() -> None:
    done = conformance("--recon-impl", f"{TARGETS / 'exits_at_import.py'}:losses", "-k", "kappa")
    assert done.returncode == 2, done.stdout[-3000:]
    assert "SystemExit: 7" in done.stdout
    assert " passed" not in done.stdout.splitlines()[-1]


def test_a_crash_fails_its_test_and_the_run_exits_2() -> None:
    done = conformance(
        "--recon-impl",
        f"{TARGETS / 'segfaults.py'}:losses",
        "--recon-max-examples",
        "10",
        "-k",
        "alpha-zero-uniform or huge-alpha-concentration",
    )
    assert done.returncode == 2, done.stdout[-3000:]
    assert "killed by signal SIGSEGV" in done.stdout
    assert "1 failed, 1 passed" in done.stdout


def test_hypothesis_profiles_and_seeds_select_the_run() -> None:
    done = conformance(
        "--recon-impl",
        "properties.zoo.wrong:kappa_ratio_of_means",
        "--hypothesis-profile",
        "recon-spec-ci",
        "--hypothesis-seed",
        "12345",
        "--recon-no-database",
        "-k",
        "kappa-bounds",
    )
    assert done.returncode == 1, done.stdout[-3000:]
    # the registered profile by its short name, the seed as given
    assert "--profile ci --seed 12345 --max-examples 60" in done.stdout
