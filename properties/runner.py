"""Runs one invariant against an implementation, in this process, with hypothesis.

Inputs come, in this order, from

1. the failures earlier runs saved for this invariant and target (``properties/database.py``),
   tried as they are;
2. the invariant's named edge cases (``@example``), each of which once mattered;
3. a search: ``max_examples`` inputs drawn from the invariant's strategy and, on failure,
   shrunk to a minimal one, which is saved for 1.

The search is hypothesis's own generation and shrinking, derandomized, with the seed in the
test function's signature: hypothesis derives a derandomized run's randomness from the test
function, signature included. So the same seed draws the same inputs and shrinks to the same
minimal one (``--seed`` repeats a run exactly), and seeds never switch the example database
off, as ``hypothesis.seed`` would.

Shrinking can be bounded (``shrink_budget``): after that many more calls the test declares
every new candidate passing, so the shrinker stops where it is. A report keeps a minimal
input for its first failure; later failures of the same run get a bounded shrink, so that a
failing implementation gets its verdict about as fast as a passing one.
"""

from __future__ import annotations

import inspect
import math
import pickle
import random
import time
import traceback
import unittest
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import Phase, example, given
from hypothesis.errors import (
    DeadlineExceeded,
    FailedHealthCheck,
    Flaky,
    HypothesisDeprecationWarning,
    HypothesisException,
    Unsatisfiable,
    UnsatisfiedAssumption,
)

from properties.cases import LossCase, cases_in, on_device
from properties.database import FailureStore
from properties.diagnosis import diagnose_violation
from properties.escapes import TargetRaised
from properties.features import features_of
from properties.invariant import Invariant, InvariantViolation, NamedInput
from properties.scale import ScaleCase, scale_cases_in
from properties.strategies import DEFAULT_DOMAIN, Domain, make_valid
from properties.target import CallObserver, ContractViolation, Implementation, Probe
from spec.terms import TOTAL

#: calls a bounded shrink may still make: a few passes of the shrinker, a few seconds
BOUNDED_SHRINK_CALLS = 40
#: the calls before a failing input that its failure keeps: where the target keeps state
#: between calls, the shortest run of them that makes the failure again is replayed
HISTORY_CALLS = 64
#: the views that fewer rows or columns may make contiguous, and one that stays a view
KEPT_BY_CUTS = {"transposed": "strided", "expanded": "strided"}
#: the name of a saved failure among the inputs tried first
SAVED = "saved"

#: "error": the suite itself failed on the invariant (never the target's fault); "not
#: checked": the target lacks what the invariant needs (an API module without one of the
#: five names); "skipped": left out on request (``recon-spec check-api --skip NAME``)
STATUSES = (
    "passed",
    "failed",
    "not applicable",
    "crashed",
    "timed out",
    "error",
    "not checked",
    "skipped",
)


