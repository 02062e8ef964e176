"""The worker process: loads the target, runs invariants on request, reports every call.

The target is of one of two kinds: a ``stack`` callable (``recon-spec check``), loaded and
called once on a plain valid input before anything else, or an ``api`` module
(``recon-spec check-api``), imported; the invariants are those of its kind.

The target only ever runs here, never in the process that writes the report: a target that
exits, segfaults or hangs takes a worker with it, and the supervisor
(``properties/supervisor.py``) reports that and carries on with a fresh one. The two talk
over one connection, in tuples whose first element says what they are:

=====================================  ==================================================
worker -> supervisor                   meaning
=====================================  ==================================================
``("importing", thread)``              the target's import starts (in the thread named)
``("imported",)``                      it ended
``("ready",)``                         the target loaded (and its first call was checked)
``("unusable", reason)``               it cannot be checked; ``reason`` is for the user
``("example",)``                       a new input starts (its calls follow)
``("call", Call)``                     a call of the target starts
``("returned",)``                      that call returned (or raised)
``("result", InvariantResult)``        an invariant is done
supervisor -> worker
``("run", WorkRequest)``               run one invariant
``("replay", Replay)``                 make some calls, then check one input (-> ``replayed``)
``("triggers", id, input)``            the features of a failing input that trigger it
``("bound",)``                         another invariant failed: bound shrinking from now
``("stop",)``                          exit
worker -> supervisor, to a replay
``("replayed", failed, script)``       whether the check failed, and the calls as a script
``("triggered", features)``            the answer to ``triggers``
=====================================  ==================================================

A worker started for a replay (``plain_input`` None) makes no call before it: a target
that keeps state between calls starts from a fresh process's state.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

from hypothesis import Phase, settings

#: exit status of a worker whose supervisor went away
ORPHANED = 70


@dataclass(frozen=True)
class SearchSettings:
    """What the runner reads of hypothesis settings, as plain values (a profile registered
    in the supervisor's process, by a user's conftest say, does not exist in a worker)."""

    max_examples: int
    derandomize: bool
    phases: tuple[str, ...]

    @classmethod
    def of(cls, chosen: settings) -> SearchSettings:
        return cls(chosen.max_examples, chosen.derandomize, tuple(p.name for p in chosen.phases))

    def hypothesis_settings(self) -> settings:
        from properties.profiles import run_settings

        return run_settings(
            settings(
                max_examples=self.max_examples,
                derandomize=self.derandomize,
                phases=[Phase[name] for name in self.phases],
                deadline=None,
            )
        )


@dataclass(frozen=True)
class WorkRequest:
    """One invariant to run (picklable)."""

    invariant_id: str
    search: SearchSettings
    seed: int | None
    domain: Any  # properties.strategies.Domain
    use_database: bool
    #: calls left to shrinking a failure (None: unbounded)
    shrink_budget: int | None = None
    #: shrink to the end, whatever other invariants did (the input a report shows)
    full_shrink: bool = False


@dataclass(frozen=True)
class Replay:
    """Make ``calls`` (recorded ``properties.target.Call`` s), then check ``shown`` against
    one invariant: does a failure need the calls a run made before it?"""

    invariant_id: str
    shown: Any
    calls: tuple[Any, ...] = ()


class _Reporter:
    """The runner's observer: tells the supervisor about every input and call, and hears
    whether to bound the shrinking."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.bounded = False
        self.full_shrink = False

    def example_started(self) -> None:
        self.connection.send(("example",))

    def call_started(self, call: Any) -> None:
        self.connection.send(("call", call))

    def call_finished(self) -> None:
        self.connection.send(("returned",))

    def bound_now(self) -> bool:
        if self.full_shrink:
            return False
        while not self.bounded and self.connection.poll():
            message = self.connection.recv()
            if message[0] == "bound":
                self.bounded = True
            elif message[0] == "stop":
                os._exit(0)
        return self.bounded


