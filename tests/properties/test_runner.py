"""The runner in one process: seeds repeat a run exactly, the example database saves and
replays minimal failures, later failures get a bounded shrink, and a report's edge-case
line and diagnosis speak of the input it shows."""

from __future__ import annotations

import io
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import Phase, settings

from properties.cases import LossCase
from properties.database import FailureStore, decode, encode
from properties.default_target import reconstruction_losses
from properties.invariant import Invariant, NamedInput
from properties.invariants import by_id
from properties.invariants.edge_cases import EDGE_CASES
from properties.profiles import profile_settings
from properties.report import failure_section
from properties.runner import BOUNDED_SHRINK_CALLS, SAVED, run_invariant
from properties.strategies import Domain, loss_cases
from properties.zoo import wrong

DEV = profile_settings("dev")
CI = profile_settings("ci")


def drawn_by(seed: int, examples: int = 15) -> list[str]:
    seen: list[str] = []
    collect = Invariant(
        id="collect",
        group="values",
        statement="every input is recorded",
        spec_refs=("MATH.md#inputs",),
        strategy=lambda domain: loss_cases(domain),
        check=lambda probe, case: seen.append(repr(case)),
    )
    result = run_invariant(
        collect,
        reconstruction_losses,
        target="t",
        settings=settings(DEV, max_examples=examples),
        seed=seed,
    )
    assert result.status == "passed" and result.seed == seed
    return seen


def test_a_seed_repeats_the_draws_and_another_seed_draws_others() -> None:
    assert drawn_by(7) == drawn_by(7)
    assert drawn_by(7) != drawn_by(8)


def test_a_seed_repeats_the_minimal_failure() -> None:
    def minimal(seed: int) -> str:
        result = run_invariant(
            by_id("kappa-bounds"), wrong.kappa_ratio_of_means, target="t", settings=DEV, seed=seed
        )
        assert result.status == "failed"
        return result.failure.minimal_input

    assert minimal(3) == minimal(3)


def test_derandomized_profiles_fix_a_seed_per_invariant() -> None:
    first = run_invariant(by_id("kappa-bounds"), reconstruction_losses, target="t", settings=CI)
    again = run_invariant(by_id("kappa-bounds"), reconstruction_losses, target="t", settings=CI)
    assert first.seed == again.seed is not None


@pytest.fixture
def in_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY", raising=False)
    return tmp_path


def test_a_minimal_failure_is_saved_replayed_first_and_forgotten_once_fixed(in_folder) -> None:
    invariant, target = by_id("outputs-contract"), "properties.zoo.wrong:float64_outputs"
    found = run_invariant(
        invariant, wrong.float64_outputs, target=target, settings=CI, use_database=True
    )
    assert found.status == "failed" and found.failure.shrunk
    store = FailureStore(True, invariant.id, target)
    assert [repr(value) for value in store.load()] == [found.failure.minimal_input]
    again = run_invariant(
        invariant, wrong.float64_outputs, target=target, settings=DEV, use_database=True
    )
    assert again.examples == 1 and again.failure.edge_case.name == SAVED
    assert again.failure.minimal_input == found.failure.minimal_input
    # the same target name, fixed: the saved input passes and is dropped
    fixed = run_invariant(
        invariant, reconstruction_losses, target=target, settings=DEV, use_database=True
    )
    assert fixed.status == "passed" and store.load() == []


def test_without_the_database_nothing_is_written(in_folder) -> None:
    result = run_invariant(
        by_id("kappa-bounds"), wrong.kappa_ratio_of_means, target="t", settings=CI
    )
    assert result.status == "failed"
    assert not (in_folder / ".hypothesis" / "examples").exists()


def test_a_saved_input_reads_back_exactly_and_runs_no_code() -> None:
    case = EDGE_CASES["nan-padding"].case
    for value in (
        case,
        by_id("padding-ignored").examples[0].value,
        EDGE_CASES["bfloat16-integer-mask"].case,
    ):
        back = decode(encode(value))
        assert repr(back) == repr(value) and type(back) is type(value)
    assert math.isnan(decode(encode(case)).token_nll[0][2])
    for bad in (b"not json", b'{"record": "os:system", "fields": {"command": "true"}}'):
        with pytest.raises(ValueError):
            decode(bad)


