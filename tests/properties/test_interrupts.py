"""A Ctrl-C or SIGTERM ends the run even where Python loses its exception
(``properties/interrupts.py``): in a weakref callback, as importlib's module locks have."""

from __future__ import annotations

import gc
import signal
import sys
import weakref

import pytest

from properties.interrupts import Terminated, raise_if_received, signals_end_the_run

pytestmark = pytest.mark.skipif(
    not hasattr(signal, "raise_signal") or sys.platform == "win32", reason="POSIX signals"
)


class _Thing:
    pass


@pytest.fixture
def printed(monkeypatch: pytest.MonkeyPatch) -> list[type[BaseException]]:
    """The unraisable exceptions that reach the hook the run found (which prints them)."""
    seen: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: seen.append(unraisable.exc_type))
    return seen


def _lose(number: signal.Signals) -> None:
    """Deliver ``number`` inside a weakref callback, where the interpreter can only print
    what its handler raises (as for importlib's module locks, during an import)."""
    thing = _Thing()
    ref = weakref.ref(thing, lambda _: signal.raise_signal(number))
    del thing
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize(
    ("number", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)]
)
def test_a_signal_lost_in_a_weakref_callback_is_raised_where_the_run_next_checks(
    printed: list[type[BaseException]], number: signal.Signals, raised: type[BaseException]
) -> None:
    with signals_end_the_run():
        _lose(number)  # returns: the handler's exception went nowhere
        with pytest.raises(raised):
            raise_if_received()
    assert printed == []  # no "Exception ignored in ...", no traceback


def test_a_signal_that_propagates_is_recorded_too_and_the_first_one_wins() -> None:
    with signals_end_the_run():
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        _lose(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            raise_if_received()


def test_outside_the_run_nothing_is_recorded_and_the_handlers_are_back(
    printed: list[type[BaseException]],
) -> None:
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    hook = sys.unraisablehook  # the fixture's
    with signals_end_the_run():
        _lose(signal.SIGINT)
    assert printed == []
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    assert sys.unraisablehook is hook
    raise_if_received()  # nothing left from the run
    with signals_end_the_run():
        raise_if_received()  # nor in the next one
    # an unraisable exception that is not a received signal is still printed
    with signals_end_the_run():
        thing = _Thing()
        ref = weakref.ref(thing, lambda _: 1 / 0)
        del thing
        gc.collect()
        assert ref() is None
    assert printed == [ZeroDivisionError]
