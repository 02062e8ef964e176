"""The API invariants as pytest tests: ``pytest --pyargs properties --recon-api MODULE``."""

from __future__ import annotations

import pytest

from properties.api import INVARIANTS, skipped_by
from properties.pytest_plugin import run_conformance_test


@pytest.mark.parametrize("invariant", INVARIANTS, ids=[i.id for i in INVARIANTS])
def test_api_invariant(invariant, recon_api_context, request: pytest.FixtureRequest) -> None:
    if invariant.opt_in and not recon_api_context.logits:
        pytest.skip("opt-in invariant: pass --recon-logits to run it")
    skipped = skipped_by(invariant, recon_api_context.skip)
    if skipped:
        pytest.skip(f"--recon-skip {' '.join(skipped)}")
    run_conformance_test(invariant, recon_api_context, request)
