"""The invariant catalog as pytest tests: ``pytest --pyargs properties --recon-impl X``."""

from __future__ import annotations

import io

import pytest

from properties.invariants import INVARIANTS
from properties.pytest_plugin import UNCHECKED
from properties.report import failure_section
from properties.runner import invariant_seed
from properties.supervisor import TargetUnusable
from properties.worker import SearchSettings, WorkRequest


@pytest.mark.parametrize("invariant", INVARIANTS, ids=[i.id for i in INVARIANTS])
def test_invariant(invariant, recon_context, request: pytest.FixtureRequest) -> None:
    context = recon_context
    if invariant.opt_in and not context.validation:
        pytest.skip("opt-in invariant: pass --recon-validation to run it")
    if not invariant.applies(context.domain):
        pytest.skip(f"{invariant.id} says nothing on the chosen domain")
    if context.unusable is not None:
        request.node.user_properties.append(UNCHECKED)
        pytest.fail(context.unusable, pytrace=False)
    seed = invariant_seed(invariant, context.seed, context.settings)
    work = WorkRequest(
        invariant.id,
        SearchSettings.of(context.settings),
        seed,
        context.domain,
        use_database=not context.no_database,
    )
    try:
        (result,) = context.supervisor.run([work])
    except TargetUnusable as error:
        context.unusable = f"recon-spec: {context.target} cannot be checked: {error}"
        request.node.user_properties.append(UNCHECKED)
        pytest.fail(context.unusable, pytrace=False)
    if result.status == "passed":
        return
    if result.status != "failed":  # crashed, timed out, or the suite's own error
        request.node.user_properties.append(UNCHECKED)
    text = io.StringIO()
    failure_section(
        invariant,
        result,
        context.target,
        context.draw_options(result.seed),
        text,
        no_database=context.no_database,
    )
    pytest.fail(text.getvalue(), pytrace=False)