def _die_with(lifeline: Connection) -> None:
    """Exit when the supervisor does, however it ends (even by SIGKILL)."""
    if sys.platform.startswith("linux"):
        # PR_SET_PDEATHSIG: the kernel sends SIGKILL when the parent dies
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)

    def watch() -> None:  # elsewhere (and as a second line): the lifeline's end closes
        with contextlib.suppress(EOFError, OSError):
            lifeline.recv()
        os._exit(ORPHANED)

    threading.Thread(target=watch, daemon=True).start()


def main(
    connection: Connection,
    lifeline: Connection,
    target: str,
    plain_input: Any,
    environment: dict[str, str],
    threads: int,
    kind: str = "stack",
    stacks: str | None = None,
) -> None:
    """The worker's life: load (and, for a stack, check on a plain input), then run
    requests until told to stop. ``stacks``: the file its threads' stacks are written to
    on SIGUSR1 (the supervisor asks before it ends a worker that hangs)."""
    _die_with(lifeline)
    if stacks is not None:
        faulthandler.register(signal.SIGUSR1, file=open(stacks, "w"), all_threads=True)  # noqa: SIM115
    with contextlib.suppress(OSError):  # a group of its own: the supervisor ends it whole
        os.setpgid(0, 0)
    # the checking process's environment as it is now, not the fork server's at its start
    os.environ.clear()
    os.environ.update(environment)
    # Ctrl-C is the supervisor's to handle; ignored, a Ctrl-C pending from the start
    # (started with SIGINT blocked) is discarded, and the target's children start unblocked
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    os.dup2(2, 1)  # what the target prints goes to stderr: stdout carries the report
    import torch

    torch.set_num_threads(threads)
    load_what_a_run_imports()
    from properties.runner import run_invariant

    reporter = _Reporter(connection)
    #: the result of the invariant first-call, made when the target loaded (a stack's)
    first_call = None
    # the import is a call of the target: bounded by --call-timeout from here
    connection.send(("importing", threading.main_thread().ident))
    if kind == "api":
        implementation = _load_api(connection, target)
        from properties.api import by_id
    else:
        loaded = _load(connection, reporter, target, plain_input)
        implementation, first_call = loaded if loaded is not None else (None, None)
        from properties.invariants import by_id
    if implementation is None:
        return
    connection.send(("ready",))

    while True:
        message = connection.recv()
        if message[0] == "stop":
            return
        if message[0] == "bound":
            reporter.bounded = True
            continue
        if message[0] == "triggers":
            from properties.runner import triggers

            _, invariant_id, shown = message
            found = triggers(by_id(invariant_id), implementation, shown, reporter)
            connection.send(("triggered", found))
            continue
        if message[0] == "replay":
            replayed = _replay(message[1], implementation, by_id, target, reporter)
            connection.send(("replayed", *replayed))
            continue
        request: WorkRequest = message[1]
        if first_call is not None and request.invariant_id == first_call.invariant_id:
            # checked on this process's first call, as no later call can check it
            connection.send(("result", replace(first_call, seed=request.seed)))
            continue
        reporter.full_shrink = request.full_shrink
        try:
            result = run_invariant(
                by_id(request.invariant_id),
                implementation,
                target=target,
                settings=request.search.hypothesis_settings(),
                domain=request.domain,
                seed=request.seed,
                use_database=request.use_database,
                shrink_budget=request.shrink_budget,
                observer=reporter,
                bound_shrinking=reporter.bound_now,
            )
        except Exception:  # the suite's own failure, not the target's
            result = _suite_error(request, traceback.format_exc())
        connection.send(("result", result))


def load_what_a_run_imports() -> None:
    """Imports, before the first draw, every module of the suite a run imports later.

    Hypothesis mixes constants of every loaded local module into its draws, so a module
    first loaded mid-run (a failure's reproduction, the oracle in a diagnosis) would change
    what every later invariant of this worker draws: the same derandomized run would then
    report other inputs depending on which worker ran which invariant.
    """
    from properties.fork_server import WORKER_MODULES

    for name in WORKER_MODULES:
        importlib.import_module(name)


