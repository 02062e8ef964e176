"""The fork server workers start from, and starting it early.

Workers are forked from a fork server that has imported torch and the suite once
(``WORKER_MODULES``), so a worker starts in milliseconds rather than the seconds of those
imports; the server is a fresh interpreter, never a fork of the checking process, whose
threads and state the target must not inherit. ``start_early`` starts it as a run begins,
so that its imports overlap the checking process's own (parsing the options imports the
spec, the runner torch) instead of following them: the first result comes seconds sooner.
This module imports nothing heavy, so that it can run first.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from typing import Any

#: every module a worker imports before its first draw, the target's aside: the fork server
#: imports them once (``properties.worker.load_what_a_run_imports`` says why all of them);
#: and recon_impl, the bundled target, whose import (a second and more) would otherwise
#: count against --call-timeout in each worker that checks it
WORKER_MODULES = (
    "torch",
    "recon_impl",
    "properties.runner",
    "properties.target",
    "properties.invariants",
    "properties.api",
    "properties.api.module",
    "properties.reproduction",
    "properties.oracle",
    "properties.api.reproduction",
)


def start_resource_tracker_quietly() -> None:
    """Start multiprocessing's resource tracker (every spawned process registers with it)
    with its stdout and stderr on /dev/null: it lives as long as any process holds its
    pipe, a target's long-lived child included, and must not keep ``recon-spec check |
    cat`` waiting on a pipe it never writes to."""
    from multiprocessing import resource_tracker

    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        resource_tracker.ensure_running()  # nothing to do once it runs
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def worker_context() -> Any:
    """The fork server's context, with what it imports; where there is no fork server, one
    that spawns each worker as a fresh interpreter of its own."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["properties.worker", *WORKER_MODULES])
    return context


def start_early() -> None:
    """Start the fork server now, where there is one; it imports while this process does.
    Where it cannot start (its socket's path in $TMPDIR is too long for AF_UNIX, say), the
    supervisor finds out and spawns its workers instead."""
    if worker_context().get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    start_resource_tracker_quietly()
    # a Ctrl-C while the server imports is this process's to handle, not a traceback of the
    # server's: it starts with SIGINT blocked (the mask survives exec; pending here, the
    # signal is delivered once unblocked), as the supervisor starts a worker
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with contextlib.suppress(OSError):
            forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
