"""Assertion helpers whose messages say what was expected, what came out, and by how much."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from properties.invariant import InvariantViolation
from properties.tolerances import Tolerance


def _fmt(value: float) -> str:
    return f"{value:.9g}"


def close(observed: float, expected: float, tolerance: Tolerance, scale: float) -> bool:
    """Within tolerance; NaN never is, and infinities must match exactly."""
    if math.isnan(observed) or math.isnan(expected):
        return False
    if math.isinf(observed) or math.isinf(expected):
        return observed == expected
    return tolerance.allows(observed, expected, scale)


def value_table(
    observed: Mapping[str, float],
    expected: Mapping[str, float],
    names: Iterable[str],
    tolerance: Tolerance,
    scales: Mapping[str, float] | None = None,
) -> tuple[list[str], str]:
    """The names that differ, and a table of every name: observed, expected, error, allowed."""
    lines, failing = [], []
    width = max((len(n) for n in names), default=10)
    names = list(names)
    for name in names:
        obs, exp = observed[name], expected[name]
        scale = abs(scales[name]) if scales else abs(exp)
        allowed = tolerance.rtol * scale + tolerance.atol
        ok = close(obs, exp, tolerance, scale)
        if not ok:
            failing.append(name)
        lines.append(
            f"  {'  ' if ok else '✗ '}{name:<{width}}  observed {_fmt(obs):>16}  "
            f"expected {_fmt(exp):>16}  |diff| {_fmt(abs(obs - exp)):>11}  allowed {allowed:.3g}"
        )
    return failing, "\n".join(lines)


def assert_values_close(
    observed: Mapping[str, float],
    expected: Mapping[str, float],
    tolerance: Tolerance,
    *,
    names: Iterable[str] | None = None,
    scales: Mapping[str, float] | None = None,
    what: str,
    case: Any = None,
) -> None:
    """Every named output within tolerance of its expected value, or one message listing all.

    ``case`` is the input the ``observed`` values came from (for the diagnosis).
    """
    names = list(names if names is not None else expected)
    failing, table = value_table(observed, expected, names, tolerance, scales)
    if failing:
        raise InvariantViolation(
            f"{what}: {', '.join(failing)} differ{'s' if len(failing) == 1 else ''}\n{table}",
            expected={n: expected[n] for n in names},
            observed={n: observed[n] for n in names},
            case=case,
            failing=tuple(failing),
            non_finite=tuple(
                n for n in failing if math.isfinite(expected[n]) and not math.isfinite(observed[n])
            ),
        )


def assert_tensor_close(
    observed: torch.Tensor,
    expected: torch.Tensor,
    tolerance: Tolerance,
    *,
    what: str,
    case: Any = None,
    scale: float | None = None,
    failing: tuple[str, ...] = ("gradient",),
) -> None:
    """Element-wise, relative to the largest expected magnitude (norm-wise comparison), or
    to ``scale`` where given (the magnitude the result is built from); ``failing`` names
    what differs for the report."""
    observed = observed.detach().double().cpu()
    expected = expected.detach().double().cpu()
    if scale is None:
        scale = float(expected.abs().max()) if expected.numel() else 0.0
    allowed = tolerance.rtol * scale + tolerance.atol
    difference = (observed - expected).abs()
    bad = ~(difference <= allowed)  # NaN counts as bad
    if bool(bad.any()):
        index = tuple(bad.nonzero()[0].tolist())
        raise InvariantViolation(
            f"{what}: {int(bad.sum())} of {bad.numel()} entries differ, first at {list(index)}: "
            f"observed {_fmt(float(observed[index]))}, expected {_fmt(float(expected[index]))} "
            f"(allowed |diff| {allowed:.3g})\n{_entries(observed, expected, bad)}",
            case=case,
            failing=failing,
            # a NaN or inf entry where the closed form is finite
            non_finite=failing if bool((~observed.isfinite() & expected.isfinite()).any()) else (),
        )


#: the most entries a message lists; a larger tensor is shown by its differing entries
SHOWN_ENTRIES = 64


def _entries(observed: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor) -> str:
    """Both tensors whole where they are small, else the first differing entries (a
    gradient at T = 65536 is no list to read)."""
    if observed.numel() <= SHOWN_ENTRIES:
        return f"  observed {observed.tolist()}\n  expected {expected.tolist()}"
    where = bad.nonzero()[:8].tolist()
    shown = ", ".join(
        f"{index}: {_fmt(float(observed[tuple(index)]))} (expected "
        f"{_fmt(float(expected[tuple(index)]))})"
        for index in where
    )
    rows = sorted({index[0] for index in bad.nonzero().tolist()}) if bad.dim() == 2 else []
    at_rows = f" in rows {rows[:8]}{' ...' if len(rows) > 8 else ''}" if rows else ""
    # where every entry is a little off, the one most off is the mistake (a dropped tail)
    gap = torch.where(bad, (observed - expected).abs().nan_to_num(math.inf), -1.0)
    worst = list(divmod(int(gap.argmax()), gap.shape[-1])) if gap.dim() == 2 else None
    most = (
        f"; the most off: {worst}: {_fmt(float(observed[tuple(worst)]))} (expected "
        f"{_fmt(float(expected[tuple(worst)]))})"
        if worst is not None and worst not in where
        else ""
    )
    return f"  differing entries{at_rows}, the first: {shown}{most}"
