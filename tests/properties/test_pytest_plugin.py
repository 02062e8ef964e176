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

# each test runs pytest (a process of its own, or pytester's session): heavy, second tier
pytestmark = [pytest.mark.heavy, pytest.mark.slow]
pytest_plugins = ("pytester",)


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


def test_a_session_does_not_pass_its_verdict_to_the_next_one_in_process(
    pytester: pytest.Pytester,
) -> None:
    # pytest.main and pytester run sessions in one process: an unchecked target of one
    # session must not make a later, passing one exit 2
    pytester.makepyfile(
        test_needs_target="def test_needs_target(recon_context):\n    pass\n",
        test_plain="def test_plain():\n    pass\n",
    )
    unchecked = pytester.runpytest_inprocess("test_needs_target.py", "--recon-impl", "")
    assert unchecked.ret == 2, unchecked.stdout.str()[-3000:]
    assert "empty" in unchecked.stdout.str()
    passing = pytester.runpytest_inprocess("test_plain.py")
    passing.assert_outcomes(passed=1)
    assert passing.ret == 0, passing.stdout.str()[-3000:]


#: what the plugin must not load into a pytest run that does not use it
HEAVY_MODULES = ("torch", "sympy", "hypothesis", "numpy")


def test_an_unrelated_run_loads_neither_torch_nor_hypothesis_nor_sympy(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "conftest.py").write_text(
        "import sys\n\n\n"
        "def pytest_collection_finish(session):\n"
        "    plugin = session.config.pluginmanager.get_plugin('recon_spec')\n"
        f"    loaded = sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules)\n"
        "    print('recon-spec plugin:', plugin is not None, 'heavy:', loaded)\n"
    )
    environment = {
        name: value for name, value in os.environ.items() if name not in ("RECON_IMPL", "RECON_API")
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-s", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env=environment,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # the plugin is loaded (its entry point), and loads nothing heavy for this run
    assert "recon-spec plugin: True heavy: []" in done.stdout, done.stdout[-3000:]


def test_the_suites_hypothesis_profiles_exist_for_hypothesis_profile(
    pytester: pytest.Pytester,
) -> None:
    # hypothesis loads --hypothesis-profile in its pytest_configure: the plugin registers
    # its profiles first, now that it no longer imports them in every run
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    done = pytester.runpytest_subprocess(
        "--hypothesis-profile", "recon-spec-ci", "-p", "no:cacheprovider"
    )
    done.assert_outcomes(passed=1)


def test_recon_skip_takes_the_api_names_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    assert pytester.runpytest_inprocess("--recon-skip", "compute_total_loss").ret == 0
    bad = pytester.runpytest_inprocess("--recon-skip", "compute_totl_loss")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "invalid choice: 'compute_totl_loss'" in bad.stderr.str()