@dataclass
class Failure:
    """What a user needs to act on a failed invariant."""

    message: str
    minimal_input: str
    reproduction: str
    diagnosis: list[str] = field(default_factory=list)
    traceback: str = ""
    #: the named edge case shown as the input (when no random input failed)
    edge_case: NamedInput | None = None
    #: a named edge case that fails in another way than the input shown, and how
    other_edge_case: tuple[NamedInput, str] | None = None
    #: whether ``minimal_input`` was shrunk by hypothesis (else the edge case, as written)
    shrunk: bool = True
    #: the edge case shown without the rows and columns it does not need to fail
    edge_reduced: bool = False
    #: whether shrinking was cut short (a later failure of the run: ``shrink_budget``)
    bounded: bool = False
    #: the minimal input could not be saved: the example database cannot be written
    unsaved: bool = False
    #: what the invariant says misses (``InvariantViolation.failing``): outputs, "gradient"...
    failing: tuple[str, ...] = ()
    #: (output, known variant) pairs the diagnosis matched
    variants: tuple[tuple[str, str], ...] = ()
    #: (output, known variant) pairs that give the same NaN as the output: said, not grouped by
    nan_variants: tuple[tuple[str, str], ...] = ()
    #: outputs that are NaN or inf where the spec's value is finite
    non_finite: tuple[str, ...] = ()
    #: the features of the shown input without which it passes (``properties.features``),
    #: as the report says them, and their kinds (what failures that share one share)
    triggers: tuple[str, ...] = ()
    trigger_kinds: tuple[str, ...] = ()
    #: the type of the exception a call of the target raised, when that failed the input
    raised: str | None = None
    #: the first line of every error a call of the target raised on the input shown (an
    #: invariant may expect one): failures that meet the same error share a cause
    target_errors: tuple[str, ...] = ()
    #: the input shown passed when hypothesis tried it again (state or nondeterminism)
    flaky: bool = False
    #: the input shown, for a replay in a fresh process (None where it cannot be pickled)
    shown: Any = None
    #: which of the run's inputs (counted from 1, as the observer was told of them) the
    #: shown one is: the calls before it are those a replay may need
    example: int = 0
    #: how the failure depends on earlier calls, found by replaying it in a fresh process
    #: (``properties.supervisor``) or known to the check; None where it does not, or was not
    #: looked at
    state: str | None = None
    #: the earlier calls of the run that the reproduction replays before the failing check
    calls_before: int = 0

    @property
    def shape(self) -> tuple[int, int] | None:
        """``(B, T)`` of the shown input (the largest, for an input of several batches; the
        size below the crossing, for a record of two sizes)."""
        cases = [*cases_in(self.shown), *scale_cases_in(self.shown)[:1]]
        return max((case.shape for case in cases), key=lambda s: s[0] * s[1]) if cases else None


@dataclass
class InvariantResult:
    invariant_id: str
    status: str  # one of STATUSES
    examples: int
    seconds: float
    failure: Failure | None = None
    #: the seed the run used: ``--seed`` with it repeats the same search
    seed: int | None = None


def invariant_seed(invariant: Invariant, seed: int | None, settings: hypothesis.settings) -> int:
    """The seed to run with: the user's; else a fixed one per invariant when the profile is
    derandomized; else a fresh random one. Either way it is reported."""
    if seed is not None:
        return seed
    if settings.derandomize:
        return zlib.crc32(invariant.id.encode())
    return random.getrandbits(32)


class _ShrinkBudgetSpent(BaseException):
    """Ends a bounded shrink (hypothesis lets a BaseException through, as it must Ctrl-C)."""


class _TargetEnded(BaseException):
    """The target raised an exit in a call: the run of this invariant ends there, unshrunk,
    as when the target's process dies (hypothesis lets a BaseException through)."""

    def __init__(self, raised: TargetRaised) -> None:
        super().__init__(str(raised))
        self.error = raised.error


class _Attempts:
    """The test function hypothesis runs, with what the report needs of its last call."""

    def __init__(
        self,
        invariant: Invariant,
        implementation: Implementation,
        observer: CallObserver | None,
        bound_now: Callable[[], bool],
    ) -> None:
        self.invariant = invariant
        self.implementation = implementation
        self.observer = observer
        self.bound_now = bound_now
        self.count = 0
        self.last: tuple[Probe, Any] | None = None
        self.budget: int | None = None  # calls left to a bounded shrink, once it started
        #: calls left to the shrinker under the invariant's own bound (``shrink_calls``)
        self.shrink_calls: int | None = invariant.shrink_calls
        #: the latest failure of the current hypothesis run: (error, probe, input)
        self.failed: tuple[BaseException, Probe, Any] | None = None
        #: the input (counted from 1) of the latest failure, and of the last input tried
        self.failed_example = 0
        self.flaky = False

    def start_shrink(self, budget: int | None) -> None:
        self.budget = budget
        self.shrink_calls = self.invariant.shrink_calls

    def __call__(self, drawn: Any) -> None:
        if self.budget is None and self.failed and self.bound_now():
            self.budget = BOUNDED_SHRINK_CALLS
        if self.budget is not None and self.failed:
            if self.budget <= 0:
                raise _ShrinkBudgetSpent  # the smallest failure so far is the report's
            self.budget -= 1
        if self.shrink_calls is not None and self.failed:
            if self.shrink_calls <= 0:
                raise _ShrinkBudgetSpent  # the invariant's own bound: not a bounded shrink
            self.shrink_calls -= 1
        self.count += 1
        if self.observer is not None:
            self.observer.example_started()
        probe = self.invariant.probe(self.implementation, self.observer)
        self.last = (probe, drawn)
        error: BaseException | None = None
        try:
            self.invariant.check(probe, drawn)
        except UnsatisfiedAssumption as raised:
            if probe.escaped is None:
                raise  # the invariant's own assume(), not the target's
            error = raised
        except BaseException as raised:
            error = raised
        if probe.escaped is not None:
            # a skip or an exit fails the input, whatever the invariant made of it
            escaped = TargetRaised(probe.escaped)
            error = _TargetEnded(escaped) if escaped.ends_program else escaped
        if error is not None:
            # the shrinker only tries smaller inputs: the latest failure is the smallest
            self.failed, self.failed_example = (error, probe, drawn), self.count
            raise error


