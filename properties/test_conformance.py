"""The invariant catalog as pytest tests: ``pytest --pyargs properties --recon-impl X``."""

from __future__ import annotations

import io

import pytest

from properties.invariants import INVARIANTS
from properties.report import failure_section
from properties.runner import run_invariant


@pytest.mark.parametrize("invariant", INVARIANTS, ids=[i.id for i in INVARIANTS])
def test_invariant(invariant, recon_target, recon_run_options) -> None:
    if invariant.opt_in and not recon_run_options["validation"]:
        pytest.skip("opt-in invariant: pass --recon-validation to run it")
    name, implementation = recon_target
    result = run_invariant(
        invariant,
        implementation,
        target=name,
        settings=recon_run_options["settings"],
        domain=recon_run_options["domain"],
        seed=recon_run_options["seed"],
    )
    if result.status == "not applicable":
        pytest.skip(f"{invariant.id} says nothing on the chosen domain")
    if result.status == "failed":
        text = io.StringIO()
        failure_section(invariant, result, name, recon_run_options["profile"], text)
        pytest.fail(text.getvalue(), pytrace=False)
