"""``recon-spec check``: exit status, table, options (run as a user runs it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def check(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "properties.cli", "check", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


def test_passing_target_exits_0_with_a_table() -> None:
    done = check("-i", "outputs-contract", "-i", "kappa-bounds", "--max-examples", "5", "-j", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "recon-spec check: recon_impl:reconstruction_losses" in done.stdout
    assert "invariant" in done.stdout and "examples" in done.stdout
    assert "kappa-bounds" in done.stdout and "ok" in done.stdout
    assert "2 passed, 0 failed" in done.stdout


def test_failing_target_exits_1_with_a_reproduction() -> None:
    done = check(
        "properties.zoo.wrong:cc_scale_missing",
        "-i",
        "oracle-agreement",
        "--max-examples",
        "20",
        "--profile",
        "ci",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED oracle-agreement" in done.stdout
    assert "from properties.zoo.wrong import cc_scale_missing as impl" in done.stdout
    assert (
        "rerun this invariant: recon-spec check properties.zoo.wrong:cc_scale_missing"
        in done.stdout
    )


def test_file_path_targets_and_parallel_workers(tmp_path: Path) -> None:
    target = tmp_path / "mine.py"
    target.write_text(
        "from recon_impl import reconstruction_losses\n"
        "def losses(l, b, m, config):\n"
        "    return reconstruction_losses(l, b, m, config)\n"
    )
    done = check(f"{target}:losses", "-i", "contract", "--max-examples", "5", "-j", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module:f", "cannot import 'no_such_module'"),
        ("recon_impl:no_such_function", "has no attribute 'no_such_function'"),
        ("recon_impl:RECONSTRUCTION_LOSS_NAMES", "not a callable"),
        ("recon_impl", "must look like MODULE:CALLABLE"),
        ("recon_impl:token_nll_from_logits", "cannot be called as f(token_nll"),
    ],
)
def test_target_that_cannot_be_imported_or_called_exits_2(target: str, message: str) -> None:
    done = check(target, "--max-examples", "2")
    assert done.returncode == 2
    assert message in done.stderr


def test_unknown_invariant_exits_2_and_list_shows_all() -> None:
    done = check("-i", "no-such-invariant")
    assert done.returncode == 2 and "no invariant 'no-such-invariant'" in done.stderr
    listed = check("--list")
    assert listed.returncode == 0
    assert "oracle-agreement" in listed.stdout and "(opt-in)" in listed.stdout


def test_target_from_the_environment(monkeypatch) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "properties.cli",
            "check",
            "-i",
            "outputs-contract",
            "--max-examples",
            "3",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**__import__("os").environ, "RECON_IMPL": "properties.zoo.wrong:float64_outputs"},
    )
    assert done.returncode == 1
    assert "recon-spec check: properties.zoo.wrong:float64_outputs" in done.stdout


def test_pytest_plugin_runs_the_catalog_against_a_target() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "properties",
            "--recon-impl",
            "properties.zoo.wrong:float64_outputs",
            "--recon-max-examples",
            "3",
            "-k",
            "outputs-contract or kappa-bounds",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert "recon-spec target: properties.zoo.wrong:float64_outputs" in done.stdout
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