def _hypothesis_test(
    attempts: _Attempts,
    strategy,
    settings: hypothesis.settings,
    examples: tuple[Any, ...] = (),
    seed: int = 0,
):
    def check(drawn: Any) -> None:
        attempts(drawn)

    # The seed of a derandomized run: hypothesis hashes the test's signature into it.
    parameter = inspect.Parameter(
        "drawn", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=f"seed {seed}"
    )
    check.__signature__ = inspect.Signature([parameter])  # type: ignore[attr-defined]
    test = given(strategy)(check)
    for value in reversed(examples):
        test = example(value)(test)
    return settings(test)


def _run(test, attempts: _Attempts) -> BaseException | None:
    """Run a hypothesis test; the failure it ends with, or None."""
    attempts.failed, attempts.flaky = None, False
    try:
        test()
    except unittest.SkipTest:
        # hypothesis had nothing to run (no edge case, nothing saved); a skip the target
        # raised never gets here as one: the probe wraps it (properties/escapes.py)
        return None
    except _ShrinkBudgetSpent:
        assert attempts.failed is not None
        error, probe, drawn = attempts.failed
        attempts.last = (probe, drawn)
        return error
    except Flaky as flaky:
        if attempts.failed is None:
            return flaky
        # the input failed, then passed when hypothesis tried it again: the failure it saw
        # is the finding, and its flakiness a part of it
        error, probe, drawn = attempts.failed
        attempts.last = (probe, drawn)
        attempts.flaky = True
        return error
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        return error
    return None


