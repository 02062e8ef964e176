"""The report a user acts on: one cause one section, the trigger named, state between calls
found and replayed, hypothesis' findings without tracebacks, adapters' own names, and the
CI options (--maxfail, -x, --api, --json, --junit-xml)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from properties.cases import LossCase
from properties.report import SUMMARY_LINES
from tests.properties.cli_runs import ROOT, run_cli
from tests.properties.test_cli import reproduction_of

TARGETS = Path(__file__).parent / "targets"
#: the longest report of a one-mistake implementation (issue's bound: 80 lines)
MOST_LINES = 80


def target(name: str, attribute: str = "losses") -> str:
    return f"{TARGETS / name}:{attribute}"


def summary_of(report: str) -> list[str]:
    """The summary's lines: from the causes' title to the first section."""
    head = report.split("=" * 100)[0]
    start = head.index(" cause")
    return head[head.rindex("\n", 0, start) + 1 :].strip("\n").splitlines()


@pytest.fixture(scope="module")
def epsilon_as_floor() -> subprocess.CompletedProcess:
    """One whole check of a one-mistake implementation, shared by the tests below."""
    wrong = "properties.zoo.wrong:epsilon_as_floor"
    return run_cli("check", wrong, "--profile", "ci", "--max-examples", "10", "--no-database")


@pytest.mark.heavy
def test_one_mistake_is_one_cause_with_one_section(epsilon_as_floor) -> None:
    report = epsilon_as_floor.stdout
    assert epsilon_as_floor.returncode == 1, report + epsilon_as_floor.stderr
    assert len(report.splitlines()) <= MOST_LINES, report
    summary = summary_of(report)
    assert summary[0] == "1 cause (its section below):" and len(summary) <= SUMMARY_LINES
    assert "matches the known variant epsilon-as-floor" in summary[1]
    assert summary[3].startswith("    rerun: recon-spec check properties.zoo.wrong:epsilon_")
    # one section, shrunk to the end, and a line for each other invariant the cause broke
    assert re.findall(r"^\[\d+\] FAILED [a-z-]+:", report, re.M) == ["[1] FAILED oracle-agreement:"]
    assert "minimal input (B x T = 1 x 1), shrunk by hypothesis:" in report
    broke = int(re.search(r"    broke (\d+):", report)[1])
    others = re.findall(r"^  FAILED [a-z-]+: ", report, re.M)
    assert len(others) == broke - 1 > 0


def test_verbose_gives_every_failing_invariant_its_section() -> None:
    done = run_cli(
        "check", "properties.zoo.wrong:epsilon_as_floor", "-i", "values", "-v",
        "--profile", "ci", "--max-examples", "10", "--no-database",
    )  # fmt: skip
    assert done.returncode == 1
    sections = re.findall(r"^FAILED ([a-z-]+):", done.stdout, re.M)
    assert len(sections) == len(set(sections)) >= 2, done.stdout
    assert done.stdout.count("rerun this invariant: recon-spec check") == len(sections)


@pytest.mark.parametrize(
    ("mistake", "trigger"),
    [
        ("mask_multiplication", "triggered by NaN at padded positions"),
        ("no_zero_row_fallback", "triggered by a row whose valid b are all 0"),
    ],
)
def test_a_nan_names_the_input_feature_that_triggers_it(mistake: str, trigger: str) -> None:
    done = run_cli(
        "check", f"properties.zoo.wrong:{mistake}", "-i", "oracle-agreement",
        "--profile", "ci", "--no-database",
    )  # fmt: skip
    assert done.returncode == 1
    (cause,) = [line for line in summary_of(done.stdout) if line.startswith("[1] ")]
    assert "NaN or inf where the spec's value is finite" in cause and trigger in cause, cause


def _printed_values(stdout: str) -> list[dict[str, float]]:
    return [ast.literal_eval(line) for line in stdout.splitlines() if line.startswith("{")]


def _run_script(path: Path, script: str) -> list[dict[str, float]]:
    path.write_text(script)
    done = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return _printed_values(done.stdout)


@pytest.mark.slow
@pytest.mark.heavy
def test_state_between_calls_is_found_and_its_calls_replayed(tmp_path: Path) -> None:
    done = run_cli(
        "check", "properties.zoo.wrong:zfree_cached_by_shape", "-i", "oracle-agreement",
        "--profile", "ci", "--no-database",
    )  # fmt: skip
    assert done.returncode == 1
    summary = "\n".join(summary_of(done.stdout))
    assert "the target keeps state between calls" in summary, done.stdout
    script = reproduction_of(done.stdout)
    assert "# The failing check:" in script
    # the script replays the calls before the failing one: its last call fails there ...
    failing_name = re.search(
        r"^# (?:What the spec expects:|  expected) (\S+) (\S+) \(observed ", script, re.M
    )
    name, expected = failing_name[1], float(failing_name[2])
    replayed = _run_script(tmp_path / "replay.py", script)
    assert len(replayed) >= 2 and replayed[-1][name] != pytest.approx(expected)
    # ... and alone, in a fresh process, it gives the spec's value
    alone = script.split("# The failing check:\n")[1]
    header = script.split("# The target keeps state")[0]
    values = _run_script(tmp_path / "alone.py", header + alone)
    assert values[-1][name] == pytest.approx(expected)


def test_hypothesis_own_findings_are_findings_not_tracebacks() -> None:
    done = run_cli(
        "check", target("wrong_first_time.py"), "-i", "oracle-agreement", "--profile", "ci",
        "--no-database",
    )  # fmt: skip
    assert done.returncode == 1
    report = done.stdout + done.stderr
    assert "Traceback" not in report and "FlakyFailure" not in report, report
    assert "the same input failed, then passed when tried again" in summary_of(done.stdout)[1]


def test_an_adapter_with_its_own_names_passes_the_validation_group() -> None:
    args = ("-i", "validation", "--with-validation", "--profile", "ci", "--no-database")
    declared = run_cli("check", target("own_names.py"), *args)
    assert declared.returncode == 0, declared.stdout[-3000:]
    undeclared = run_cli("check", target("own_names.py", "undeclared"), *args)
    assert undeclared.returncode == 1
    assert "declare them, f.argument_names = {" in undeclared.stdout
    bad = run_cli("check", target("bad_names.py"), "-i", "oracle-agreement", "--no-database")
    assert bad.returncode == 2
    assert "argument_names names nll, which are none of token_nll" in bad.stderr


def test_a_stack_that_words_its_own_errors_passes_through_its_declaration() -> None:
    # own_validation.py checks its inputs itself and words every error in its own names
    # (is_pad, inv_surprisal_eps, ...): no message is rewritten to the spec's names
    args = ("-i", "validation", "--with-validation", "--profile", "ci", "--no-database")
    declared = run_cli("check", target("own_validation.py"), *args)
    assert declared.returncode == 0, declared.stdout[-3000:]
    undeclared = run_cli("check", target("own_validation.py", "undeclared"), *args)
    assert undeclared.returncode == 1
    assert "it says: inv_surprisal_eps must be > 0" in undeclared.stdout


def test_maxfail_stops_and_gives_the_status_of_what_ran() -> None:
    done = run_cli(
        "check", "properties.zoo.wrong:global_token_mean", "--maxfail", "1", "-j", "1",
        "--profile", "ci", "--max-examples", "10", "--no-database",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    tally = re.search(r"^(\d+) passed, (\d+) failed", done.stdout, re.M)
    assert int(tally[2]) == 1 and int(tally[1]) < 25
    stopped = r"stopped after 1 invariant that did not hold \(--maxfail\): \d+ not run"
    assert re.search(stopped, done.stdout), done.stdout


@pytest.mark.heavy
@pytest.mark.slow
def test_exitfirst_on_a_target_that_hangs_gives_its_verdict_in_seconds() -> None:
    start = time.monotonic()
    done = run_cli("check", target("hangs.py"), "-x", "--call-timeout", "2", "--no-database")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "TIMEOUT" in done.stdout and "not run" in done.stdout
    # a target that hangs on its very first, plain, call: --call-timeout bounds it too
    always = run_cli("check", target("hangs_always.py"), "--call-timeout", "2", "--no-database")
    assert always.returncode == 2
    assert "call on a plain valid input was still running after 2 s" in always.stderr
    assert time.monotonic() - start < 60


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "check-api"])
def test_a_target_that_hangs_at_import_is_bounded_by_the_call_timeout(command: str) -> None:
    # its import is a call of the target: it waited the 120 s a worker may take to start
    start = time.monotonic()
    name = (
        target("hangs_at_import.py") if command == "check" else str(TARGETS / "hangs_at_import.py")
    )
    done = run_cli(command, name, "-x", "--call-timeout", "3", "--no-database")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "was still running after 3 s (--call-timeout)" in done.stderr, done.stderr
    # where it was: the target's own frames, the line that waits first
    frames = done.stderr.split("it was at (most recent call first):\n")[1].splitlines()
    assert "hangs_at_import.py" in frames[0] and "_wait_for_peers" in frames[0], frames
    assert "<module>" in frames[1] and len(frames) == 2, frames
    assert time.monotonic() - start < 60


def test_one_command_checks_the_stack_and_the_api() -> None:
    args = ("-i", "oracle-agreement", "-i", "total-loss-weighted-sum", "--profile", "ci")
    args += ("--max-examples", "10")
    both = run_cli("check", "--api", "recon_impl", *args, "--no-database")
    assert both.returncode == 0, both.stdout
    assert "recon-spec check: recon_impl" in both.stdout
    assert "recon-spec check-api: recon_impl" in both.stdout
    # the API's lines come last: the verdict of both follows them, each suite's beside it
    assert both.stdout.splitlines()[-1].startswith("recon-spec check, both suites: exit 0 (")
    wrong_api = "properties.zoo.api.wrong:router_switch_ignored"
    wrong = run_cli("check", "--api", wrong_api, *args, "--no-database")
    assert wrong.returncode == 1 and "[1] FAILED total-loss-weighted-sum" in wrong.stdout
    verdict = wrong.stdout.splitlines()[-1]
    assert verdict.startswith("recon-spec check, both suites: exit 1 ("), verdict
    assert verdict.endswith(": held (0); check-api " + wrong_api + ": failed (1))"), verdict
    unknown = run_cli("check", "--api", "recon_impl", "-i", "no-such-thing")
    assert unknown.returncode == 2 and "in either catalogue" in unknown.stderr


def test_maxfail_counts_over_both_suites() -> None:
    args = ("-i", "oracle-agreement", "-i", "total-loss-weighted-sum", "--profile", "ci")
    args += ("--max-examples", "10", "--no-database")
    wrong_stack = "properties.zoo.wrong:global_token_mean"
    first = run_cli("check", wrong_stack, "--api", "recon_impl", "-x", *args)
    assert first.returncode == 1, first.stdout
    assert "check-api recon_impl: not run (--maxfail reached in check)" in first.stdout
    assert "recon-spec check-api: recon_impl" not in first.stdout
    assert first.stdout.splitlines()[-1].endswith("failed (1); check-api recon_impl: not run)")
    wrong_api = "properties.zoo.api.wrong:router_switch_ignored"
    second = run_cli("check", wrong_stack, "--api", wrong_api, "--maxfail", "2", *args)
    assert second.returncode == 1
    assert "[1] FAILED total-loss-weighted-sum" in second.stdout


def test_json_and_junit_hold_what_the_terminal_shows(tmp_path: Path) -> None:
    document, junit = tmp_path / "verdict.json", tmp_path / "verdict.xml"
    done = run_cli(
        "check", "properties.zoo.wrong:cc_scale_missing", "-i", "oracle-agreement",
        "-i", "kappa-bounds", "--profile", "ci", "--no-database",
        "--json", str(document), "--junit-xml", str(junit),
    )  # fmt: skip
    assert done.returncode == 1
    verdict = json.loads(document.read_text())
    assert verdict["exit_status"] == 1
    (run,) = verdict["runs"]
    by_id = {record["id"]: record for record in run["invariants"]}
    assert by_id["kappa-bounds"]["result"] == "passed" and by_id["kappa-bounds"]["examples"] > 0
    failed = by_id["oracle-agreement"]
    assert failed["result"] == "failed" and "scale-missing" in failed["cause"]
    assert isinstance(eval(failed["input"], {"LossCase": LossCase, **_literals()}), LossCase)
    assert failed["section"] in done.stdout.replace("[1] ", "", 1)
    (cause,) = run["causes"]  # the summary's cause, with its rerun line as printed
    assert cause["shown"] == "oracle-agreement" and cause["text"] in done.stdout
    assert f"    rerun: {cause['rerun']}\n" in done.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "1"
    (failure,) = suite.iter("failure")
    assert "scale-missing" in failure.get("message", "")


def _literals() -> dict:
    import torch

    from properties.config import ReconstructionLossConfig

    return {"ReconstructionLossConfig": ReconstructionLossConfig, "float64": torch.float64}


def _report_files(folder: Path) -> tuple[Path, Path]:
    return folder / "verdict.json", folder / "verdict.xml"


def _not_checked(junit: Path) -> list[str]:
    """The messages of the JUnit XML's errors (a run's own reason, or an invariant's)."""
    return [error.get("message", "") for error in ET.parse(junit).getroot().iter("error")]


