"""The API invariants test themselves, in this process: every wrong module of the zoo is
rejected by the invariant that names its mistake, every API invariant names the mistake
of at least one of them, and the independent correct module and recon_impl pass."""

from __future__ import annotations

import contextlib
import importlib
import io
import types

import pytest
from hypothesis import Phase, settings

import recon_impl
from properties.api import INVARIANTS, by_id
from properties.api.module import missing_names
from properties.profiles import profile_settings
from properties.runner import run_invariant
from properties.zoo.api import correct
from properties.zoo.api.wrong import MISTAKES

#: enough examples to find a wrong module; no shrinking, which only matters to the reader
REJECT = settings(profile_settings("ci"), max_examples=40, phases=[Phase.explicit, Phase.generate])
ACCEPT = settings(profile_settings("ci"), max_examples=25)


def wrong_module(name: str) -> types.ModuleType:
    return importlib.import_module(f"properties.zoo.api.wrong.{name}")


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_each_wrong_module_is_rejected_by_the_invariant_that_names_its_mistake(name: str) -> None:
    invariant_id, mistake = MISTAKES[name]
    module = wrong_module(name)
    assert module.__doc__.startswith("Wrong: ")
    assert not missing_names(module), "a wrong module exposes the five names"
    result = run_invariant(
        by_id(invariant_id), module, target=f"properties.zoo.api.wrong.{name}", settings=REJECT
    )
    assert result.status == "failed", f"{invariant_id} does not reject {name}: {mistake}"
    # its reproduction is a script that Python can run (REPRODUCED below runs a few)
    compile(result.failure.reproduction, f"reproduce_{name}.py", "exec")


def test_every_api_invariant_names_the_mistake_of_a_wrong_module() -> None:
    assert {invariant_id for invariant_id, _ in MISTAKES.values()} == {i.id for i in INVARIANTS}


@pytest.mark.parametrize("invariant", INVARIANTS, ids=lambda i: i.id)
@pytest.mark.parametrize("module", [correct, recon_impl], ids=lambda m: m.__name__)
def test_the_correct_module_and_recon_impl_pass(module, invariant) -> None:
    result = run_invariant(invariant, module, target=module.__name__, settings=ACCEPT)
    assert result.status == "passed", result.failure.message if result.failure else result.status


def test_a_missing_name_makes_its_invariants_not_checked() -> None:
    partial = types.SimpleNamespace(
        ReconstructionLossConfig=recon_impl.ReconstructionLossConfig,
        DisentanglementLossConfig=recon_impl.DisentanglementLossConfig,
    )
    for invariant_id in ("total-loss-bundle", "flags-exist"):
        result = run_invariant(by_id(invariant_id), partial, target="partial", settings=ACCEPT)
        assert result.status == "not checked", invariant_id
        assert "--skip" in result.failure.message
    result = run_invariant(by_id("config-fields"), partial, target="partial", settings=ACCEPT)
    assert result.status == "passed"


REPRODUCED = [
    ("crossed_flags", "flags-round-trip", "ReconstructionLossConfig("),
    ("removed_flag_deleted", "flags-removed", "unrecognized arguments"),
    ("sign_only_validation", "config-rejects-invalid", ""),
    ("router_switch_ignored", "total-loss-weighted-sum", "router_support"),
    ("per_example_diagnostics", "total-loss-bundle", "token_concentration_factor"),
    ("logits_half_losses", "logits-token-nll", "token_nll: tensor("),
]


@pytest.mark.parametrize(("name", "invariant_id", "shows"), REPRODUCED)
def test_the_reproduction_script_runs_and_shows_the_mistake(name, invariant_id, shows) -> None:
    target = f"properties.zoo.api.wrong.{name}"
    result = run_invariant(by_id(invariant_id), wrong_module(name), target=target, settings=ACCEPT)
    assert result.status == "failed"
    script = result.failure.reproduction
    assert f"import {target} as api" in script and "hypothesis" not in script
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        exec(compile(script, "reproduction.py", "exec"), {"__name__": "__main__"})
    assert shows in out.getvalue() + err.getvalue()
