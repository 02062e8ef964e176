"""What a target raises that is not an answer (properties/escapes.py): a skip, hypothesis's
own exceptions, an exit. Each gives a non-zero verdict that names it, on the CLI, under the
pytest plugin and for an API module; a target that skips only some inputs is not a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.properties.cli_runs import run_cli
from tests.properties.test_pytest_plugin import conformance

TARGET = f"{Path(__file__).parent / 'targets' / 'raises_after_plain.py'}:losses"
TWO = ("-i", "oracle-agreement", "-i", "padding-ignored", "--max-examples", "20", "-j", "1")


@pytest.mark.parametrize(
    ("raises", "named", "status", "verdict"),
    [
        ("SkipTest", "unittest.case.SkipTest: not supported", "FAILED", 1),
        ("pytest.skip", "Skipped: not supported", "FAILED", 1),
        ("assume", "hypothesis.errors.UnsatisfiedAssumption", "FAILED", 1),
        ("Flaky", "hypothesis.errors.Flaky: flaky", "FAILED", 1),
        ("SystemExit", "SystemExit: 3", "CRASHED", 2),
        ("KeyboardInterrupt", "KeyboardInterrupt", "CRASHED", 2),
    ],
)
def test_a_target_that_raises_what_is_not_an_answer_never_passes(
    raises: str, named: str, status: str, verdict: int
) -> None:
    done = run_cli("check", TARGET, *TWO, environment={"RAISES": raises})
    assert done.returncode == verdict, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"a call of the target raised {named}" in done.stdout
    assert f"{status} oracle-agreement" in done.stdout
    assert f"{status} padding-ignored" in done.stdout
    assert "0 passed" in done.stdout.splitlines()[-1]


def test_a_target_that_skips_only_half_precision_inputs_fails_there() -> None:
    done = run_cli(
        "check",
        TARGET,
        "-i",
        "oracle-agreement-low-precision",
        "--max-examples",
        "10",
        environment={"RAISES": "SkipTest", "RAISES_ONLY_HALF": "1"},
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FAILED oracle-agreement-low-precision" in done.stdout
    assert "a skip is not a pass" in done.stdout


@pytest.mark.heavy
@pytest.mark.slow
def test_a_skip_is_not_a_pass_under_the_pytest_plugin() -> None:
    done = conformance(
        "--recon-impl",
        TARGET,
        "--recon-max-examples",
        "10",
        "-k",
        "oracle or padding",
        RAISES="SkipTest",
    )
    assert done.returncode == 1, done.stdout[-3000:]
    assert "skipped" not in done.stdout.splitlines()[-1]
    assert " passed" not in done.stdout.splitlines()[-1]
    assert "a call of the target raised unittest.case.SkipTest" in done.stdout


def test_an_api_module_that_skips_or_exits_never_passes(tmp_path: Path) -> None:
    module = tmp_path / "skipping_api.py"
    module.write_text(
        "import os, sys, unittest\n"
        "from recon_impl import *  # noqa: F403\n"
        "from recon_impl import compute_total_loss as _total\n"
        "def compute_total_loss(*args, **kwargs):\n"
        "    if os.environ['RAISES'] == 'SystemExit':\n"
        "        sys.exit(4)\n"
        "    raise unittest.SkipTest('not supported')\n"
    )
    cases = (
        ("SkipTest", "FAILED", 1, "unittest.case.SkipTest"),
        ("SystemExit", "CRASHED", 2, "SystemExit: 4"),
    )
    for raises, status, verdict, named in cases:
        done = run_cli(
            "check-api",
            str(module),
            "-i",
            "total-loss-reconstruction",
            "--max-examples",
            "5",
            environment={"RAISES": raises},
        )
        assert done.returncode == verdict, done.stdout[-3000:] + done.stderr[-3000:]
        assert f"{status} total-loss-reconstruction" in done.stdout
        assert f"a call of the target raised {named}" in done.stdout


def _returns_on_meta(token_nll, zfree_token_nll, mask, config):
    from properties.default_target import reconstruction_losses

    outputs = reconstruction_losses(token_nll, zfree_token_nll, mask, config)
    return {name: value.to("meta") for name, value in outputs.items()}


def _lacks_an_output(token_nll, zfree_token_nll, mask, config):
    from properties.default_target import reconstruction_losses

    outputs = dict(reconstruction_losses(token_nll, zfree_token_nll, mask, config))
    del outputs["token_concentration_factor"]
    return outputs


@pytest.mark.parametrize(
    ("implementation", "said"),
    [
        (_returns_on_meta, "is on meta, the inputs on cpu"),
        (_lacks_an_output, "the target's result lacks token_concentration_factor"),
    ],
)
def test_a_result_that_breaks_the_contract_is_said_in_the_contracts_words(
    implementation, said: str
) -> None:
    # what the suite reads off a result is not a raise of the target: a meta tensor's value
    # was read (Tensor.item() on meta), and a contract message said "the target raised"
    from properties.invariants import by_id
    from properties.profiles import profile_settings
    from properties.runner import run_invariant

    for invariant_id in ("outputs-contract", "oracle-agreement"):
        result = run_invariant(
            by_id(invariant_id), implementation, target="t:f", settings=profile_settings("ci")
        )
        assert result.status == "failed", result
        message = result.failure.message
        assert said in message and "raised" not in message, message
        assert result.failure.raised is None and not result.failure.target_errors
