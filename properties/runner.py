"""Runs invariants against a target with hypothesis and turns failures into reports."""

from __future__ import annotations

import random
import time
import traceback
import zlib
from dataclasses import dataclass, field
from typing import Any

import hypothesis
from hypothesis import example, given
from hypothesis.errors import HypothesisException

from properties.cases import LossCase
from properties.diagnosis import diagnose
from properties.invariant import Invariant, InvariantViolation
from properties.oracle import expected
from properties.reproduction import render
from properties.strategies import DEFAULT_DOMAIN, Domain
from properties.target import Implementation, Probe
from properties.tolerances import case_tolerance


@dataclass
class Failure:
    """What a user needs to act on a failed invariant."""

    message: str
    minimal_input: str
    reproduction: str
    diagnosis: list[str] = field(default_factory=list)
    traceback: str = ""
    #: the named edge case (``properties/invariants/edge_cases.py``) that failed, if one did
    edge_case: str | None = None
    #: whether ``minimal_input`` is hypothesis's shrunk random input (else the edge case)
    shrunk: bool = True


@dataclass
class InvariantResult:
    invariant_id: str
    status: str  # "passed", "failed" or "not applicable"
    examples: int
    seconds: float
    failure: Failure | None = None
    #: the seed the run used: ``--seed`` with it reruns the same examples
    seed: int | None = None


def invariant_seed(invariant: Invariant, seed: int | None, settings: hypothesis.settings) -> int:
    """The seed to run with: the user's; else a fixed one per invariant when the profile is
    derandomized; else a fresh random one. Either way it is reported, so that
    ``--seed`` reruns exactly the same examples."""
    if seed is not None:
        return seed
    if settings.derandomize:
        return zlib.crc32(invariant.id.encode())
    return random.getrandbits(32)


def _diagnose_calls(probe: Probe) -> list[str]:
    findings: list[str] = []
    for call in probe.calls:
        if not call.values or not isinstance(call.case, LossCase):
            continue
        try:
            reference = expected(call.case).values
        except Exception:  # an input the oracle rejects: nothing to compare with
            continue
        case = call.case
        tol = case_tolerance(case)
        for finding in diagnose(case, call.values, reference, tol):
            if finding not in findings:
                findings.append(finding)
    return findings


def _edge_case_name(drawn: Any) -> str | None:
    from properties.invariants.edge_cases import EDGE_CASES

    case = drawn[0] if isinstance(drawn, tuple) else drawn
    return next((name for name, edge in EDGE_CASES.items() if edge is case), None)


def run_invariant(
    invariant: Invariant,
    implementation: Implementation,
    *,
    target: str,
    settings: hypothesis.settings,
    domain: Domain = DEFAULT_DOMAIN,
    seed: int | None = None,
) -> InvariantResult:
    """Check one invariant; on failure, report hypothesis's shrunk counterexample.

    The invariant's edge cases run first. When one of them fails, the random search runs
    too, so that the report can show a minimal counterexample beside the named edge case.
    """
    if not invariant.applies(domain):
        return InvariantResult(invariant.id, "not applicable", 0, 0.0)
    used_seed = invariant_seed(invariant, seed, settings)
    examples = [
        edge
        for edge in invariant.examples
        if not isinstance(edge[0] if isinstance(edge, tuple) else edge, LossCase)
        or domain.admits(edge[0] if isinstance(edge, tuple) else edge)
    ]
    count = 0

    def attempt(with_examples: bool) -> tuple[BaseException | None, dict[str, Any]]:
        last: dict[str, Any] = {}

        def check_one(drawn: Any) -> None:
            nonlocal count
            count += 1
            probe = Probe(implementation)
            last["probe"], last["drawn"] = probe, drawn
            invariant.check(probe, drawn)

        # Distinct database keys per invariant and target.
        digest = f"{invariant.id}|{target}".encode()
        check_one._hypothesis_internal_add_digest = digest  # type: ignore[attr-defined]
        test = given(invariant.inputs(domain))(check_one)
        for edge in reversed(examples if with_examples else []):
            test = example(edge)(test)
        test = hypothesis.seed(used_seed)(hypothesis.settings(settings)(test))
        try:
            test()
        except KeyboardInterrupt:
            raise
        except BaseException as error:
            return error, last
        return None, last

    start = time.perf_counter()
    error, last = attempt(with_examples=True)
    if error is None:
        seconds = time.perf_counter() - start
        return InvariantResult(invariant.id, "passed", count, seconds, None, used_seed)
    edge_case = _edge_case_name(last.get("drawn"))
    shrunk = edge_case is None
    if edge_case is not None:
        random_error, random_last = attempt(with_examples=False)
        if random_error is not None:
            error, last, shrunk = random_error, random_last, True
    failure = _failure(invariant, target, error, last)
    failure.edge_case, failure.shrunk = edge_case, shrunk
    seconds = time.perf_counter() - start
    return InvariantResult(invariant.id, "failed", count, seconds, failure, used_seed)


def _failure(invariant: Invariant, target: str, error: BaseException, last: dict) -> Failure:
    probe: Probe | None = last.get("probe")
    if isinstance(error, InvariantViolation):
        message = str(error)
        trace = ""
    elif isinstance(error, HypothesisException):
        message = f"hypothesis could not run this invariant: {type(error).__name__}: {error}"
        trace = "".join(traceback.format_exception(error))
    else:
        message = f"the check raised {type(error).__name__}: {error}"
        trace = "".join(traceback.format_exception(error))
    calls = probe.calls if probe else []
    return Failure(
        message=message,
        minimal_input=repr(last.get("drawn")),
        reproduction=render(target, invariant.id, invariant.statement, calls, message),
        diagnosis=_diagnose_calls(probe) if probe else [],
        traceback=trace,
    )


@dataclass(frozen=True)
class RunRequest:
    """Everything a worker process needs to run one invariant (picklable)."""

    invariant_id: str
    target: str
    profile: str
    max_examples: int | None
    seed: int | None
    domain: Domain
    use_database: bool = True


def run_request(request: RunRequest) -> InvariantResult:
    """Run one invariant in this process, loading the target by name."""
    import torch

    from properties.invariants import by_id
    from properties.profiles import profile_settings
    from properties.target import load_target

    # Workers share the machine's cores: one thread each is faster than oversubscription.
    torch.set_num_threads(1)
    _, implementation = load_target(request.target)
    settings = profile_settings(request.profile, max_examples=request.max_examples)
    if not request.use_database:
        settings = hypothesis.settings(settings, database=None)
    return run_invariant(
        by_id(request.invariant_id),
        implementation,
        target=request.target,
        settings=settings,
        domain=request.domain,
        seed=request.seed,
    )