def test_an_unreadable_saved_entry_is_dropped(in_folder) -> None:
    store = FailureStore(True, "kappa-bounds", "t")
    assert store.database is not None
    store.database.save(store.key, b"garbage")
    assert store.load() == []
    assert list(store.database.fetch(store.key)) == []


@pytest.mark.parametrize("entry", [b'"x"', b"[1, 2]", b"null", b'{"tuple": []}'])
def test_a_saved_entry_that_is_valid_json_but_no_input_is_dropped(in_folder, entry) -> None:
    invariant, target = by_id("kappa-bounds"), "t"
    store = FailureStore(True, invariant.id, target)
    store.database.save(store.key, entry)
    result = run_invariant(
        invariant, reconstruction_losses, target=target, settings=DEV, use_database=True
    )
    assert result.status == "passed", result.failure and result.failure.message
    assert list(store.database.fetch(store.key)) == []


def test_a_saved_case_whose_tensors_cannot_be_made_is_dropped(in_folder) -> None:
    store = FailureStore(True, "kappa-bounds", "t")
    ragged = LossCase(token_nll=[[1.0, 2.0]], zfree_token_nll=[[1.0]], mask=[[True, True]])
    store.database.save(store.key, encode(ragged))
    assert store.load() == []


def test_saved_inputs_are_kept_per_device_and_shown_with_it(in_folder) -> None:
    invariant, target = by_id("kappa-bounds"), "t"
    assert (
        FailureStore(True, invariant.id, target, "cuda").key
        != FailureStore(True, invariant.id, target).key
    )
    # a GPU run's input under the CPU key (an older database): not tried on the CPU, kept
    on_gpu = replace(EDGE_CASES["single-token-rows"].case, device="cuda")
    assert "device='cuda'" in repr(on_gpu)
    store = FailureStore(True, invariant.id, target)
    store.database.save(store.key, encode(on_gpu))
    result = run_invariant(
        invariant, reconstruction_losses, target=target, settings=DEV, use_database=True
    )
    assert result.status == "passed", result.failure and result.failure.message


def test_a_saved_input_outside_the_domain_is_kept_for_a_wider_run(in_folder) -> None:
    invariant, target = by_id("outputs-contract"), "properties.zoo.wrong:float64_outputs"
    found = run_invariant(
        invariant, wrong.float64_outputs, target=target, settings=CI, use_database=True
    )
    store = FailureStore(True, invariant.id, target)
    (saved,) = store.load()
    narrow = Domain(dtypes=tuple({torch.float64, torch.float32} - {saved.dtype}))
    fixed = run_invariant(
        invariant,
        reconstruction_losses,
        target=target,
        settings=DEV,
        domain=narrow,
        use_database=True,
    )
    assert found.status == "failed" and fixed.status == "passed"
    assert [repr(v) for v in store.load()] == [repr(saved)]


@pytest.mark.heavy
def test_a_bounded_shrink_stops_early_and_says_so() -> None:
    invariant = by_id("oracle-agreement")
    full = run_invariant(invariant, wrong.alpha_ignored, target="t", settings=CI)
    bounded = run_invariant(
        invariant, wrong.alpha_ignored, target="t", settings=CI, shrink_budget=2
    )
    assert full.status == bounded.status == "failed"
    assert not full.failure.bounded and bounded.failure.bounded
    assert bounded.examples < full.examples
    # asked mid-run to bound the shrinking: the same, once a failure is being shrunk
    asked = run_invariant(
        invariant, wrong.alpha_ignored, target="t", settings=CI, bound_shrinking=lambda: True
    )
    assert asked.failure.bounded
    assert asked.examples <= bounded.examples + BOUNDED_SHRINK_CALLS


def test_an_edge_case_that_fails_the_same_way_as_the_shrunk_input_is_not_mentioned() -> None:
    # global-token-mean also fails on 'nan-padding', for a reason that has nothing to do
    # with NaN: the smaller random input says all there is to say
    result = run_invariant(
        by_id("oracle-agreement"), wrong.global_token_mean, target="t", settings=CI
    )
    assert result.failure.shrunk and result.failure.edge_case is None
    assert result.failure.other_edge_case is None