def run_invariant(
    invariant: Invariant,
    implementation: Implementation,
    *,
    target: str,
    settings: hypothesis.settings,
    domain: Domain = DEFAULT_DOMAIN,
    seed: int | None = None,
    use_database: bool = False,
    shrink_budget: int | None = None,
    observer: CallObserver | None = None,
    bound_shrinking: Callable[[], bool] = lambda: False,
) -> InvariantResult:
    """Check one invariant (module docstring); on failure, report a minimal counterexample.

    ``use_database`` reads and saves failures in the example database; ``shrink_budget``
    bounds the shrinking (None: unbounded), and ``bound_shrinking`` is asked during a run
    whether to bound it from now on (another invariant has failed meanwhile). ``observer``
    is told about every input and call of the target.
    """
    if not invariant.applies(domain):
        return InvariantResult(invariant.id, "not applicable", 0, 0.0)
    missing = invariant.unavailable(implementation)
    if missing is not None:
        failure = Failure(missing, "", "", shrunk=False)
        return InvariantResult(invariant.id, "not checked", 0, 0.0, failure)
    start = time.perf_counter()
    if invariant.example_share != 1.0:
        share = math.ceil(settings.max_examples * invariant.example_share)
        settings = hypothesis.settings(settings, max_examples=max(1, share))
    used_seed = invariant_seed(invariant, seed, settings)
    store = FailureStore(use_database, invariant.id, target, domain.device)
    phases = set(settings.phases)
    saved = tuple(
        NamedInput(SAVED, "an earlier run saved it in the example database", value)
        for value in store.load()
    )
    edge_cases = tuple(  # written for the CPU: made where the run's inputs are
        replace(named, value=on_device(named.value, domain.device)) for named in invariant.examples
    )
    explicit = tuple(  # a record of two sizes (``size-thresholds``) where both fit
        named
        for named in (*saved, *edge_cases)
        if all(
            domain.admits(case)
            for case in ([named.case] if isinstance(named.case, LossCase) else [])
            + scale_cases_in(named.value)
        )
    )
    # a saved input this run's domain leaves out (--max-loss, --dtypes) is kept for another
    saved = tuple(named for named in saved if any(named is e for e in explicit))
    attempts = _Attempts(invariant, implementation, observer, bound_shrinking)
    strategy = invariant.inputs(domain)
    derandomized = hypothesis.settings(settings, derandomize=True, database=None)

    def tried(examples: tuple[NamedInput, ...], *, search: bool) -> BaseException | None:
        """The explicit inputs (saved ones, edge cases), or a search; the failure, or None."""
        wanted = (Phase.generate, Phase.shrink) if search else (Phase.explicit,)
        if wanted[0] not in phases:
            return None
        chosen = hypothesis.settings(derandomized, phases=[p for p in wanted if p in phases])
        attempts.start_shrink(shrink_budget)
        values = tuple(named.value for named in examples)
        return _run(_hypothesis_test(attempts, strategy, chosen, values, used_seed), attempts)

    error = tried(explicit, search=False)
    failed = _edge_case_of(attempts, explicit) if error is not None else None
    if failed is None or failed.name != SAVED:
        for named in saved:  # a saved input that passes now: the bug it found is fixed
            store.forget(named.value)
    other_edge: tuple[NamedInput, str] | None = None
    unsaved = False
    if not isinstance(error, _TargetEnded) and (failed is None or failed.name != SAVED):
        edge_error, edge_last = error, attempts.last
        found = tried((), search=True)
        if found is not None:
            error = found
            ended = isinstance(found, _TargetEnded)
            shown = attempts.last is not None  # None: hypothesis failed before a draw
            if shown and not ended and not _bounded(attempts) and Phase.shrink in phases:
                if not attempts.flaky:
                    error = _fewer_cells(invariant, implementation, observer, attempts, error)
                unsaved = not store.save(attempts.last[1])  # minimal: tried first next run
            # A smaller input that fails the same way makes the edge case redundant; one
            # that fails another way leaves it a second finding worth a line.
            if failed is not None and not _same_failure(edge_error, error):
                other_edge = (failed, _what_failed(edge_error))
        elif failed is not None:
            error, attempts.last = edge_error, edge_last
    shown = _edge_case_of(attempts, explicit)
    reduced = False
    if shown is not None and shown.name != SAVED and Phase.shrink in phases:
        # a named edge case as written may hold more than the mistake needs
        before = attempts.last
        error = _fewer_cells(invariant, implementation, observer, attempts, error)
        reduced = attempts.last is not before
    error = _bracketed(invariant, attempts, error)
    seconds = time.perf_counter() - start
    if error is None:
        return InvariantResult(invariant.id, "passed", attempts.count, seconds, None, used_seed)
    failure = _failure(invariant, target, error, attempts.last)
    failure.edge_case = shown
    failure.edge_reduced = reduced
    failure.other_edge_case = other_edge
    failure.shrunk = shown is None and Phase.shrink in phases
    failure.bounded = _bounded(attempts)
    failure.unsaved = use_database and unsaved
    failure.flaky = attempts.flaky
    if attempts.last is not None:
        failure.shown = _picklable(attempts.last[1])
        failure.example = attempts.failed_example
    if isinstance(error, _TargetEnded):  # unshrunk, like a process that died in a call
        failure.shrunk = False
        return InvariantResult(invariant.id, "crashed", attempts.count, seconds, failure, used_seed)
    return InvariantResult(invariant.id, "failed", attempts.count, seconds, failure, used_seed)


def triggers(
    invariant: Invariant,
    implementation: Implementation,
    drawn: Any,
    observer: CallObserver | None = None,
) -> tuple[tuple[str, str], ...]:
    """The features of the failing input ``drawn`` (``properties.features``) without which
    the invariant holds on it, each taken away alone: (kind, description) each."""
    found = []
    for feature, description, without in features_of(drawn):
        if observer is not None:
            observer.example_started()
        probe = invariant.probe(implementation, observer)
        try:
            check_once(invariant, probe, without)
        except UnsatisfiedAssumption:
            continue  # outside the invariant's inputs: it says nothing
        except Exception:
            if probe.escaped is not None and TargetRaised(probe.escaped).ends_program:
                break  # the target ends the program: nothing more to learn from it
            continue  # it still fails
        if probe.escaped is None:
            found.append((feature.kind, description))
    return tuple(found)


