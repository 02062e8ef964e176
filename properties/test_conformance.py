"""The invariant catalog as pytest tests: ``pytest --pyargs properties --recon-impl X``."""

from __future__ import annotations

import pytest

from properties.invariants import INVARIANTS
from properties.pytest_plugin import run_conformance_test


@pytest.mark.parametrize("invariant", INVARIANTS, ids=[i.id for i in INVARIANTS])
def test_invariant(invariant, recon_context, request: pytest.FixtureRequest) -> None:
    if invariant.opt_in and not recon_context.validation:
        pytest.skip("opt-in invariant: pass --recon-validation to run it")
    run_conformance_test(invariant, recon_context, request)
