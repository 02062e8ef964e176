"""After a run: the input each cause shows, shrunk to the end, and what it needs to fail.

Shrinking is bounded for every failure after a run's first, so that a failing verdict comes
about as fast as a passing one; but the input a report shows for a cause (its
representative, ``properties.causes``) must be the smallest. So each representative whose
shrinking was cut short is run again alone, with the same seed and an unbounded shrink.

Then each shown input of a stack target is checked again in a fresh worker process that
has made no call before. Where it passes there, the failure needs calls the run made
before it: the target keeps state between calls. The fewest of those calls that make the
failure again in a fresh process are found (the shortest run of calls before it, then its
first call alone), and the report's script replays them before the failing check.

Last, a shown failure that nothing names yet (no known variant, no exception, no state)
gets its triggers: the features of its input without which it passes
(``properties.features``), looked for on the one input shown, not on every failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from properties.causes import Cause, group
from properties.runner import InvariantResult
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
                _look_for_state(supervisor, shown)
                failure = shown.failure
                if _needs_triggers(shown) and failure is not None:
                    found = supervisor.triggers(shown.invariant_id, failure.shown)
                    failure.trigger_kinds = tuple(k for k, _ in found)
                    failure.triggers = tuple(description for _, description in found)
    return group(list(by_id.values()), order)


def _needs_triggers(result: InvariantResult) -> bool:
    """Whether the cause ``result`` shows is named by no known variant and no state, and
    has an input to take features away from (an exception's trigger is worth naming)."""
    failure = result.failure
    if result.status != "failed" or failure is None or failure.shown is None:
        return False
    return not (failure.variants or failure.state or failure.flaky)


def _look_for_state(supervisor: Supervisor, result: InvariantResult) -> None:
    failure = result.failure
    if result.status != "failed" or failure is None or failure.shown is None:
        return
    invariant_id = result.invariant_id

    def fails_after(calls: Sequence[Call]) -> str | None:
        """The script, where the check fails after ``calls`` in a fresh process."""
        answer = supervisor.replay(Replay(invariant_id, failure.shown, tuple(calls)))
        return answer[1] if answer is not None and answer[0] else None

    alone = supervisor.replay(Replay(invariant_id, failure.shown))
    if alone is None or alone[0]:
        return  # it fails on its own (or the replay could not tell): no state involved
    history = [
        call
        for call in supervisor.histories.get(invariant_id, ())
        if not call.adjust and call.error is None
    ]
    found = _fewest_calls(history, fails_after)
    if found is None:
        failure.triggers = failure.trigger_kinds = ()
        failure.state = (
            f"{invariant_id} fails on this input in the run but passes on it in a fresh "
            f"process, also after the {len(history)} calls the run made before it: the "
            "target is not deterministic, or its state comes from elsewhere"
        )
        return
    calls, script = found
    failure.triggers = failure.trigger_kinds = ()  # found after the state changed
    count = f"{len(calls)} call{'s' if len(calls) > 1 else ''}"
    failure.state = (
        f"{invariant_id} fails on this input after {count} the run made before it (the "
        "script below replays them) and passes on it in a fresh process"
    )
    failure.reproduction = script


def _fewest_calls(history: list[Call], fails_after) -> tuple[list[Call], str] | None:
    """Few calls of ``history`` after which the check fails in a fresh process, and the
    script: the shortest run of calls before the failing input (doubling, then halving),
    then its first call alone, which the shortest run needs. None where even the whole
    history does not make the failure."""
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