def _fewer_cells(
    invariant: Invariant,
    implementation: Implementation,
    observer: CallObserver | None,
    attempts: _Attempts,
    error: BaseException,
) -> BaseException:
    """The shrunk failing input, with fewer cells where that still fails the same way.

    Hypothesis deletes an example or a token of a row, but not both at once: a failure
    that needs one padded position, found as two rows of different lengths, stays at
    2 x 2 where one row of a valid and a padded position (1 x 2) shows it. So an input
    that is one ``LossCase`` is tried without each of its rows, and without each of its
    columns (a position of every row), as long as one of them still fails of the same
    cause (``_same_cause``); ``attempts.last`` and the returned error are then the smaller
    input's. So is a logits call (its labels' rows and columns), and a drawn value that holds
    one of them as its ``case`` and rebuilds itself around a smaller one (``with_case``)."""
    assert attempts.last is not None
    drawn = attempts.last[1]
    if _cut_case(drawn) is None or not isinstance(error, InvariantViolation):
        return error
    # a call at training size costs by its positions: a budget of them, where a call counts
    # at least CUT_FLOOR (a small failing size is cut all the way, a large one in a few calls)
    positions = CUT_POSITIONS if isinstance(_cut_case(drawn), ScaleCase) else math.inf

    def spent() -> bool:  # a bounded shrink (a later failure): the cuts count against it
        return positions <= 0 or (attempts.budget is not None and attempts.budget <= 0)

    improved = True
    while improved and not spent():
        improved = False
        for smaller in _smaller_values(drawn):
            if spent():
                break
            positions -= max(_positions(smaller), CUT_FLOOR)
            if attempts.budget is not None:
                attempts.budget -= 1
            probe = invariant.probe(implementation, observer)
            attempts.count += 1  # an input tried, as the observer is told
            if observer is not None:
                observer.example_started()
            try:
                check_once(invariant, probe, smaller)
            except InvariantViolation as again:
                if probe.escaped is None and _same_cause(again, error):
                    drawn, error, attempts.last = smaller, again, (probe, smaller)
                    attempts.failed_example = attempts.count
                    improved = True
                    break
            except Exception:
                continue  # another failure, or outside the invariant's inputs
    return error


#: the positions the size cuts of a failure at training size may call the target on in all
#: (``_fewer_cells``): 2^23, a few seconds of the references on two cores; a call counts at
#: least CUT_FLOOR (a call's own cost, whatever its size)
CUT_POSITIONS = 2**23
CUT_FLOOR = 2**15


def _positions(value: Any) -> int:
    """The positions the calls of a check on ``value`` take: its case's, twice for a record
    that calls at two sizes (``size-thresholds``)."""
    case = _cut_case(value)
    if not isinstance(case, ScaleCase):
        return 0
    return case.batch * case.length * (2 if case is not value else 1)


def _cut_case(value: Any) -> Any:
    """What rows and columns are taken from: ``value`` where it has rows (a ``LossCase``, a
    logits call), its ``case`` where it rebuilds itself around a smaller one (a call of
    ``compute_total_loss``, say); else None (a record whose other parts follow the shape)."""
    if hasattr(value, "without_row") or isinstance(value, ScaleCase):
        return value
    if hasattr(value, "with_case"):
        return _cut_case(value.case)
    return None


def _smaller_values(value: Any) -> list[Any]:
    """``value`` without one of its case's rows, then without one of its columns: valid
    inputs (a valid token left) of fewer cells."""
    if hasattr(value, "with_case"):
        rebuilt = (value.with_case(smaller) for smaller in _smaller_values(value.case))
        return [smaller for smaller in rebuilt if smaller is not None]
    if isinstance(value, ScaleCase):  # a description at training size: smaller sizes of it
        return [case for case in value.smaller() if case.has_valid_token]
    smaller = [make_valid(c) if isinstance(c, LossCase) else c for _, c in cuts(value)]
    # a view a cut can undo (one row transposed is contiguous) also as one no cut undoes
    return smaller + [
        replace(c, layouts=tuple(KEPT_BY_CUTS.get(layout, layout) for layout in c.layouts))
        for c in smaller
        if isinstance(c, LossCase) and set(c.layouts) & set(KEPT_BY_CUTS)
    ]