def test_an_edge_case_no_random_input_breaks_is_shown_with_its_reason() -> None:
    # the trigger is the edge case's own tensors, which no random draw repeats exactly
    edge_l, edge_b, _ = EDGE_CASES["nan-padding"].case.tensors()

    def same(a: torch.Tensor, b: torch.Tensor) -> bool:
        return a.shape == b.shape and torch.equal(a.nan_to_num(7.0), b.double().nan_to_num(7.0))

    def breaks_only_nan_padding(token_nll, zfree_token_nll, mask, config):
        outputs = dict(reconstruction_losses(token_nll, zfree_token_nll, mask, config))
        if same(edge_l, token_nll) and same(edge_b, zfree_token_nll):
            outputs["reconstruction_loss"] = outputs["reconstruction_loss"] + 1
        return outputs

    result = run_invariant(
        by_id("oracle-agreement"),
        breaks_only_nan_padding,
        target="t",
        settings=settings(CI, max_examples=10),
    )
    assert result.status == "failed"
    edge = result.failure.edge_case
    assert edge is not None and edge.name == "nan-padding" and "NaN" in edge.why
    assert not result.failure.shrunk


def test_an_input_is_reduced_to_fewer_cells_where_it_shows_the_cause_more_ways() -> None:
    # kappa as a ratio of batch means: a wrong number on two rows, NaN on one row of b = 0
    # (with R_cc and the total NaN too); the four cells a search once stopped at reduce
    # to that one, first without a column (one row is empty then), then without a row
    two_rows = LossCase(
        token_nll=((1.0, 0.0), (1.0, 1.0)),
        zfree_token_nll=((1.0, 0.0), (1.0, 0.0)),
        mask=((True, False), (True, True)),
    )
    invariant = replace(by_id("oracle-agreement"), examples=(NamedInput("two rows", "", two_rows),))
    result = run_invariant(
        invariant,
        wrong.kappa_ratio_of_means,
        target="t",
        settings=settings(DEV, phases=[Phase.explicit, Phase.shrink]),
    )
    assert result.status == "failed" and result.failure.edge_reduced
    assert result.failure.shown.zfree_token_nll == ((0.0,),)


def test_an_api_input_is_reduced_to_fewer_cells_too() -> None:
    # the uint8-labels edge case holds three labels where the one that uint8 wraps to -100
    # shows the mistake; and compute_total_loss's input, a padded NaN in a second row that
    # one row of two positions shows as well, is cut inside the call that holds it
    from properties import api as api_invariants
    from properties.zoo.api.correct import api
    from properties.zoo.api.smallest import call

    only_explicit = settings(DEV, phases=[Phase.explicit, Phase.shrink])
    result = run_invariant(
        api_invariants.by_id("logits-token-nll"),
        api("logits-wrapped-labels"),
        target="t",
        settings=only_explicit,
    )
    assert result.status == "failed" and result.failure.edge_reduced
    assert result.failure.shown.labels == ((156,),)
    out = io.StringIO()
    failure_section(api_invariants.by_id("logits-token-nll"), result, "t", {}, out)
    # the edge case's reason reads as a sentence, and the input's line after it
    reads_on = "class 156 is taken for padding. Input, cut to the rows and columns that show it:"
    assert reads_on in out.getvalue(), out.getvalue()
    padded_nan = LossCase(
        token_nll=((1.0, 0.0), (0.0, 0.0)),
        zfree_token_nll=((1.0, math.nan), (0.0, 0.0)),
        mask=((True, False), (True, True)),
    )
    contract = api_invariants.by_id("total-loss-contract")
    invariant = replace(contract, examples=(NamedInput("two rows", "", call(padded_nan)),))
    result = run_invariant(invariant, api("inputs-modified"), target="t", settings=only_explicit)
    assert result.status == "failed" and result.failure.edge_reduced
    assert result.failure.shown.case.mask == ((True, False),)


