"""``recon-spec check-api`` as a user runs it: the exit status (0 held, 1 failed, 2 not
checked), the report, ``--skip``, and the pytest form ``--recon-api``. Few and small: the
invariants themselves are tested in process (``test_api_zoo.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from properties.api import INVARIANTS, select
from tests.properties.cli_runs import run_cli

ROOT = Path(__file__).parents[2]
TARGETS = Path(__file__).parent / "targets"
WITHOUT_TOTAL_LOSS = str(TARGETS / "api_without_total_loss.py")


def check_api(*args: str, cwd: Path = ROOT, in_process: bool = True, **environment: str):
    return run_cli("check-api", *args, cwd=cwd, in_process=in_process, environment=environment)


@pytest.mark.slow
@pytest.mark.heavy
def test_recon_impl_passes_the_whole_api_check() -> None:
    # as a user runs it: the entry point in a process of its own
    # (the opt-in logits group, which recon_impl passes too, test_api_zoo.py checks in process)
    done = check_api("recon_impl", "--profile", "ci", "--no-database", in_process=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "recon-spec check-api: recon_impl" in done.stdout
    assert f"{len(select())} passed, 0 failed" in done.stdout
    # without --with-logits, the opt-in group is left out
    assert {i.id for i in INVARIANTS} - {i.id for i in select()} == {
        i.id for i in INVARIANTS if i.group == "logits"
    }


@pytest.mark.heavy
def test_the_logits_group_runs_on_request_and_names_a_missing_function() -> None:
    opt_in = [i.id for i in INVARIANTS if i.opt_in]
    assert opt_in and {i.group for i in INVARIANTS if i.opt_in} == {"logits"}
    # --with-logits adds the group to the whole check, and a module without the function
    # leaves both of its invariants not checked
    missing = check_api(
        WITHOUT_TOTAL_LOSS,
        *("--with-logits", "--skip", "compute_total_loss", "--max-examples", "2", "-j", "1"),
    )
    assert missing.returncode == 2, missing.stdout[-4000:]
    assert "the module has no token_nll_from_logits" in missing.stdout
    assert f"{len(opt_in)} not checked" in missing.stdout, missing.stdout[-4000:]
    wrong = check_api(
        "properties.zoo.api.wrong:logits_wrapped_labels", "-i", "logits-token-nll", "--no-database"
    )
    assert wrong.returncode == 1, wrong.stdout[-4000:]
    # the named edge case or a random draw: either way a uint8 class 156 taken for padding
    assert "compared as integers" in wrong.stdout and "torch.uint8" in wrong.stdout
    assert "156" in wrong.stdout


def test_a_wrong_module_exits_1_with_its_counterexample(tmp_path: Path) -> None:
    done = check_api(
        "properties.zoo.api.wrong:removed_flag_deleted",
        "-i",
        "flags",
        "--profile",
        "ci",
        "--max-examples",
        "20",
        "--no-database",
        "-j",
        "1",
    )
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    assert "[1] FAILED flags-removed" in done.stdout
    assert "5 passed, 1 failed" in done.stdout
    assert "from properties.zoo.api.wrong import removed_flag_deleted as api" in done.stdout
    rerun = "    rerun: recon-spec check-api properties.zoo.api.wrong:removed_flag_deleted"
    assert rerun in done.stdout


def test_an_api_object_or_its_factory_is_named_as_module_colon_name(tmp_path: Path) -> None:
    # a factory of no arguments (the zoo's correct API), called in the worker
    done = check_api("properties.zoo.api.correct:api", "-i", "config-fields", "--no-database")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "recon-spec check-api: properties.zoo.api.correct:api" in done.stdout
    # a file's attribute holding the API object itself, a namespace
    adapter = tmp_path / "my_trainer.py"
    adapter.write_text(
        "import types\nimport recon_impl\n"
        "API = types.SimpleNamespace(\n"
        "    ReconstructionLossConfig=recon_impl.ReconstructionLossConfig,\n"
        "    DisentanglementLossConfig=recon_impl.DisentanglementLossConfig,\n"
        ")\n"
    )
    done = check_api(f"{adapter}:API", "-i", "config-fields", "-i", "flags-exist")
    assert done.returncode == 2, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 passed, 0 failed, 1 not checked" in done.stdout
    assert "the module has no add_reconstruction_loss_arguments" in done.stdout


def test_a_missing_name_is_not_checked_unless_skipped() -> None:
    args = (WITHOUT_TOTAL_LOSS, "-i", "total-loss-bundle", "-i", "flags-exist", "-j", "1")
    done = check_api(*args, "--max-examples", "5")
    assert done.returncode == 2, done.stdout[-4000:] + done.stderr[-2000:]
    assert "MISSING total-loss-bundle" in done.stdout
    assert "the module has no compute_total_loss" in done.stdout
    assert "1 passed, 0 failed, 1 not checked" in done.stdout
    skipped = check_api(*args, "--max-examples", "5", "--skip", "compute_total_loss")
    assert skipped.returncode == 0, skipped.stdout[-4000:] + skipped.stderr[-2000:]
    assert "1 passed, 0 failed, 1 skipped" in skipped.stdout


@pytest.mark.parametrize(
    ("args", "environment", "message"),
    [
        (("",), {}, "the API module is an empty name"),
        ((), {"RECON_API": ""}, "$RECON_API is set but empty"),
        (("recon_impl:",), {}, "names nothing after its last ':'"),
        (("recon_impl:no-name",), {}, "names 'no-name' after its last ':'"),
        (("recon_impl:no_such_name",), {}, "'recon_impl' has no attribute 'no_such_name'"),
        (("recon_impl:compute_total_loss",), {}, "is called with no arguments"),
        (("no_such_module",), {}, "cannot import 'no_such_module'"),
        ((str(TARGETS / "exits_at_import.py"),), {}, "SystemExit: 7"),
        (("--skip", "compute_loss"), {}, "argument --skip: invalid choice"),
    ],
)
def test_a_module_that_cannot_be_checked_exits_2(args, environment, message) -> None:
    done = check_api(*args, "--max-examples", "2", **environment)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert "passed" not in done.stdout


def test_list_shows_every_api_invariant_and_what_it_needs() -> None:
    done = check_api("--list")
    assert done.returncode == 0
    for invariant in INVARIANTS:
        assert invariant.id in done.stdout
    assert "needs add_reconstruction_loss_arguments" in done.stdout


def conformance(*args: str, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "properties", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), **environment},
    )


# The pytest form, one scenario a test (each a pytest process of its own, so that the
# parallel run can spread them); where a verdict is about a missing or skipped name, two
# examples of the invariant that runs are enough.


@pytest.mark.heavy
@pytest.mark.slow
def test_the_pytest_form_checks_an_api_module_with_the_same_verdicts() -> None:
    done = conformance(
        "--recon-api",
        "properties.zoo.api.wrong:crossed_flags",
        "--recon-max-examples",
        "10",
        "-k",
        "flags-round-trip or flags-exist",
    )
    assert "recon-spec API module: properties.zoo.api.wrong:crossed_flags" in done.stdout
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
    assert "deselected" in done.stdout  # the stack's invariants: only an API module was named
    assert done.returncode == 1


@pytest.mark.heavy
@pytest.mark.slow
def test_the_pytest_form_fails_a_missing_name_as_not_checked() -> None:
    missing = conformance(
        "--recon-api",
        WITHOUT_TOTAL_LOSS,
        "--recon-max-examples",
        "2",
        "-k",
        "total-loss-bundle or flags-exist",
    )
    assert missing.returncode == 2, missing.stdout[-3000:]
    assert "1 failed, 1 passed" in missing.stdout


@pytest.mark.heavy
@pytest.mark.slow
def test_the_pytest_form_skips_what_recon_skip_names() -> None:
    skipped = conformance(
        "--recon-api",
        WITHOUT_TOTAL_LOSS,
        "--recon-skip",
        "compute_total_loss",
        "--recon-max-examples",
        "2",
        "-k",
        "total-loss-bundle or flags-exist",
    )
    assert skipped.returncode == 0, skipped.stdout[-3000:]
    assert "1 passed, 1 skipped" in skipped.stdout


@pytest.mark.heavy
@pytest.mark.slow
def test_the_pytest_form_with_an_empty_api_name_is_an_error() -> None:
    empty = conformance("--recon-api", "", "-k", "flags-exist")
    assert empty.returncode == 2 and "empty" in empty.stdout


def test_configs_that_compare_by_identity_pass_the_config_and_flags_groups() -> None:
    # @dataclass(frozen=True, eq=False): equality is no part of the seed's contract
    module = str(TARGETS / "api_identity_equality.py")
    done = check_api(module, "-i", "config", "-i", "flags", "--no-database", "-j", "1")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
