"""Failure reports: the reproduction runs on its own, the known-variant diagnosis names the
mistake, and the runner records what it tried."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from properties.diagnosis import diagnose
from properties.invariants import by_id
from properties.invariants.contract import FIRST_AFTER
from properties.invariants.edge_cases import EDGE_CASES
from properties.oracle import expected
from properties.profiles import profile_settings
from properties.runner import run_invariant
from properties.tolerances import output_tolerance
from properties.zoo import wrong
from properties.zoo.textbook import DIAGNOSED_AS

ROOT = Path(__file__).parents[2]
QUICK = settings(profile_settings("ci"), max_examples=30)


def run(invariant_id: str, implementation, target: str):
    return run_invariant(by_id(invariant_id), implementation, target=target, settings=QUICK)


@pytest.mark.heavy
def test_reproduction_is_a_standalone_script(tmp_path: Path) -> None:
    result = run(
        "oracle-agreement",
        wrong.global_token_mean,
        "properties.zoo.wrong:global_token_mean",
    )
    assert result.status == "failed"
    script = tmp_path / "repro.py"
    script.write_text(result.failure.reproduction)
    source = script.read_text()
    assert "hypothesis" not in source and "torch.tensor(" in source
    completed = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    assert "'reconstruction_loss':" in completed.stdout
    # the spec's expectation travels with the script
    assert "# What the spec expects:" in source and "reconstruction_loss" in source


def test_failure_report_has_the_shrunk_input_and_the_expected_values() -> None:
    result = run("alpha-zero-uniform", wrong.exp_log_shares, "g:h")
    failure = result.failure
    assert failure.minimal_input.startswith("LossCase(")
    assert "expected" in failure.message and "observed" in failure.message
    assert result.examples >= 1


def test_diagnosis_stays_silent_for_a_correct_output() -> None:
    case = EDGE_CASES["empty-row"].case
    reference = expected(case).values
    tolerance = output_tolerance(case.dtype, length=2, alpha=1.0)
    assert diagnose(case, dict(reference), reference, tolerance) == []


def test_diagnosis_finds_a_total_that_misses_a_term() -> None:
    case = EDGE_CASES["empty-row"].case
    reference = dict(expected(case).values)
    observed = dict(reference)
    cc = "normalized_concentration_corrected_token_weighted_reconstruction_loss"
    observed["total_reconstruction_loss"] -= (
        case.config.normalized_concentration_corrected_token_weighted_weight * reference[cc]
    )
    tolerance = output_tolerance(case.dtype, length=2, alpha=1.0)
    findings = diagnose(case, observed, reference, tolerance)
    assert any(f"without the {cc} term" in f.text for f in findings)


def test_diagnosis_names_a_non_finite_output_first() -> None:
    case = EDGE_CASES["all-zero-surprisal-row"].case
    reference = dict(expected(case).values)
    observed = dict(reference, token_concentration_factor=float("nan"))
    tolerance = output_tolerance(case.dtype, length=case.shape[1], alpha=2.0)
    findings = diagnose(case, observed, reference, tolerance)
    assert findings[0].text.startswith(
        "your token_concentration_factor is nan where the spec's is 1"
    )
    # an output that is NaN in the spec too is not a finding
    assert diagnose(case, reference, reference, tolerance) == []


def test_a_relational_failure_on_a_nan_output_says_so() -> None:
    def nan_kappa(token_nll, zfree_token_nll, mask, config):
        from properties.default_target import reconstruction_losses

        outputs = dict(reconstruction_losses(token_nll, zfree_token_nll, mask, config))
        outputs["token_concentration_factor"] = outputs["token_concentration_factor"] * math.nan
        return outputs

    result = run("padding-extension", nan_kappa, "g:h")
    assert result.status == "failed"
    assert any("is nan where the spec's is" in finding for finding in result.failure.diagnosis)


@pytest.mark.heavy
def test_stop_gradient_reproduction_prints_the_leaking_gradient(tmp_path: Path) -> None:
    result = run(
        "stop-gradient", wrong.zfree_not_detached, "properties.zoo.wrong:zfree_not_detached"
    )
    assert result.status == "failed"
    script = tmp_path / "repro.py"
    script.write_text(result.failure.reproduction)
    completed = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    # One line per output that requires grad: "d NAME / d zfree_token_nll: GRADIENT".
    gradients = {
        name.removeprefix("d "): gradient
        for name, _, gradient in (
            line.partition(" / d zfree_token_nll: ") for line in completed.stdout.splitlines()
        )
        if gradient
    }
    assert "total_reconstruction_loss" in gradients, completed.stdout
    entries = [
        float(number)
        for gradient in gradients.values()
        for number in re.findall(r"-?\d+\.\d*(?:e[-+]?\d+)?", gradient.split("dtype")[0])
    ]
    assert any(entry != 0.0 for entry in entries), completed.stdout


@pytest.mark.parametrize(("mistake", "variant"), sorted(DIAGNOSED_AS.items()))
def test_the_report_names_the_known_variant_of_each_zoo_mistake(mistake, variant) -> None:
    implementation = getattr(wrong, mistake.replace("-", "_"))
    result = run("oracle-agreement", implementation, f"properties.zoo.wrong:{mistake}")
    assert result.status == "failed", mistake
    assert any(variant in finding for finding in result.failure.diagnosis), (
        f"{mistake}: the report does not name {variant!r}: {result.failure.diagnosis}"
    )


def test_the_spec_line_names_the_documents_its_references_live_in() -> None:
    import io

    from properties import api
    from properties.report import failure_section
    from properties.zoo.api.wrong import error_without_field_name

    invariant = api.by_id("config-rejects-invalid")  # cites MATH.md and API.md sections
    result = run_invariant(invariant, error_without_field_name, target="t", settings=QUICK)
    assert result.status == "failed"
    out = io.StringIO()
    failure_section(invariant, result, "t", {}, out, command="check-api")
    line = next(line for line in out.getvalue().splitlines() if line.startswith("spec: "))
    assert line.endswith("(docs/MATH.md, docs/API.md)"), line
    stack = by_id("alpha-zero-uniform")  # an identity's id: rendered in docs/SPEC.md
    result = run(stack.id, wrong.alpha_ignored, "g:h")
    assert result.status == "failed"
    out = io.StringIO()
    failure_section(stack, result, "g:h", {}, out)
    line = next(line for line in out.getvalue().splitlines() if line.startswith("spec: "))
    assert "docs/SPEC.md" in line, line


AFTER = "the inputs after the call: "


@pytest.mark.parametrize(
    ("invariant", "target", "now_holds", "printed"),
    [
        (
            "inputs-unmodified",
            "properties.zoo.wrong:mutates_input",
            r"(\w+) was .* now holds (.*)$",
            AFTER,
        ),
        (  # modified by the second call: printed after it
            "inputs-unmodified",
            "properties.zoo.wrong:zfree_running_buffer",
            r"the first call's (\w+) was modified by a later call .* now holds (.*?); ",
            FIRST_AFTER + " ",
        ),
        (
            "total-loss-contract",
            "properties.zoo.api.wrong:inputs_modified",
            r"modified the caller's (\w+): (.*), was ",
            AFTER,
        ),
        (
            "logits-token-nll",
            str(Path(__file__).parent / "targets" / "api_modifies_labels.py"),
            r"modified the caller's (\w+): (.*), was ",
            AFTER,
        ),
    ],
)
def test_a_modified_input_is_printed_by_the_script_after_the_call(
    invariant: str, target: str, now_holds: str, printed: str, tmp_path: Path
) -> None:
    from properties import api
    from properties.api.module import load_api
    from properties.target import load_target

    if invariant in {i.id for i in api.INVARIANTS}:
        found, implementation = api.by_id(invariant), load_api(target)
    else:
        found, implementation = by_id(invariant), load_target(target)[1]
    result = run_invariant(found, implementation, target=target, settings=QUICK)
    assert result.status == "failed", result
    tensor, value = re.search(now_holds, result.failure.message.splitlines()[0]).groups()
    script = tmp_path / "repro.py"
    script.write_text(result.failure.reproduction)
    completed = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    after = completed.stdout.split(printed)[1].splitlines()[0]
    assert f"'{tensor}': {value}" in after, (after, result.failure.message)
