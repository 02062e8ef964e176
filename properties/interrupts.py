"""Ctrl-C and SIGTERM end a run, wherever they land.

Python runs a signal's handler between two bytecodes of whatever the main thread runs then.
Where that is a weakref callback or a ``__del__`` (importlib's module locks have one, so any
import can be), the exception the handler raises cannot propagate: the interpreter prints it
as "Exception ignored in ...", with a traceback, and the run goes on to a verdict as if no
one had asked it to stop. So the handlers installed here also record their signal, and
``raise_if_received`` raises it again where the run next checks (the supervisor, each time
it waits for its workers; the command line, before and after the run); the lost copy is
kept off stderr.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any


class Terminated(BaseException):
    """SIGTERM (CI cancelling a job, ``timeout``): unwinds like Ctrl-C, so that the run's
    workers end and its temporary folder is removed."""


#: what each signal raises in the main thread
RAISES: dict[signal.Signals, type[BaseException]] = {
    signal.SIGINT: KeyboardInterrupt,
    signal.SIGTERM: Terminated,
}

#: the signals received since ``signals_end_the_run`` was entered, first one first
_received: list[type[BaseException]] = []


def _handle(signum: int, frame: object) -> None:
    raised = RAISES[signal.Signals(signum)]
    _received.append(raised)
    raise raised


def _quiet_if_received(previous: Any) -> Any:
    def hook(unraisable: Any) -> None:
        # the handler's exception, lost: raise_if_received raises it again
        if unraisable.exc_type in RAISES.values() and unraisable.exc_type in _received:
            return
        previous(unraisable)

    return hook


def raise_if_received() -> None:
    """Raise the first signal received in ``signals_end_the_run``, if any: one whose
    exception was lost where it landed ends the run here instead."""
    if _received:
        raise _received[0]


@contextlib.contextmanager
def signals_end_the_run() -> Iterator[None]:
    """Within: Ctrl-C raises ``KeyboardInterrupt`` and SIGTERM ``Terminated``, and each is
    recorded for ``raise_if_received``. Outside the main thread (where Python delivers no
    signal), nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, _handle) for number in RAISES}
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _quiet_if_received(previous_hook)
    _received.clear()
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        sys.unraisablehook = previous_hook
        _received.clear()
