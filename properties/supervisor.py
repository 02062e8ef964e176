"""Runs invariants in worker processes, so that the verdict survives the target.

The target runs only in workers (``properties/worker.py``), also with one job. A worker
that dies (an exit, a signal, a segfault) costs the invariant it was running, reported as
*crashed* with the exit status and the input of the call it died in, written as the usual
reproduction script; a call that runs past ``call_timeout`` kills its worker and is
reported as *timed out*, the same way. Either way a fresh worker takes the remaining
invariants. Workers never outlive the supervisor: they die with it (``worker._die_with``),
and ``close`` ends them.

A target that cannot be loaded, or raises (or dies, or hangs) on a plain valid input, cannot
be checked at all: ``run`` raises ``TargetUnusable``. ``kind`` is the target's: a ``stack``
callable or an ``api`` module (``properties/worker.py``), whose invariants its workers run.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import re
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from properties.fork_server import start_resource_tracker_quietly, worker_context
from properties.interrupts import raise_if_received
from properties.options import DEFAULT_CALL_TIMEOUT
from properties.runner import BOUNDED_SHRINK_CALLS, Failure, InvariantResult
from properties.target import Call
from properties.worker import Replay, WorkRequest, main

#: how long a worker may take to start, load the target and make its first call
#: the results that count toward ``--maxfail``: invariants that did not hold
NOT_HOLDING = ("failed", "crashed", "timed out")
LOAD_TIMEOUT_FLOOR = 120.0


#: how long a hung worker has to write its stacks (faulthandler writes at once)
STACK_WAIT = 2.0


def thread_frames(dump: str, thread: int) -> list[str]:
    """The frames of ``thread`` in a faulthandler dump (most recent first), without the
    import machinery's and the suite's own: where the target was."""
    frames: list[str] = []
    inside = False
    for line in dump.splitlines():
        heading = re.match(r"^(?:Current thread|Thread) (0x[0-9a-f]+)", line)
        if heading:
            inside = int(heading[1], 16) == thread
            continue
        path = re.match(r'^\s+File "([^"]+)"', line)
        if inside and path and not _suite_file(path[1]):
            frames.append(f"  {line.strip()}")
    return frames


#: where the frames around a target's call come from: the suite (its zoo aside), and the
#: standard library that starts a worker and imports a module
_SUITE = Path(__file__).parent
_AROUND = (Path(multiprocessing.__file__).parent, Path(importlib.__file__).parent)


def _suite_file(path: str) -> bool:
    """Whether a frame of ``path`` is the suite's or the machinery's, not the target's."""
    if path.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return True
    file = Path(path)
    if file.is_relative_to(_SUITE):
        return not file.is_relative_to(_SUITE / "zoo")
    return any(file.is_relative_to(folder) for folder in _AROUND)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class TargetUnusable(Exception):
    """The target cannot be checked: it does not load, or fails on a plain valid input."""


def exit_description(exitcode: int | None) -> str:
    """``exit code 7`` or ``killed by signal SIGSEGV``, for an ended worker."""
    if exitcode is None:
        return "ended without an exit status"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = str(-exitcode)
        return f"killed by signal {name}"
    return f"exit code {exitcode}"


@dataclass
class _Worker:
    process: Any
    connection: Connection
    lifeline: Connection
    started: float
    #: the file its threads' stacks are written to on SIGUSR1 (``worker.main``)
    stacks: str
    ready: bool = False
    #: when the target's import started, while it runs (bounded as a call is), and the
    #: thread it runs in
    importing: float | None = None
    main_thread: int | None = None
    request: WorkRequest | None = None
    request_started: float = 0.0
    examples: int = 0
    calls: list[Call] = field(default_factory=list)
    call_started: float | None = None
    replay_sent: bool = False
    #: every call this worker made, in order (a replay may need the calls before a failure)
    log: list[Call] = field(default_factory=list)
    #: where in ``log`` each input of the current invariant began
    example_starts: list[int] = field(default_factory=list)
    #: a replay's answer: (whether the check failed, the calls as a script, the failure)
    replayed: tuple[bool, str, Any] | None = None
    #: the answer to a ``triggers`` request: (kind, description) each
    triggered: tuple[tuple[str, str], ...] | None = None
    asked: bool = False