def _replay(
    replay: Replay, implementation: Any, by_id: Any, target: str, reporter: _Reporter
) -> tuple[bool, str, Any]:
    """Make the replay's calls, then check its input: whether the check fails there, every
    call as a standalone script (earlier calls' tensors freed as the run freed them), and
    the failure on that input as a report gives it (``properties.runner.Failure``)."""
    from hypothesis.errors import UnsatisfiedAssumption

    from properties.reproduction import render, replay_call
    from properties.runner import check_once, failure_of
    from properties.target import Probe

    invariant = by_id(replay.invariant_id)
    reporter.example_started()
    before = Probe(implementation, reporter)
    for call in replay.calls:
        with contextlib.suppress(Exception):  # what an earlier call answered is not checked
            replay_call(before, call)
    reporter.example_started()
    probe = invariant.probe(implementation, reporter)
    try:
        check_once(invariant, probe, replay.shown)
    except Exception as error:
        if isinstance(error, UnsatisfiedAssumption) and probe.escaped is None:
            return False, "", None  # outside the invariant's inputs: it shows nothing
        calls = [*before.calls, *probe.calls]
        message = str(error)
        script = render(
            target, invariant.id, invariant.statement, calls, message, before=len(before.calls)
        )
        return True, script, failure_of(invariant, target, error, probe, replay.shown)
    return False, "", None


def _suite_error(request: WorkRequest, trace: str) -> Any:
    from properties.runner import Failure, InvariantResult

    message = "the suite itself failed while running this invariant (not your target's fault)"
    failure = Failure(message, "", "", traceback=trace, shrunk=False)
    return InvariantResult(request.invariant_id, "error", 0, 0.0, failure, request.seed)


def _load_api(connection: Connection, target: str):
    """The API module, or None (and the supervisor told why) when it does not import. A
    module that lacks some of the five names is still checked: the invariants that need a
    missing one report it (``properties.api.invariant``)."""
    from properties.api.module import load_api
    from properties.float_mode import target_mode
    from properties.target import TargetLoadError

    try:
        with target_mode():  # its import may set the floating-point mode (-ffast-math)
            api = load_api(target)
    except TargetLoadError as error:
        connection.send(("unusable", str(error)))
        return None
    connection.send(("imported",))
    return api


def _load(
    connection: Connection, reporter: _Reporter, target: str, case: Any
) -> tuple[Any, Any] | None:
    """The target's callable and the result of its first call, checked on ``case`` (a plain
    valid input) by the invariant ``first-call``; None (and the supervisor told why) when
    the target cannot be checked: it does not load, or that call raises."""
    from properties.escapes import TargetRaised
    from properties.float_mode import target_mode
    from properties.invariants import by_id
    from properties.invariants.contract import FIRST_CALL
    from properties.invariants.edge_cases import named
    from properties.runner import InvariantResult, check_once, failure_of
    from properties.target import ContractViolation, Probe, TargetLoadError, load_target

    try:
        with target_mode():  # its import may set the floating-point mode (-ffast-math)
            _, implementation = load_target(target)
    except TargetLoadError as error:
        connection.send(("unusable", str(error)))
        return None
    connection.send(("imported",))
    if case is None:  # a worker for a replay: no call before the replayed ones
        return implementation, None
    invariant = by_id(FIRST_CALL)
    reporter.example_started()
    probe = Probe(implementation, reporter)
    start = time.perf_counter()
    try:
        check_once(invariant, probe, case)
    except Exception as error:
        answered = bool(probe.calls and probe.calls[0].values)
        if not answered and not isinstance(error, ContractViolation):
            connection.send(
                (
                    "unusable",
                    f"{target} cannot be called as f(token_nll, zfree_token_nll, mask, config) "
                    f"on a plain valid input:\n{traceback.format_exc()}",
                )
            )
            return None
        # every call's result counts, the first one's too: it fails like any other
        ended = isinstance(error, TargetRaised) and error.ends_program
        failure = failure_of(invariant, target, error, probe, case)
        failure.edge_case, failure.shrunk = named("plain"), False  # the input, as it is
        seconds = time.perf_counter() - start
        status = "crashed" if ended else "failed"
        return implementation, InvariantResult(FIRST_CALL, status, 1, seconds, failure)
    return implementation, InvariantResult(FIRST_CALL, "passed", 1, time.perf_counter() - start)