def test_a_report_file_that_cannot_be_written_is_a_usage_error_before_the_run(
    tmp_path: Path,
) -> None:
    run = ("check", "-i", "kappa-bounds", "--max-examples", "3", "--no-database")
    folder = run_cli(*run, "--json", str(tmp_path))
    assert folder.returncode == 2 and folder.stdout == "", folder.stdout  # no header: no run
    assert folder.stderr == f"recon-spec check: cannot write --json {tmp_path}: it is a folder\n"
    document, missing = tmp_path / "verdict.json", tmp_path / "missing" / "verdict.xml"
    parent = run_cli(*run, "--junit-xml", str(missing), "--json", str(document))
    assert parent.returncode == 2 and parent.stdout == "", parent.stdout
    assert f"cannot write --junit-xml {missing}: its folder" in parent.stderr
    assert "Traceback" not in parent.stderr and not missing.parent.exists()
    # the report that can be written says why the run was refused
    verdict = json.loads(document.read_text())
    assert verdict["exit_status"] == 2 and verdict["runs"] == []
    assert verdict["reason"].startswith("usage error: cannot write --junit-xml"), verdict


def test_one_file_for_both_reports_is_a_usage_error(tmp_path: Path) -> None:
    # spelt two ways, one file: neither report is written, nor an empty file left there
    both = run_cli(
        "check", "-i", "kappa-bounds", "--json", "verdict", "--junit-xml", "./verdict",
        cwd=tmp_path,
    )  # fmt: skip
    assert both.returncode == 2 and both.stdout == "", both.stdout
    assert "--json and --junit-xml name the same file" in both.stderr
    assert list(tmp_path.iterdir()) == []