class Supervisor:
    """Worker processes for one target; ``run`` yields results as invariants finish."""

    def __init__(
        self,
        target: str,
        *,
        plain_input: Any,
        statement_of: Any,
        jobs: int = 1,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        environment: dict[str, str] | None = None,
        threads: int = 1,
        kind: str = "stack",
    ) -> None:
        self.target = target
        self.kind = kind
        self.plain_input = plain_input
        self.statement_of = statement_of  # invariant id -> its statement (for reports)
        self.jobs = max(1, jobs)
        self.call_timeout = call_timeout
        self.environment = dict(environment or {})
        self.threads = threads
        self.workers: list[_Worker] = []
        self.failure_seen = False
        #: invariant id -> the calls its worker made before the input its failure shows
        self.histories: dict[str, tuple[Call, ...]] = {}
        self._context = worker_context()

    # --- lifecycle ------------------------------------------------------------------------

    def _start_worker(self, *, fresh: bool = False) -> _Worker:
        """A worker that has loaded the target and called it on the plain input; ``fresh``:
        one that has not called it (a replay starts from a fresh process's state)."""
        start_resource_tracker_quietly()
        ours, theirs = self._context.Pipe()
        watch, lifeline = self._context.Pipe(duplex=False)
        descriptor, stacks = tempfile.mkstemp(prefix="recon-spec-stacks-", suffix=".txt")
        os.close(descriptor)
        arguments = (
            theirs,
            watch,
            self.target,
            None if fresh else self.plain_input,
            {**os.environ, **self.environment},
            self.threads,
            self.kind,
            stacks,
        )
        held: list[int] = []  # a Ctrl-C that came while the worker started
        try:
            process = self._started(arguments, held)
        except OSError:
            # no fork server here: its socket's path in $TMPDIR is too long for AF_UNIX, say
            if self._context.get_start_method() == "spawn":
                raise
            self._context = multiprocessing.get_context("spawn")
            process = self._started(arguments, held)
        theirs.close()
        watch.close()
        worker = _Worker(process, ours, lifeline, time.monotonic(), stacks)
        self.workers.append(worker)
        if held:  # now that close() knows the worker, the Ctrl-C held while it started
            signal.raise_signal(signal.SIGINT)
        return worker

    def _started(self, arguments: tuple, held: list[int]) -> Any:
        """The started worker process; a Ctrl-C that comes meanwhile goes into ``held``."""
        process = self._context.Process(
            target=main, args=arguments, name="recon-spec-worker", daemon=True
        )
        if not _in_main_thread():
            process.start()
            return process
        # Ctrl-C is the supervisor's to handle, once the worker has started: a
        # KeyboardInterrupt inside start() would leave a child without its arguments. So it
        # is held, not lost: recorded here, and blocked, since the mask survives exec and
        # fork, so that neither the worker nor its fork server acts on it before the
        # worker's main() ignores it
        previous = signal.signal(signal.SIGINT, lambda number, frame: held.append(number))
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
        return process

    def _end(self, worker: _Worker) -> None:
        if worker in self.workers:
            self.workers.remove(worker)
        # the worker leads a process group (worker.main): what the target started in it
        # (a data loader's child, a daemon) ends with it, and so releases the run's output
        with contextlib.suppress(OSError):
            os.killpg(worker.process.pid, signal.SIGKILL)
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(5)
        for connection in (worker.connection, worker.lifeline):
            connection.close()
        with contextlib.suppress(OSError):
            os.remove(worker.stacks)

    def close(self) -> None:
        """Stop every worker at once: each has reported every result (and saved its failures
        to the example database) before it waits for more work, so nothing is lost; an
        interpreter's orderly exit would cost a second of tearing torch down."""
        for worker in list(self.workers):
            self._end(worker)

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- running --------------------------------------------------------------------------

    def run(
        self, requests: Iterable[WorkRequest], *, maxfail: int | None = None
    ) -> Iterator[InvariantResult]:
        """Run every request; yield each result as it comes (in completion order). After
        ``maxfail`` results that did not hold (failed, crashed, timed out), the invariants
        still running are abandoned and the rest are not started."""
        pending = deque(requests)
        busy = lambda: any(w.request is not None for w in self.workers)  # noqa: E731
        failing = 0
        while pending or busy():
            wanted = min(self.jobs, len(pending) + sum(w.request is not None for w in self.workers))
            while len(self.workers) < wanted:
                self._start_worker()
            for worker in self.workers:
                if worker.ready and worker.request is None and pending:
                    self._dispatch(worker, pending.popleft())
            for result in self._wait_and_handle():
                yield result
                if result.status in NOT_HOLDING:
                    failing += 1
                if maxfail is not None and failing >= maxfail:
                    self.close()  # what the others are running is abandoned, unreported
                    return

    def triggers(self, invariant_id: str, shown: Any) -> tuple[tuple[str, str], ...]:
        """The features of the failing input ``shown`` that trigger ``invariant_id``'s
        failure (``properties.runner.triggers``), found by a worker; none where it died."""
        worker = next((w for w in self.workers if w.ready and w.request is None), None)
        worker = worker or self._start_worker()
        worker.triggered, worker.asked = None, False
        while worker in self.workers and worker.triggered is None:
            if worker.ready and not worker.asked:
                worker.connection.send(("triggers", invariant_id, shown))
                worker.asked = True
            for _ in self._wait_and_handle():
                pass  # no invariant runs meanwhile: no result comes
        return worker.triggered or ()

    def replay(self, replay: Replay) -> tuple[bool, str, Any] | None:
        """Make ``replay``'s calls and check its input in a fresh worker: whether the check
        fails there, the calls as a script and the failure (``properties.runner.Failure``,
        None where it passes); None where the worker died or hung."""
        worker = self._start_worker(fresh=True)
        try:
            while worker in self.workers and worker.replayed is None:
                if worker.ready and not worker.replay_sent:
                    worker.connection.send(("replay", replay))
                    worker.replay_sent = True
                for _ in self._wait_and_handle():
                    pass  # a replay worker runs no invariant: no result comes
            return worker.replayed
        finally:
            if worker in self.workers:
                self._end(worker)

    def _dispatch(self, worker: _Worker, request: WorkRequest) -> None:
        if self.failure_seen and not request.full_shrink:
            request = replace(request, shrink_budget=BOUNDED_SHRINK_CALLS)
        worker.request, worker.request_started = request, time.monotonic()
        worker.examples, worker.calls, worker.call_started = 0, [], None
        worker.example_starts = []
        worker.connection.send(("run", request))

    def _deadline(self, worker: _Worker) -> float:
        if worker.call_started is not None:  # the plain input's call included
            return worker.call_started + self.call_timeout
        if worker.importing is not None:  # the target's import is a call of it
            return worker.importing + self.call_timeout
        if not worker.ready:
            return worker.started + max(LOAD_TIMEOUT_FLOOR, self.call_timeout)
        return float("inf")

    def _wait_and_handle(self) -> Iterator[InvariantResult]:
        # a Ctrl-C whose exception Python lost (properties/interrupts.py) ends the run here,
        # 1 s at most after it came
        raise_if_received()
        now = time.monotonic()
        timeout = min((self._deadline(w) for w in self.workers), default=now + 1) - now
        by_handle: dict[Any, _Worker] = {}
        for worker in self.workers:
            by_handle[worker.connection] = worker
            by_handle[worker.process.sentinel] = worker
        ready = wait(list(by_handle), timeout=min(max(timeout, 0.0), 1.0))
        handled: set[int] = set()
        for handle in ready:
            worker = by_handle[handle]
            if id(worker) in handled or worker not in self.workers:
                continue
            if handle is worker.connection:
                yield from self._messages(worker)
            elif not worker.connection.poll():
                handled.add(id(worker))
                yield from self._died(worker)
        now = time.monotonic()
        for worker in list(self.workers):
            if self._deadline(worker) <= now:
                yield from self._timed_out(worker)

    def _messages(self, worker: _Worker) -> Iterator[InvariantResult]:
        while worker in self.workers and worker.connection.poll():
            try:
                message = worker.connection.recv()
            except (EOFError, OSError):
                yield from self._died(worker)
                return
            kind = message[0]
            if kind == "ready":
                worker.ready = True
            elif kind == "importing":
                worker.importing, worker.main_thread = time.monotonic(), message[1]
            elif kind == "imported":
                worker.importing = None
            elif kind == "unusable":
                self.close()
                raise TargetUnusable(message[1])
            elif kind == "example":
                worker.examples += 1
                worker.calls = []
                worker.example_starts.append(len(worker.log))
            elif kind == "call":
                worker.calls.append(message[1])
                worker.log.append(message[1])
                worker.call_started = time.monotonic()
            elif kind == "returned":
                worker.call_started = None
            elif kind == "triggered":
                worker.triggered, worker.asked = message[1], False
                worker.call_started = None
            elif kind == "replayed":
                worker.replayed = (message[1], message[2], message[3])
                worker.call_started = None
            elif kind == "result":
                result: InvariantResult = message[1]
                worker.request = None
                failure = result.failure
                if failure is not None and 0 < failure.example <= len(worker.example_starts):
                    before = worker.log[: worker.example_starts[failure.example - 1]]
                    self.histories[result.invariant_id] = tuple(before)
                if result.status == "failed":
                    self._failure_seen()
                yield result

    def _failure_seen(self) -> None:
        if self.failure_seen:
            return
        self.failure_seen = True
        for other in self.workers:
            if other.request is not None:
                with contextlib.suppress(OSError):
                    other.connection.send(("bound",))

    def _died(self, worker: _Worker) -> Iterator[InvariantResult]:
        worker.process.join(5)
        how = exit_description(worker.process.exitcode)
        in_call = worker.call_started is not None
        self._end(worker)
        if not worker.ready:
            self.close()
            doing = "importing" if self.kind == "api" else "loading"
            plain = "" if self.kind == "api" else " and calling it on a plain valid input"
            raise TargetUnusable(f"the process {doing} {self.target}{plain} died ({how})")
        if worker.request is None:  # between invariants: nothing of the report is lost
            return
        where = "in a call of the target" if in_call else "between calls of the target"
        yield self._lost(worker, "crashed", f"the target's process died ({how}) {where}", how)

    def _timed_out(self, worker: _Worker) -> Iterator[InvariantResult]:
        where = self._stack(worker) if not worker.ready else ""
        self._end(worker)
        if worker.ready and worker.request is None:  # a replay that hung: nothing to report
            return
        if not worker.ready:
            self.close()
            if worker.call_started is not None:
                raise TargetUnusable(
                    f"{self.target}'s call on a plain valid input was still running after "
                    f"{self.call_timeout:g} s (--call-timeout){where}"
                )
            if worker.importing is not None:
                raise TargetUnusable(
                    f"the import of {self.target} was still running after "
                    f"{self.call_timeout:g} s (--call-timeout){where}"
                )
            what = "import" if self.kind == "api" else "load"
            raise TargetUnusable(
                f"{self.target} did not {what} within "
                f"{max(LOAD_TIMEOUT_FLOOR, self.call_timeout):g} s"
            )
        yield self._lost(
            worker,
            "timed out",
            f"a call of the target was still running after {self.call_timeout:g} s "
            "(--call-timeout); its process was killed",
            f"still running after {self.call_timeout:g} s: timed out",
        )

    def _stack(self, worker: _Worker) -> str:
        """Where the worker's main thread is, as a report says it (``": it was at ..."``),
        asked for with SIGUSR1 (faulthandler, ``worker.main``); "" where it does not say."""
        if worker.main_thread is None or not worker.process.is_alive():
            return ""
        with contextlib.suppress(OSError):
            os.kill(worker.process.pid, signal.SIGUSR1)
        deadline = time.monotonic() + STACK_WAIT
        frames: list[str] = []
        while not frames and time.monotonic() < deadline:
            time.sleep(0.05)
            with contextlib.suppress(OSError):
                frames = thread_frames(Path(worker.stacks).read_text(), worker.main_thread)
        if not frames:
            return ""
        return "; it was at (most recent call first):\n" + "\n".join(frames)

    def _lost(self, worker: _Worker, status: str, message: str, note: str) -> InvariantResult:
        """The result of an invariant whose worker ended: the input it was on, replayable."""
        request = worker.request
        assert request is not None
        self._failure_seen()
        calls = worker.calls
        if calls and worker.call_started is not None:
            calls[-1].ended = note
        statement = self.statement_of(request.invariant_id)
        if calls:
            message += (
                f". It happened on input {worker.examples} of this invariant; the "
                "reproduction below makes that input's calls of the target"
            )
        failure = Failure(
            message=message,
            minimal_input=repr(calls[-1].shown_input) if calls else "(no call of the target yet)",
            reproduction=self._render(request.invariant_id, statement, calls, message),
            shrunk=False,
        )
        seconds = time.monotonic() - worker.request_started
        return InvariantResult(
            request.invariant_id, status, worker.examples, seconds, failure, request.seed
        )

    def _render(self, invariant_id: str, statement: str, calls: list, message: str) -> str:
        if self.kind == "api":
            from properties.api.reproduction import render_api

            return render_api(self.target, invariant_id, statement, calls, message)
        from properties.reproduction import render

        return render(self.target, invariant_id, statement, calls, message)