def cuts(case: Any) -> list[tuple[tuple[str, int], Any]]:
    """``case`` without each of its rows, then without each of its columns, where a valid
    token is left: (``("row", i)`` or ``("column", t)``, the smaller case) each."""
    batch, length = case.shape[:2]
    found = [(("row", i), case.without_row(i)) for i in range(batch)]
    found += [(("column", t), case.without_column(t)) for t in range(length)]
    return [(cut, c) for cut, c in found if c.has_valid_token]


def check_once(invariant: Invariant, probe: Probe, value: Any) -> None:
    """``invariant.check`` on one input, outside a hypothesis run: an ``assume`` in it
    raises ``UnsatisfiedAssumption`` (hypothesis' warning about that use is expected)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HypothesisDeprecationWarning)
        invariant.check(probe, value)


def _picklable(value: Any) -> Any:
    """``value`` where it travels to another process as it is, else None."""
    try:
        pickle.dumps(value)
    except Exception:
        return None
    return value


def _bracketed(
    invariant: Invariant, attempts: _Attempts, error: BaseException | None
) -> BaseException | None:
    """The failure shown, said against one size smaller (``Invariant.bracket``): once, on
    the input shown, with the probe that failed there (its script holds the smaller call)."""
    if invariant.bracket is None or attempts.last is None:
        return error
    probe, drawn = attempts.last
    if not isinstance(error, InvariantViolation) or probe.escaped is not None:
        return error
    with warnings.catch_warnings():  # an assume() in the check, outside a hypothesis run
        warnings.simplefilter("ignore", HypothesisDeprecationWarning)
        said = invariant.bracket(probe, drawn, error)
    return error if said is None else said


def _bounded(attempts: _Attempts) -> bool:
    """Whether the last shrink was cut short by its budget."""
    return attempts.budget is not None and attempts.budget <= 0


def _edge_case_of(attempts: _Attempts, edge_cases: tuple[NamedInput, ...]) -> NamedInput | None:
    if attempts.last is None:
        return None
    drawn = attempts.last[1]
    return next((named for named in edge_cases if named.value is drawn), None)


def _what_failed(error: BaseException) -> str:
    if isinstance(error, InvariantViolation) and error.failing:
        return f"{', '.join(error.failing)} miss there"
    return f"it raises {type(error).__name__} there"


def _same_failure(edge: BaseException, shown: BaseException) -> bool:
    """Whether an edge case's failure says no more than the failure shown: the same kind
    of error, and for value comparisons no output off that is not off in the one shown
    (the total aside: it follows from the terms and the weights, which differ)."""
    if type(edge) is not type(shown):
        return False
    if isinstance(edge, InvariantViolation) and isinstance(shown, InvariantViolation):
        total = TOTAL.name
        return set(edge.failing) - {total} <= set(shown.failing) - {total}
    return True


def _same_cause(smaller: BaseException, shown: BaseException) -> bool:
    """Whether a smaller input's failure has the cause of the one shown, as the report groups
    failures (``properties.causes``): the same kind of error, and for value comparisons an
    output off in both (the total aside). A mistake that gives a wrong number on two rows
    may give NaN on one: its smallest input is that row, with more outputs off."""
    if type(smaller) is not type(shown):
        return False
    if isinstance(smaller, InvariantViolation) and isinstance(shown, InvariantViolation):
        total = TOTAL.name
        off = set(shown.failing) - {total} or {total}
        return bool(set(smaller.failing) & off)
    return True


def failure_of(
    invariant: Invariant, target: str, error: BaseException, probe: Probe, shown: Any
) -> Failure:
    """The failure ``error`` of ``invariant`` on the input ``shown`` (checked with ``probe``)
    as a report gives it, outside a run (a replay in a fresh process)."""
    failure = _failure(invariant, target, error, (probe, shown))
    failure.shown = _picklable(shown)
    return failure


def _failure(
    invariant: Invariant, target: str, error: BaseException, last: tuple[Probe, Any] | None
) -> Failure:
    probe, drawn = last if last is not None else (None, None)
    raised = None
    if isinstance(error, (InvariantViolation, ContractViolation)):  # the suite's own words
        message = str(error)
        trace = ""
    elif isinstance(error, (TargetRaised, _TargetEnded)):
        message = str(error)
        trace = target_traceback(error.error)  # the target's own raise
        raised = type(error.error).__name__
    elif isinstance(error, HypothesisException):
        message, trace = _hypothesis_finding(error), ""
    else:
        message = f"the check raised {type(error).__name__}: {error}"
        trace = "".join(traceback.format_exception(error))
        if probe is not None and any(call.error for call in probe.calls):
            # the target raised it (an ordinary exception, its answer), not the suite
            message = f"a call of the target raised {type(error).__name__}: {error}"
            raised = type(error).__name__
            trace = target_traceback(error)
    if probe is None:  # no input was tried: a script without calls
        probe = invariant.probe(None)
    calls = probe.calls
    script = probe.script(target, invariant.id, invariant.statement, message)
    findings = diagnose_violation(error, calls)
    return Failure(
        message=message,
        minimal_input=repr(drawn),
        reproduction=script,
        diagnosis=diagnosis_lines(findings),
        traceback=trace,
        failing=tuple(getattr(error, "failing", ())),
        variants=tuple((f.output, f.variant) for f in findings if f.variant and f.finite),
        nan_variants=tuple((f.output, f.variant) for f in findings if f.variant and not f.finite),
        non_finite=tuple(
            dict.fromkeys(
                (
                    *(f.output for f in findings if f.variant is None or not f.finite),
                    *getattr(error, "non_finite", ()),
                )
            )
        ),
        raised=raised,
        target_errors=tuple(
            dict.fromkeys(call.error.splitlines()[0] for call in calls if call.error)
        ),
        state=getattr(error, "state", None),
    )


#: where the suite's own frames are: a target's traceback leaves them out (its zoo aside)
_SUITE = Path(__file__).parent
_HYPOTHESIS = Path(hypothesis.__file__).parent


def target_traceback(error: BaseException) -> str:
    """The traceback of an exception the target raised, its own frames only: the suite's
    calls into it and hypothesis' are left out, and so are the notes hypothesis adds."""
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not (
            Path(frame.filename).is_relative_to(_HYPOTHESIS)
            or (
                Path(frame.filename).is_relative_to(_SUITE)
                and not Path(frame.filename).is_relative_to(_SUITE / "zoo")
            )
        )
    ]
    text = str(error)
    last = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return "".join(
        ["Traceback (the target's frames):\n", *traceback.format_list(frames), last, "\n"]
    )