def test_the_diagnosis_looks_at_the_input_whose_outputs_the_table_shows() -> None:
    # padding-extension compares two calls; the table's observed values are those of the
    # padded call, and so is the diagnosis: a NaN there, not on the unpadded input
    def nan_when_padded(token_nll, zfree_token_nll, mask, config):
        outputs = dict(reconstruction_losses(token_nll, zfree_token_nll, mask, config))
        if not bool(mask.bool().all()):
            outputs["token_concentration_factor"] = outputs["token_concentration_factor"] * math.nan
        return outputs

    result = run_invariant(
        by_id("padding-extension"),
        nan_when_padded,
        target="t",
        settings=settings(CI, max_examples=30),
    )
    assert result.status == "failed"
    assert result.failure.diagnosis, result.failure.message
    assert all("token_concentration_factor is nan" in f for f in result.failure.diagnosis)


def test_a_run_reports_how_many_examples_it_tried() -> None:
    invariant = by_id("kappa-bounds")
    result = run_invariant(
        invariant, reconstruction_losses, target="t", settings=settings(CI, max_examples=12)
    )
    assert result.status == "passed"
    assert result.examples == 12 + len(invariant.examples)  # the named edge cases on top


#: a worker's life in a fresh interpreter: what it imports at start, then failing runs of
#: both kinds; prints the suite's modules first imported during those runs
_WORKER_LIFE = """
import sys
import properties, recon_impl, spec
from properties.worker import load_what_a_run_imports
load_what_a_run_imports()
from properties import api, invariants
from properties.api.module import load_api
from properties.profiles import profile_settings
from properties.runner import run_invariant
from properties.target import load_target

def ours():
    roots = [m.__path__[0] for m in (properties, recon_impl, spec)]
    return {n for n, m in list(sys.modules.items())
            if any((getattr(m, "__file__", None) or "").startswith(r) for r in roots)}

stack = load_target("properties.zoo.wrong:alpha_ignored")[1]
module = load_api("properties.zoo.api.wrong:crossed_flags")
before = ours()
ci = profile_settings("ci")
for invariant, target in ((invariants.by_id("oracle-agreement"), stack),
                          (api.by_id("flags-round-trip"), module)):
    assert run_invariant(invariant, target, target="t", settings=ci).status == "failed"
print(sorted(ours() - before))
"""


