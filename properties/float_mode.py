"""The processor's floating-point mode, kept to the target's own calls.

A target may turn on flush-to-zero (``torch.set_flush_denormal(True)``, or a library built
with ``-ffast-math``, whose loading sets it): subnormal results then become 0 in every
later computation of the thread, the suite's included. Hypothesis refuses to draw floats
in that mode (``FloatingPointError``), and the oracle's numpy arithmetic would flush too:
the suite's own failure would read as the target's. So each call of the target (and its
import) runs in the mode the target set, and the suite's code between calls in the mode a
process starts with: ``target_mode`` turns flush-to-zero back on for a call where the
target had it on, and off again after it. Where the flushed subnormals change the
target's results, that is its answer, judged like any other.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

#: whether the target's calls run with flush-to-zero on (it turned it on, and not off)
_TARGET_FLUSHES = [False]


def flushes() -> bool:
    """Whether this thread flushes subnormal results to zero now."""
    smallest = sys.float_info.min  # a variable: the division must run now, in this mode
    return smallest / 2 == 0.0


def _set_flush(on: bool) -> None:
    import torch

    torch.set_flush_denormal(on)


@contextlib.contextmanager
def target_mode() -> Iterator[None]:
    """Run a call of the target (or its import) in the floating-point mode it set; the code
    after it in the mode a process starts with."""
    if _TARGET_FLUSHES[0]:
        _set_flush(True)
    try:
        yield
    finally:
        _TARGET_FLUSHES[0] = flushes()
        if _TARGET_FLUSHES[0]:
            _set_flush(False)
