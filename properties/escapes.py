"""What a target raises that is not an answer: skips, hypothesis's own exceptions, exits.

A call of the target may raise anything. An ordinary error (``ValueError``, ``RuntimeError``,
an exception class of the target's own) is its answer, and the invariant judges it. Some
exceptions mean something to the machinery around the call instead, and would change the
verdict without a word if they reached it:

* a skip (``unittest.SkipTest``, ``pytest.skip``) makes hypothesis and pytest skip the
  check: an invariant whose target skips every input would pass with nothing checked;
* hypothesis's own exceptions (``assume`` or ``reject`` inside the target, ``Flaky``,
  ``StopTest``) steer the search: a target that rejects half-precision inputs would leave
  them out of it;
* ``SystemExit`` and ``KeyboardInterrupt`` (and any other ``BaseException``) end a program.

So each probe wraps such an exception, where the call raised it, in ``TargetRaised`` (an
ordinary exception, which hypothesis shrinks) and remembers the first one it saw; the
runner then reports it as the input's failure, whatever the invariant made of it. An exit
(``ENDS_PROGRAM``) is reported as *crashed*, as when the target's process dies: a training
script ends there. The rule for users is in docs/API.md, "What a target may raise".
"""

from __future__ import annotations

import unittest
from typing import Protocol

from hypothesis.errors import HypothesisException

#: raised in a call, these end a program (the report says *crashed*)
ENDS_PROGRAM = (SystemExit, KeyboardInterrupt)


def escapes(error: BaseException) -> bool:
    """Whether ``error``, raised by the target, is not an answer the invariant may judge."""
    return not isinstance(error, Exception) or isinstance(
        error, (unittest.SkipTest, HypothesisException)
    )


def _kind(error: BaseException) -> str:
    if isinstance(error, ENDS_PROGRAM):
        return "a program ends there, so the check cannot go on"
    if isinstance(error, unittest.SkipTest) or "skip" in type(error).__name__.lower():
        return (
            "a skip is not a pass: compute every input of the domain, or refuse it with a "
            "ValueError (narrow the domain with --dtypes, --max-loss, ... where it is too wide)"
        )
    if isinstance(error, HypothesisException) or type(error).__module__.startswith("hypothesis"):
        return (
            "hypothesis's own exceptions steer the checker's search; a target must not raise them"
        )
    return "only an Exception is an error a caller can handle"


def describe(error: BaseException) -> str:
    """``unittest.case.SkipTest('not supported')``: the exception, its class qualified."""
    kind = type(error)
    module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
    name = module + kind.__qualname__
    text = str(error)
    return f"{name}: {text}" if text else name


class Escaping(Protocol):
    """A probe: it keeps the first exception of the target that escapes."""

    escaped: BaseException | None


def reraise_escaping(probe: Escaping, error: BaseException) -> None:
    """Where a call of ``probe``'s target raised ``error``: an exception that ``escapes`` is
    remembered and raised again as ``TargetRaised``; anything else is left to the caller."""
    if escapes(error):
        probe.escaped = probe.escaped or error
        raise TargetRaised(error) from error


class TargetRaised(Exception):
    """A call of the target raised an exception that ``escapes`` (module docstring)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        super().__init__(f"a call of the target raised {describe(error)}; {_kind(error)}")

    @property
    def ends_program(self) -> bool:
        return isinstance(self.error, ENDS_PROGRAM)
