"""A target's floating-point mode is its own: the suite draws and compares in the mode a
process starts with (properties/float_mode.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from properties.float_mode import flushes, target_mode
from tests.properties.cli_runs import run_cli

TARGET = str(Path(__file__).parent / "targets" / "flushes_subnormals.py") + ":losses"


def test_a_call_runs_in_the_mode_the_target_set_and_the_suite_in_its_own() -> None:
    assert not flushes()
    with target_mode():
        torch.set_flush_denormal(True)  # the target turns flush-to-zero on
        assert flushes()
    assert not flushes()  # the suite's code between calls
    with target_mode():
        assert flushes()  # the target's next call, in its mode
        torch.set_flush_denormal(False)  # the target turns it off again
    with target_mode():
        assert not flushes()
    assert not flushes()


@pytest.mark.heavy
@pytest.mark.slow
def test_a_target_that_turns_on_flush_to_zero_is_judged_on_its_answers() -> None:
    # hypothesis refuses to draw floats where subnormals flush (FloatingPointError): that was
    # reported as the target's failure, with state between calls
    done = run_cli(
        "check", TARGET, "-i", "contract", "-i", "invariance", "-i", "algebra", "--no-database"
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert "FloatingPointError" not in done.stdout + done.stderr