@pytest.mark.heavy
@pytest.mark.slow
def test_a_worker_imports_nothing_of_the_suite_once_it_draws() -> None:
    # hypothesis draws constants from every loaded local module: a module first imported at
    # a run's first failure would change what the worker's later invariants draw
    done = subprocess.run(
        [sys.executable, "-c", _WORKER_LIFE], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"imported mid-run: {done.stdout}"


class _Quiet:
    """An observer that hears nothing (a worker's reporter talks to its supervisor)."""

    def example_started(self) -> None: ...
    def call_started(self, call) -> None: ...
    def call_finished(self) -> None: ...


def test_a_replay_outside_the_invariants_inputs_shows_nothing_and_a_failing_one_its_failure() -> (
    None
):
    from hypothesis import assume

    from properties.worker import Replay, _replay

    def check(probe, case: LossCase) -> None:
        assume(case.shape[1] > 1)  # one token: outside this invariant's inputs
        by_id("oracle-agreement").check(probe, case)

    invariant = replace(by_id("oracle-agreement"), check=check)
    one, two = (LossCase(((1.0,) * n,), ((0.5,) * n,), ((True,) * n,)) for n in (1, 2))
    implementation = wrong.global_token_mean
    for case in (one, two):  # outside its inputs; a batch of one row it holds on
        answer = _replay(Replay("x", case), implementation, lambda _: invariant, "t", _Quiet())
        assert answer == (False, "", None)
    two_rows = LossCase(
        ((1.0, 2.0), (3.0, 0.0)), ((0.5, 0.5), (0.5, 0.0)), ((True, True), (True, False))
    )
    failed, script, failure = _replay(
        Replay("x", two_rows), implementation, lambda _: invariant, "t", _Quiet()
    )
    assert failed and "impl(" in script
    assert failure.shown == two_rows and "reconstruction_loss" in failure.failing


@pytest.fixture
def fresh_zfree_cache():
    """The cache of the zfree-cached-by-shape mistake, empty after the test as before it:
    a later test in this process calls that mistake as a fresh process would."""
    from properties.zoo import textbook

    textbook._CACHED.clear()
    yield
    textbook._CACHED.clear()


@pytest.mark.usefixtures("fresh_zfree_cache")
def test_state_is_shown_on_the_fewest_cells_its_earlier_calls_allow() -> None:
    # a cache of the whole z-free tensor by shape: the earlier call's padded 2.0 is what
    # the input's second valid token reads, so one cell shows it once that position is valid
    from properties.followup import _fewer_cells_after
    from properties.target import Call
    from properties.worker import _replay
    from properties.zoo import textbook

    class FreshProcesses:
        def replay(self, replay):
            textbook._CACHED.clear()  # what a fresh process starts from
            implementation = wrong.zfree_cached_by_shape
            return _replay(replay, implementation, by_id, "t", _Quiet())

    earlier = Call(LossCase(((1.0, 5.0),), ((1.0, 2.0),), ((True, False),)))
    shown = LossCase(((1.0, 1.0),), ((1.0, 1.0),), ((True, True),))
    found = _fewer_cells_after(FreshProcesses(), ("oracle-agreement",), shown, [earlier])
    assert found is not None
    shown_by, calls, script, failure = found
    assert shown_by == "oracle-agreement"
    assert failure.shown.shape == (1, 1) and failure.shown.zfree_token_nll == ((1.0,),)
    assert [c.case.zfree_token_nll for c in calls] == [((2.0,),)]
    assert [c.case.mask for c in calls] == [((True,),)]
    assert "# The failing check:" in script
    # a record of several calls (a permutation of the batch, say) is shown on its batch
    record = SimpleNamespace(case=shown)  # any value with the batch as ``case``
    found = _fewer_cells_after(
        FreshProcesses(), ("token-permutation", "oracle-agreement"), record, [earlier]
    )
    assert found is not None and found[0] == "oracle-agreement"
    assert found[3].shown.shape == (1, 1)
    # an inf the earlier call held at its padded position: that position opens holding a
    # loss the spec accepts (a valid inf is an input it rejects), and one cell shows it
    earlier = Call(LossCase(((1.0, math.inf),), ((1.0, math.inf),), ((True, False),)))
    found = _fewer_cells_after(FreshProcesses(), ("oracle-agreement",), shown, [earlier])
    assert found is not None
    shown_by, calls, script, failure = found
    assert failure.shown.shape == (1, 1) and [c.case.shape for c in calls] == [(1, 1)]
    assert all(math.isfinite(v) for c in calls for row in c.case.zfree_token_nll for v in row)
    # a config field the search drew that the state does not need is back at its default
    drawn = shown.with_config(token_weight_alpha=1e6, example_inverse_surprisal_epsilon=1.0)
    found = _fewer_cells_after(FreshProcesses(), ("oracle-agreement",), drawn, [earlier])
    assert found is not None
    assert found[3].shown.config == type(drawn.config)(), found[3].shown.config


def test_the_calls_a_state_needs_are_found_in_few_replays() -> None:
    # a cache by shape set by the first call of the input's shape, deep in a long history:
    # one replay of that call alone finds it, where a search over runs of calls takes many
    from properties.followup import fewest_calls
    from properties.target import Call

    def call(*losses: float) -> Call:
        return Call(LossCase((losses,), (losses,), ((True,) * len(losses),)))

    shown = LossCase(((1.0, 1.0),), ((1.0, 1.0),), ((True, True),))
    history = [call(float(k)) for k in range(300)]
    history[150] = setter = call(2.0, 3.0)  # the first of the input's shape
    history += [call(4.0, 5.0), *(call(float(k)) for k in range(300))]
    replayed: list[list[Call]] = []

    def cache_by_shape(calls) -> str | None:
        replayed.append(list(calls))
        first = next((c for c in calls if c.case.shape == shown.shape), None)
        return "script" if first is setter else None

    assert fewest_calls(history, shown, cache_by_shape) == ([setter], "script")
    assert len(replayed) <= 3, [len(calls) for calls in replayed]
    # a state that needs two calls (neither alone): the shortest run before the input
    replayed.clear()
    both = history[-40], history[-10]

    def needs_both(calls) -> str | None:
        replayed.append(list(calls))
        return "script" if all(c in calls for c in both) else None

    found = fewest_calls(history, shown, needs_both)
    assert found is not None and found[0] == history[-40:]
    # a state the history does not make: None, after a bounded search
    assert fewest_calls(history, shown, lambda calls: None) is None
