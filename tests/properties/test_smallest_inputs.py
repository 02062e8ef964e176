"""The smallest input that shows each mistake of the zoo (``properties.zoo.wrong.SMALLEST``),
and the input a report shows reaching it.

Each witness must show its mistake (its invariant rejects the mistake and accepts the
textbook stack on it) and lose it without any one of its rows or columns. The slow tier then
runs each witness's invariant against its mistake as ``recon-spec check`` does (the dev
profile, with a seed) and checks that the input it ends on has no more cells than the
witness: shrinking reaches the smallest input under every seed. A mistake that keeps state
between calls is checked as a user runs it instead (the whole check, under each seed): the
input it fails on depends on the calls the run made before it (which worker ran which
invariant first), and the report reaches the smallest one those calls allow by replaying
fewer cells of the input and of them in a fresh process (``properties.followup``).

Each mistake of the API zoo that a call on tensors shows (``properties.zoo.api.smallest``)
is checked alike, against the correct API and recon_impl.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

import recon_impl
from properties import api as api_invariants
from properties.cases import LossCase
from properties.invariant import InvariantViolation
from properties.invariants import by_id
from properties.invariants.scale import AcrossThreshold, resized
from properties.profiles import profile_settings
from properties.runner import check_once, run_invariant
from properties.scale import ScaleCase
from properties.strategies import make_valid
from properties.zoo import wrong
from properties.zoo.api import smallest as api_smallest
from properties.zoo.api.correct import MISTAKES, api
from properties.zoo.smallest import Smallest
from properties.zoo.textbook import fresh_process, textbook_losses
from properties.zoo.wrong import SMALLEST, WRONG_IMPLEMENTATIONS
from tests.properties.cli_runs import run_cli

SEEDS = (1, 2, 3)


def _rejects(entry: Smallest, implementation: Any, value: Any) -> bool:
    invariant = by_id(entry.invariant)
    if invariant.fresh_process:  # its input is a process's first call: start as one starts
        fresh_process()
    for earlier in entry.after:  # the calls a target that keeps state needs first
        implementation(*earlier.tensors(), earlier.config)
    try:
        check_once(invariant, invariant.probe(implementation), value)
    except InvariantViolation:
        return True
    return False


def _with_case(value: Any, case: LossCase) -> Any:
    return replace(value, case=case) if hasattr(value, "case") else case


def _one_row_or_column_less(case: LossCase) -> list[LossCase]:
    batch, length = case.shape
    smaller = [case.without_row(i) for i in range(batch)]
    smaller += [case.without_column(t) for t in range(length)]
    return [make_valid(c) for c in smaller if c.has_valid_token]


def test_every_wrong_implementation_has_its_smallest_input() -> None:
    assert sorted(SMALLEST) == sorted(WRONG_IMPLEMENTATIONS)


@pytest.mark.parametrize("name", sorted(SMALLEST))
def test_the_witness_shows_the_mistake_and_the_textbook_stack_passes(name: str) -> None:
    entry = SMALLEST[name]
    assert _rejects(entry, getattr(wrong, name), entry.witness), f"{name} passes its witness"
    assert not _rejects(entry, textbook_losses, entry.witness), f"{name}'s witness is wrong"


#: the entries whose input is shrunk (a process's first call is checked on its plain input)
SHRUNK = sorted(n for n, e in SMALLEST.items() if not by_id(e.invariant).fresh_process)


#: the entries whose witness is a batch at training size, described (``properties.scale``)
AT_SCALE = sorted(n for n, e in SMALLEST.items() if isinstance(e.case, ScaleCase))


@pytest.mark.parametrize(
    "name", sorted(n for n in SHRUNK if SMALLEST[n].cells > 1 and n not in AT_SCALE)
)
def test_without_a_row_or_a_column_the_witness_shows_nothing(name: str) -> None:
    entry = SMALLEST[name]
    for smaller in _one_row_or_column_less(entry.case):
        value = _with_case(entry.witness, smaller)
        assert not _rejects(entry, getattr(wrong, name), value), f"{name} fails on {smaller}"


@pytest.mark.parametrize("name", AT_SCALE)
def test_one_size_smaller_the_scale_witness_shows_nothing(name: str) -> None:
    """At training size the smallest input is a size: the witness one position or one row
    smaller passes ("fails at T = 65, passes at T = 64")."""
    entry, case = SMALLEST[name], SMALLEST[name].case
    if isinstance(entry.witness, AcrossThreshold):  # the padded size is the one that counts
        smaller = [replace(entry.witness, batch=entry.witness.batch - 1)]
    else:
        smaller = [resized(case, case.batch, case.length - 1)] if case.length > 1 else []
        smaller += [resized(case, case.batch - 1, case.length)] if case.batch > 1 else []
    assert smaller
    for value in smaller:
        assert not _rejects(entry, getattr(wrong, name), value), f"{name} fails on {value}"


#: a mistake whose threshold is on B x T: shrinking one size at a time stops where halving
#: either would cross it back (2 x 40779 where 1 x 65536 shows it); its size is said by the
#: report's "fails at ..., passes at ..." instead
PRODUCT_THRESHOLDS = {"fast_path_counts_padding"}


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "name", [n for n in SHRUNK if not SMALLEST[n].after and n not in PRODUCT_THRESHOLDS]
)
def test_shrinking_reaches_the_smallest_input(name: str, seed: int) -> None:
    entry = SMALLEST[name]
    result = run_invariant(
        by_id(entry.invariant),
        getattr(wrong, name),
        target=f"properties.zoo.wrong:{name}",
        settings=profile_settings("dev"),
        seed=seed,
    )
    assert result.status == "failed" and result.failure is not None, result.status
    batch, length = result.failure.shape
    assert batch * length <= entry.cells, (
        f"{name}, seed {seed}: {entry.invariant} shows {batch} x {length}, where "
        f"{entry.case.shape[0]} x {entry.case.shape[1]} shows the mistake: "
        f"{result.failure.minimal_input}"
    )


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(n for n, e in SMALLEST.items() if e.after))
def test_a_report_of_state_between_calls_reaches_the_smallest_input(name: str, seed: int) -> None:
    entry = SMALLEST[name]
    done = run_cli("check", f"properties.zoo.wrong:{name}", "--seed", str(seed), "--no-database")
    assert done.returncode == 1, done.stderr
    assert "the target keeps state between calls" in done.stdout, done.stdout
    shown = re.search(r"input \(B x T = (\d+) x (\d+)\)", done.stdout)
    assert shown is not None, done.stdout
    assert int(shown[1]) * int(shown[2]) <= entry.cells, done.stdout


# --- the API zoo ---------------------------------------------------------------------------


def _api_rejects(entry: Smallest, implementation: Any, value: Any) -> bool:
    invariant = api_invariants.by_id(entry.invariant)
    try:
        check_once(invariant, invariant.probe(implementation), value)
    except InvariantViolation:
        return True
    return False


def _cells(value: Any) -> int:
    batch, length = getattr(value, "case", value).shape[:2]
    return batch * length


def test_every_api_mistake_shown_on_tensors_has_its_smallest_input() -> None:
    on_tensors = {
        mistake
        for mistake, (invariant_id, _) in MISTAKES.items()
        if set(api_invariants.by_id(invariant_id).needs) & set(api_smallest.TENSOR_FUNCTIONS)
    }
    assert sorted(api_smallest.SMALLEST) == sorted(on_tensors)
    for mistake, entry in api_smallest.SMALLEST.items():
        assert entry.invariant == MISTAKES[mistake][0], mistake


@pytest.mark.parametrize("mistake", sorted(api_smallest.SMALLEST))
def test_the_api_witness_shows_the_mistake_and_the_correct_apis_pass(mistake: str) -> None:
    entry = api_smallest.SMALLEST[mistake]
    assert _api_rejects(entry, api(mistake), entry.witness), f"{mistake} passes its witness"
    for correct in (api(), recon_impl):
        assert not _api_rejects(entry, correct, entry.witness), f"{mistake}'s witness is wrong"


@pytest.mark.parametrize(
    "mistake", sorted(n for n, e in api_smallest.SMALLEST.items() if e.cells > 1)
)
def test_without_a_row_or_a_column_the_api_witness_shows_nothing(mistake: str) -> None:
    entry = api_smallest.SMALLEST[mistake]
    for smaller in _one_row_or_column_less(entry.case):
        value = _with_case(entry.witness, smaller)
        assert not _api_rejects(entry, api(mistake), value), f"{mistake} fails on {smaller}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mistake", sorted(api_smallest.SMALLEST))
def test_shrinking_reaches_the_smallest_api_input(mistake: str, seed: int) -> None:
    entry = api_smallest.SMALLEST[mistake]
    result = run_invariant(
        api_invariants.by_id(entry.invariant),
        api(mistake),
        target=f"properties.zoo.api.wrong:{mistake.replace('-', '_')}",
        settings=profile_settings("dev"),
        seed=seed,
    )
    assert result.status == "failed" and result.failure is not None, result.status
    assert result.failure.shown is not None, result.failure.minimal_input
    assert _cells(result.failure.shown) <= entry.cells, (
        f"{mistake}, seed {seed}: {entry.invariant} shows {result.failure.minimal_input}, "
        f"where {entry.witness!r} shows the mistake"
    )
