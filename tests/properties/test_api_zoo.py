"""The API invariants test themselves, in this process: every wrong API object of the zoo
is rejected by the invariant that names its mistake, every API invariant names the mistake
of at least one of them, and the independent correct API (as a module, and as the object
its factory returns, with each open choice either way), the configs written from the seed
alone and recon_impl pass."""

from __future__ import annotations

import contextlib
import io
import math
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recon_impl
from properties.api import INVARIANTS, by_id
from properties.api.module import load_api, missing_names
from properties.api.strategies import flag_texts, invalid_flag_texts
from properties.causes import describe
from properties.profiles import profile_settings
from properties.runner import run_invariant
from properties.zoo.api import correct, seed_dataclasses, wrong
from properties.zoo.api.correct import CHOICES, MISTAKES, api
from properties.zoo.reported import names_mistake
from spec.api import PUBLIC_NAMES, TOKEN_NLL_FROM_LOGITS
from spec.parameters import RULES

#: enough examples to find a wrong API, shrunk as a report shows it (its cause is named)
REJECT = settings(profile_settings("ci"), max_examples=40)
ACCEPT = settings(profile_settings("ci"), max_examples=25)


def wrong_target(mistake: str) -> str:
    """The name a user gives ``recon-spec check-api`` for the API with ``mistake`` on."""
    return f"properties.zoo.api.wrong:{mistake.replace('-', '_')}"


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_wrong_api_is_rejected_by_the_invariant_that_names_its_mistake(mistake) -> None:
    invariant_id, description = MISTAKES[mistake]
    target = wrong_target(mistake)
    wrong_api = load_api(target)  # as a worker loads it: the entry of properties.zoo.api.wrong
    assert wrong_api is api(mistake)
    assert not missing_names(wrong_api, (*PUBLIC_NAMES, TOKEN_NLL_FROM_LOGITS))
    result = run_invariant(by_id(invariant_id), wrong_api, target=target, settings=REJECT)
    assert result.status == "failed", f"{invariant_id} does not reject {mistake}: {description}"
    # its reproduction is a script that Python can run (REPRODUCED below runs a few)
    compile(result.failure.reproduction, f"reproduce_{mistake}.py", "exec")
    # the line that names its cause in a report's summary says what the mistake is
    cause = describe(result)
    assert names_mistake("check-api", mistake.replace("-", "_"), cause), cause


def test_the_wrong_entries_are_the_mistakes_and_nothing_else() -> None:
    entries = {name for name in dir(wrong) if name in wrong.WRONG_APIS}
    assert entries == {wrong_target(m).rpartition(":")[2] for m in MISTAKES}
    with pytest.raises(AttributeError, match="no_such_mistake"):
        wrong.no_such_mistake  # noqa: B018
    with pytest.raises(ValueError, match="mistake must be None or one of"):
        api("no-such-mistake")
    with pytest.raises(ValueError, match="choice must be None or one of"):
        api(choice="no-such-choice")


def test_every_api_invariant_names_the_mistake_of_a_wrong_module() -> None:
    assert {invariant_id for invariant_id, _ in MISTAKES.values()} == {i.id for i in INVARIANTS}


#: the correct API as its factory gives it, the configs written from the seed alone (a
#: module), and recon_impl (the module form of the correct API holds the same objects: the
#: test below)
CORRECT = {
    "properties.zoo.api.correct:api": api(),
    "properties.zoo.api.seed_dataclasses": seed_dataclasses,
    "recon_impl": recon_impl,
}
#: the correct API with each open choice of API.md, "Number types", taken the other way
CORRECT.update({f"properties.zoo.api.correct:api(choice={c!r})": api(choice=c) for c in CHOICES})