def test_finding_whether_a_report_can_be_written_changes_no_file(tmp_path: Path) -> None:
    from properties.outputs import unwritable

    earlier = tmp_path / "earlier.json"
    earlier.write_text('{"exit_status": 0}\n')
    paths = {"--json": str(earlier), "--junit-xml": str(tmp_path / "new.xml")}
    assert unwritable(paths) == {}
    assert earlier.read_text() == '{"exit_status": 0}\n'
    assert list(tmp_path.iterdir()) == [earlier]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ((target("missing.py"), "-i", "kappa-bounds"), "target cannot be checked: no Python file"),
        (("-i", "no-such-invariant"), "usage error: no invariant 'no-such-invariant'"),
        (("-i", "kappa-bounds", "--max-exampels", "5"), "usage error: unrecognized arguments"),
        (("--max-examples", "0"), "usage error: argument --max-examples: must be at least 1"),
        (("-i", "huge-alpha-concentration", "--max-alpha", "10"), "nothing was checked: no sel"),
    ],
)
def test_a_run_that_checks_nothing_replaces_an_earlier_runs_reports_with_why(
    tmp_path: Path, args: tuple[str, ...], reason: str
) -> None:
    document, junit = _report_files(tmp_path)
    document.write_text('{"exit_status": 0, "runs": []}\n')  # an earlier run's, passing
    junit.write_text("<testsuites />\n")
    done = run_cli("check", *args, "--json", str(document), "--junit-xml", str(junit))
    assert done.returncode == 2, done.stdout + done.stderr
    verdict = json.loads(document.read_text())
    assert verdict["exit_status"] == 2 and verdict["reason"].startswith(reason), verdict
    assert any(message.startswith(reason) for message in _not_checked(junit)), junit.read_text()


