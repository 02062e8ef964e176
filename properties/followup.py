"""After a run: the input each cause shows, shrunk to the end, and what it needs to fail.

Shrinking is bounded for every failure after a run's first, so that a failing verdict comes
about as fast as a passing one; but the input a report shows for a cause (its
representative, ``properties.causes``) must be the smallest. So each representative whose
shrinking was cut short is run again alone, with the same seed and an unbounded shrink.

Then each shown input of a stack target is checked again in a fresh worker process that
has made no call before. Where it passes there, the failure needs calls the run made
before it: the target keeps state between calls. The fewest of those calls that make the
failure again in a fresh process are found (first one call alone, of the few a state is
most often kept from; else the shortest run of calls before it, then its first call alone),
and the report's script replays them before the failing check. Then the input and those
calls lose rows and columns together (a row taken from the input is taken from each earlier
call of its shape) while the check still fails after them in a fresh process; where the
state also shows on the oracle comparison (``STATE_SHOWN_BY``), which reads every output,
the report shows it there, on as few cells as it takes.

Last, a shown failure that nothing names yet (no known variant, no exception, no state)
gets its triggers: the features of its input without which it passes
(``properties.features``), looked for on the one input shown, not on every failure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields, replace
from typing import Any

import torch

from properties.cases import LossCase, cases_in
from properties.causes import Cause, group
from properties.features import LAYOUT_KIND
from properties.runner import InvariantResult, cuts
from properties.strategies import make_valid
from properties.supervisor import Supervisor
from properties.target import Call
from properties.worker import Replay, WorkRequest

#: invariants followed up at most in one run: each new representative is shrunk to the end
#: and looked at, and evidence found that way may regroup the causes (a bound on the cost)
MOST_FOLLOWED = 8


def follow_up(
    supervisor: Supervisor,
    results: Sequence[InvariantResult],
    invariants: Sequence,
    requests: Sequence[WorkRequest],
    *,
    kind: str,
) -> list[Cause]:
    """The causes of ``results``, each representative shrunk to the end and, for a stack
    target, checked for state between calls (module docstring)."""
    positions = {invariant.id: n for n, invariant in enumerate(invariants)}
    order = positions.__getitem__
    by_id = {r.invariant_id: r for r in results}
    wanted = {r.invariant_id: r for r in requests}
    done: set[str] = set()
    while len(done) < MOST_FOLLOWED:
        # each step may show other evidence, and so regroup the causes around another
        # representative: until every one shown has been shrunk and looked at
        causes = group(list(by_id.values()), order)
        todo = [c.representative for c in causes if c.representative.invariant_id not in done]
        if not todo:
            break
        for shown in todo:
            done.add(shown.invariant_id)
            failure = shown.failure
            if shown.status == "failed" and failure is not None and failure.bounded:
                request = replace(wanted[shown.invariant_id], shrink_budget=None, full_shrink=True)
                (again,) = supervisor.run([request])
                if again.status == "failed" and again.failure is not None:
                    shown = by_id[shown.invariant_id] = replace(shown, failure=again.failure)
            if kind == "stack":
                moved = _look_for_state(supervisor, shown, by_id)
                if moved is not None:  # shown there now, with the state found: looked at
                    by_id[moved.invariant_id] = moved
                    done.add(moved.invariant_id)
                failure = shown.failure
                if _needs_triggers(shown) and failure is not None:
                    found = supervisor.triggers(shown.invariant_id, failure.shown)
                    failure.trigger_kinds = tuple(k for k, _ in found)
                    failure.triggers = tuple(description for _, description in found)
                    if LAYOUT_KIND in failure.trigger_kinds:
                        # the same values, contiguous, pass: a variant of the spec's
                        # formulas that the numbers match does so by coincidence
                        failure.variants = failure.nan_variants = ()
    return group(list(by_id.values()), order)


def _needs_triggers(result: InvariantResult) -> bool:
    """Whether the cause ``result`` shows is named by no known variant and no state, or its
    input holds a view (whose contiguous copy may pass: the layout outranks a variant), and
    has an input to take features away from (an exception's trigger is worth naming)."""
    failure = result.failure
    if result.status != "failed" or failure is None or failure.shown is None:
        return False
    if failure.state or failure.flaky:
        return False
    return not failure.variants or any(case.views for case in cases_in(failure.shown))


#: the invariant a target's state is shown on where it fails there too, by the input's
#: dtype: it compares every output with the oracle, so that a stale value of any output
#: shows on the fewest cells
STATE_SHOWN_BY = {
    torch.float64: "oracle-agreement",
    torch.float32: "oracle-agreement",
    torch.bfloat16: "oracle-agreement-low-precision",
    torch.float16: "oracle-agreement-low-precision",
}


def _look_for_state(
    supervisor: Supervisor, result: InvariantResult, by_id: dict[str, InvariantResult]
) -> InvariantResult | None:
    """Where ``result``'s failure needs calls made before it, say so and find the fewest;
    the result of ``STATE_SHOWN_BY`` where the state shows there on fewer cells (it then
    carries the state found), else None."""
    failure = result.failure
    if result.status != "failed" or failure is None or failure.shown is None:
        return None
    invariant_id = result.invariant_id

    def fails_after(calls: Sequence[Call]) -> str | None:
        """The script, where the check fails after ``calls`` in a fresh process."""
        answer = supervisor.replay(Replay(invariant_id, failure.shown, tuple(calls)))
        return answer[1] if answer is not None and answer[0] else None

    alone = supervisor.replay(Replay(invariant_id, failure.shown))
    if alone is None or alone[0]:
        return None  # it fails on its own (or the replay could not tell): no state involved
    history = [
        call
        for call in supervisor.histories.get(invariant_id, ())
        if not call.adjust and call.error is None
    ]
    found = fewest_calls(history, failure.shown, fails_after)
    failure.triggers = failure.trigger_kinds = ()  # found after the state changed
    if found is None:
        failure.state = (
            f"{invariant_id} fails on this input in the run but passes on it in a fresh "
            f"process, also after the {len(history)} calls the run made before it: the "
            "target is not deterministic, or its state comes from elsewhere"
        )
        return None
    calls, script = found
    _say_state(failure, invariant_id, calls, script)
    case = getattr(failure.shown, "case", failure.shown)  # a record's batch, or the batch
    oracle_id = STATE_SHOWN_BY.get(case.dtype) if isinstance(case, LossCase) else None
    oracle = by_id.get(oracle_id) if oracle_id is not None else None
    also = (
        (oracle.invariant_id,)
        if oracle is not None and oracle is not result and oracle.status == "failed"
        else ()
    )
    smaller = _fewer_cells_after(supervisor, (invariant_id, *also), failure.shown, calls)
    if smaller is None:
        return None
    shown_by, calls, script, replayed = smaller
    if shown_by == invariant_id:
        for name in _INPUT_FIELDS:  # the smaller input's own table, diagnosis and outcome
            setattr(failure, name, getattr(replayed, name))
        _say_state(failure, invariant_id, calls, script)
        return None
    assert oracle is not None
    _say_state(replayed, shown_by, calls, script)
    return replace(oracle, failure=replayed)


def _say_state(failure: Any, invariant_id: str, calls: list[Call], script: str) -> None:
    count, them = (f"{len(calls)} calls", "them") if len(calls) > 1 else ("1 call", "it")
    failure.state = (
        f"{invariant_id} fails on this input after {count} the run made before it (the "
        f"script below replays {them}) and passes on it in a fresh process"
    )
    failure.reproduction = script
    failure.calls_before = len(calls)


#: the fields of a failure that describe its input (``properties.runner.Failure``)
_INPUT_FIELDS = (
    "message",
    "minimal_input",
    "diagnosis",
    "traceback",
    "failing",
    "variants",
    "nan_variants",
    "non_finite",
    "raised",
    "target_errors",
    "shown",
)


def _fewer_cells_after(
    supervisor: Supervisor, invariant_ids: tuple[str, ...], shown: Any, calls: list[Call]
) -> tuple[str, list[Call], str, Any] | None:
    """The shown input and the calls before it with fewer cells (then the input with fewer
    config fields off their defaults), where the check of one of ``invariant_ids`` (the
    first that does) still fails after them in a fresh process: a row or a column taken
    from the input is taken from each earlier call of its shape too (a target that keeps
    state per shape or per position needs both). The invariant, the calls, the script and
    the failure; None where none smaller fails. The calls are the search's, not shrunk by
    it: without this the input shown is whatever the search met after them."""
    found = None
    if not isinstance(shown, LossCase):
        # a record (a permutation of it, say) is not cut; its batch may show the state on
        # the last of ``invariant_ids`` (the oracle comparison), which takes a batch
        case = getattr(shown, "case", None)
        if not isinstance(case, LossCase) or len(invariant_ids) < 2:
            return None
        answer = supervisor.replay(Replay(invariant_ids[-1], case, tuple(calls)))
        if answer is None or not answer[0]:
            return None
        shown, invariant_ids = case, invariant_ids[-1:]
        found = (invariant_ids[0], calls, answer[1], answer[2])
    while True:
        for invariant_id, case, earlier in _smaller_after(invariant_ids, shown, calls):
            answer = supervisor.replay(Replay(invariant_id, case, tuple(earlier)))
            if answer is not None and answer[0]:
                shown, calls = case, earlier
                found = (invariant_id, earlier, answer[1], answer[2])
                # the invariants from this one on: the first that showed it, kept
                invariant_ids = invariant_ids[invariant_ids.index(invariant_id) :]
                break
        else:
            return found


def _smaller_after(
    invariant_ids: tuple[str, ...], shown: LossCase, calls: list[Call]
) -> Iterator[tuple[str, LossCase, list[Call]]]:
    """What to replay, in order: each invariant on ``shown`` without a row or a column,
    after the calls cut to match (``_cut_calls``); then on ``shown`` with a field of its
    config back at its default, after the same calls (a field the search drew that the
    state does not need is not shown)."""
    for (axis, index), case in cuts(shown):
        case = make_valid(case)
        for earlier in _cut_calls(calls, shown.shape, axis, index):
            for invariant_id in invariant_ids:
                yield invariant_id, case, earlier
    default = type(shown.config)()
    for field in fields(shown.config):
        value = getattr(default, field.name)
        case = make_valid(shown.with_config(**{field.name: value}))
        if getattr(shown.config, field.name) != value and case != shown:
            for invariant_id in invariant_ids:
                yield invariant_id, case, calls


def _cut_calls(
    calls: list[Call], shape: tuple[int, int], axis: str, index: int
) -> list[list[Call]]:
    """``calls`` with the calls of ``shape`` cut along ``axis`` as the input was (at
    ``index``), then at each other index: what a call left at a position (a padded one's
    value, say) may be what the input meets at another; each also with the cut calls'
    padded positions made valid (``_all_valid``). A cut that leaves a call without a valid
    token is left out (an input the spec rejects: the script would stop there)."""
    cut = LossCase.without_row if axis == "row" else LossCase.without_column
    size = shape[0] if axis == "row" else shape[1]
    found = []
    for k in (index, *(k for k in range(size) if k != index)):
        earlier = [replace(c, case=cut(c.case, k)) if c.case.shape == shape else c for c in calls]
        # a state kept from a padded position (a cache of the whole tensor) shows on one
        # cell only where that position is valid
        opened = [
            [_all_valid(now, fill) if old.case.shape == shape else now
             for old, now in zip(calls, earlier, strict=True)]
            for fill in _FILLS
        ]  # fmt: skip
        for calls_now in (earlier, *opened):
            valid = all(c.case.has_valid_token for c in calls_now)
            if valid and calls_now not in found:
                found.append(calls_now)
    return found


#: the losses a padded position that held no loss (a NaN, an inf) holds once it is valid:
#: two, so that one of them differs from what the input has there
_FILLS = (0.0, 1.0)


def _all_valid(call: Call, fill: float) -> Call:
    """``call`` with every position valid, a padded value that is not a loss (not finite,
    or negative) replaced by ``fill``: the stale value a cache kept there is then a loss
    the spec accepts, and shows on that one cell."""
    case = call.case

    def loss(value: float) -> float:
        return value if math.isfinite(value) and value >= 0 else fill

    def opened(rows: tuple) -> tuple:
        return tuple(
            tuple(v if valid else loss(v) for v, valid in zip(row, mask, strict=True))
            for row, mask in zip(rows, case.mask, strict=True)
        )

    mask = tuple(tuple(True for _ in row) for row in case.mask)
    return replace(
        call,
        case=case.with_rows(opened(case.token_nll), opened(case.zfree_token_nll), mask),
    )


def fewest_calls(
    history: list[Call], shown: Any, fails_after: Callable[[Sequence[Call]], str | None]
) -> tuple[list[Call], str] | None:
    """Few calls of ``history`` after which the check of ``shown`` fails in a fresh process
    (``fails_after`` gives the script where it does), and the script: one call where one of
    those a state is most often kept from does (``_one_call``), else the shortest run of
    calls before the input and then its first call alone (``_shortest_run``). None where
    even the whole history does not make the failure."""
    return _one_call(history, shown, fails_after) or _shortest_run(history, fails_after)


def _one_call(history: list[Call], shown: Any, fails_after) -> tuple[list[Call], str] | None:
    """One call of ``history`` after which the check fails, and the script; None where none
    of those tried does. Tried: the first call (a state set once), the first and the last
    of the shown input's shape and dtype (a cache by shape), the last (a state from the call
    before). Each costs one replay, where the search over runs of calls replays hundreds of
    calls at a time, a dozen times."""
    case = getattr(shown, "case", shown)
    kind = (case.shape, case.dtype) if isinstance(case, LossCase) else None
    alike = [c for c in history if (c.case.shape, c.case.dtype) == kind]
    tried: list[Call] = []
    for calls in (history[:1], alike[:1], alike[-1:], history[-1:]):
        if calls and calls[0] not in tried:
            tried.append(calls[0])
            script = fails_after(calls)
            if script is not None:
                return calls, script
    return None


def _shortest_run(history: list[Call], fails_after) -> tuple[list[Call], str] | None:
    """The shortest run of calls of ``history`` before the failing input after which the
    check fails (doubling, then halving), or its first call alone, which that run needs;
    and the script. None where even the whole history does not make the failure."""
    size, script = 1, None
    while size < len(history):
        script = fails_after(history[-size:])
        if script is not None:
            break
        size *= 2
    else:
        size = len(history)
        script = fails_after(history) if history else None
    if script is None:
        return None
    low = size // 2  # history[-low:] does not make the failure (or low is 0)
    while size - low > 1:
        middle = (low + size) // 2
        shorter = fails_after(history[-middle:])
        if shorter is not None:
            size, script = middle, shorter
        else:
            low = middle
    needed = history[-size:]
    if size > 1:
        first = fails_after(needed[:1])
        if first is not None:
            return needed[:1], first
    return needed, script