#: every invariant against the correct API and the seed's configs; against each choice the
#: config invariants (only its configs differ); against recon_impl only the opt-in ones, as
#: the others are the whole check-api run that test_check_api.py makes of recon_impl (the
#: ci profile's examples, more than ACCEPT's)
PASSING = [
    *(("properties.zoo.api.correct:api", invariant) for invariant in INVARIANTS),
    *(("properties.zoo.api.seed_dataclasses", invariant) for invariant in INVARIANTS),
    *(
        (f"properties.zoo.api.correct:api(choice={c!r})", invariant)
        for c in CHOICES
        for invariant in INVARIANTS
        if invariant.group == "config"
    ),
    *(("recon_impl", invariant) for invariant in INVARIANTS if invariant.opt_in),
]


@pytest.mark.parametrize(("target", "invariant"), PASSING, ids=[f"{t}-{i.id}" for t, i in PASSING])
def test_the_correct_api_and_recon_impl_pass(target, invariant) -> None:
    result = run_invariant(invariant, CORRECT[target], target=target, settings=ACCEPT)
    assert result.status == "passed", result.failure.message if result.failure else result.status


def test_the_correct_module_factory_and_object_are_one_api() -> None:
    for target in CORRECT:
        if "(" not in target:  # a choice is no name a user can give: api() takes no argument
            assert load_api(target) is CORRECT[target]
    module = load_api("properties.zoo.api.correct")
    assert module is correct
    for name in (*PUBLIC_NAMES, TOKEN_NLL_FROM_LOGITS):
        assert getattr(module, name) is getattr(api(), name), name


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
    ("crossed-flags", "flags-round-trip", "ReconstructionLossConfig("),
    ("removed-flag-deleted", "flags-removed", "unrecognized arguments"),
    ("sign-only-validation", "config-rejects-invalid", ""),
    ("router-switch-ignored", "total-loss-weighted-sum", "router_support"),
    ("per-example-diagnostics", "total-loss-bundle", "token_concentration_factor"),
    ("logits-half-losses", "logits-token-nll", "token_nll: tensor("),
]


@pytest.mark.parametrize(("mistake", "invariant_id", "shows"), REPRODUCED)
def test_the_reproduction_script_runs_and_shows_the_mistake(mistake, invariant_id, shows) -> None:
    target = wrong_target(mistake)
    result = run_invariant(by_id(invariant_id), api(mistake), target=target, settings=ACCEPT)
    assert result.status == "failed"
    script = result.failure.reproduction
    module, _, name = target.partition(":")
    assert f"from {module} import {name} as api" in script and "hypothesis" not in script
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        exec(compile(script, "reproduction.py", "exec"), {"__name__": "__main__"})
    assert shows in out.getvalue() + err.getvalue()


def _keeps(rule: str, text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and RULES[rule].holds(value)


@pytest.mark.parametrize("rule", sorted(RULES))
@settings(profile_settings("ci"), max_examples=200)
@given(data=st.data())
def test_flag_values_keep_each_flag_rule_and_the_invalid_ones_break_it(rule, data) -> None:
    # a flag's rule comes from the registry, not from "every flag is >= 0": a flag of a
    # positive parameter must be drawn positive, and refuse 0
    assert _keeps(rule, data.draw(flag_texts(rule)))
    assert not any(_keeps(rule, text) for text in invalid_flag_texts(rule))
    assert ("0" in invalid_flag_texts(rule)) == (not RULES[rule].holds(0.0))


def test_the_old_constructor_argument_may_be_refused_by_any_error() -> None:
    # API.md: no constructor argument keeps the old API; which error refuses it is open
    class ConfigError(Exception):
        pass

    def refusing(base: type) -> type:
        class Strict(base):
            def __init__(self, **values) -> None:
                if "normalize_reconstruction_loss" in values:
                    raise ConfigError("normalize_reconstruction_loss was removed")
                super().__init__(**values)

        Strict.__name__ = Strict.__qualname__ = base.__name__
        return Strict

    strict = types.SimpleNamespace(**vars(api()))
    for name in ("ReconstructionLossConfig", "DisentanglementLossConfig"):
        setattr(strict, name, refusing(getattr(strict, name)))
    result = run_invariant(by_id("config-no-legacy"), strict, target="t", settings=ACCEPT)
    assert result.status == "passed", result.failure.message if result.failure else ""