def test_a_target_that_cannot_be_checked_says_why_in_the_reports(tmp_path: Path) -> None:
    document, junit = _report_files(tmp_path)
    done = run_cli(
        "check", target("exits_at_import.py"), "-i", "kappa-bounds", "--max-examples", "2",
        "--no-database", "--json", str(document), "--junit-xml", str(junit),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    verdict = json.loads(document.read_text())
    assert verdict["exit_status"] == 2
    reason = verdict["reason"]
    assert reason.startswith("target cannot be checked: ") and "SystemExit: 7" in reason
    (run,) = verdict["runs"]
    assert run["reason"] == reason and run["invariants"] == []
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "1", junit.read_text()
    assert _not_checked(junit) == [reason]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="writes to /dev/full (disk full)")
def test_a_report_that_cannot_be_written_after_the_run_is_2_never_a_traceback(
    tmp_path: Path,
) -> None:
    junit = tmp_path / "verdict.xml"
    done = run_cli(
        "check", "-i", "kappa-bounds", "--max-examples", "3", "-j", "1", "--no-database",
        "--json", "/dev/full", "--junit-xml", str(junit),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr  # the check held: 0 without it
    assert "1 passed" in done.stdout and "Traceback" not in done.stderr
    assert "recon-spec check: cannot write --json /dev/full: No space left" in done.stderr
    (message,) = _not_checked(junit)
    assert message.startswith("report not written: cannot write --json /dev/full"), message


def test_report_files_are_read_from_a_refused_command_line_only_where_unambiguous() -> None:
    from properties.outputs import requested_in

    assert requested_in(["--json", "a", "--junit-xml=b", "-i", "x"]) == {
        "--json": "a",
        "--junit-xml": "b",
    }
    assert requested_in(["--json", "a", "--json", "b"]) == {}  # which one argparse takes
    assert requested_in(["--json"]) == {}
    assert requested_in(["--json", "--junit-xml", "b"]) == {"--junit-xml": "b"}  # no value
    assert requested_in(["--js", "a", "--", "--json", "b"]) == {}  # abbreviated; positional


def test_an_interrupted_run_replaces_an_earlier_runs_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import properties.cli

    def interrupted(args, parts) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(properties.cli, "_check_suites", interrupted)
    document, junit = _report_files(tmp_path)
    document.write_text('{"exit_status": 0, "runs": []}\n')  # an earlier run's, passing
    done = run_cli("check", "--json", str(document), "--junit-xml", str(junit))
    assert done.returncode == 2 and "interrupted" in done.stderr
    assert json.loads(document.read_text())["reason"] == "interrupted (Ctrl-C)"
    assert _not_checked(junit) == ["interrupted (Ctrl-C)"]