def diagnosis_lines(findings: list) -> list[str]:
    """The diagnosis as a report says it: the outputs that are NaN or inf where the spec's
    are finite in one sentence, then each known variant an output matches."""
    plain = [f for f in findings if f.variant is None]
    lines = [f.text for f in findings if f.variant is not None]
    if len(plain) == 1:
        lines.insert(0, plain[0].text)
    elif plain:
        names = ", ".join(f.output for f in plain)
        lines.insert(
            0,
            f"your {names} are NaN or inf where the spec's values are finite: a NaN or inf "
            "fails every comparison (relational invariants included), so fix it first",
        )
    return lines


def _hypothesis_finding(error: HypothesisException) -> str:
    """Hypothesis' own exception as what it says about the target (never a traceback)."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if isinstance(error, Flaky):
        return (
            "the same input gave different verdicts when tried again: the target keeps state "
            "between calls or is not deterministic (hypothesis: Flaky)"
        )
    if isinstance(error, FailedHealthCheck):
        return f"hypothesis' health check failed, so nothing was checked: {first}"
    if isinstance(error, DeadlineExceeded):
        return f"a call took longer than the hypothesis profile's deadline: {first}"
    if isinstance(error, Unsatisfiable):
        return f"no drawn input met the invariant's assumptions, so nothing was checked: {first}"
    return f"hypothesis could not run this invariant: {type(error).__name__}: {first}"
