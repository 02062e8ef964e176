"""One input of the stack, as the strategies draw it and the reports print it.

A ``LossCase`` holds exactly representable values: the strategies round every value to the
case's dtype when they draw it, so the tensors an implementation receives and the float64
values the oracle reads are the same numbers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch

from properties.config import ReconstructionLossConfig
from properties.layouts import CONTIGUOUS, lay_out

DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float64: "float64",
    torch.float32: "float32",
    torch.bfloat16: "bfloat16",
    torch.float16: "float16",
}

Rows = tuple[tuple[float, ...], ...]
MaskRows = tuple[tuple[bool, ...], ...]


def _round_to_bfloat16(value: float) -> float:
    # bfloat16 is the upper half of a float32: round to nearest even on the lower 16 bits
    # (what torch does), leaving NaN and inf alone.
    single = np.float32(value)
    if not np.isfinite(single):
        return float(single)
    bits = int(single.view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.uint32(bits).view(np.float32))


_ROUNDERS = {
    torch.float64: float,
    torch.float32: lambda v: float(np.float32(v)),
    torch.float16: lambda v: float(np.float16(v)),
    torch.bfloat16: _round_to_bfloat16,
}


def round_to(dtype: torch.dtype, value: float) -> float:
    """``value`` rounded to ``dtype`` and back: a float64 that the dtype holds exactly."""
    with np.errstate(over="ignore"):
        return _ROUNDERS[dtype](value)


def format_float(value: float) -> str:
    """A Python literal that reads back as exactly ``value``."""
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    return repr(float(value))


def format_rows(rows: Rows | MaskRows) -> str:
    def cell(value: float | bool) -> str:
        return str(value) if isinstance(value, bool) else format_float(value)

    return "[" + ", ".join("[" + ", ".join(cell(v) for v in row) + "]" for row in rows) + "]"


def format_mix(coefficients: tuple[tuple[str, float], ...]) -> str:
    """``a_1 * name_1 + a_2 * name_2 ...`` over the non-zero coefficients of a mix."""
    shown = " + ".join(f"{a!r} * {name}" for name, a in coefficients if a != 0)
    return (shown or "0") + (" (every other coefficient 0)" if shown else "")


def format_config(config: ReconstructionLossConfig) -> str:
    """The config as a constructor call naming only its non-default fields."""
    default = ReconstructionLossConfig()
    changed = [
        f"{f.name}={getattr(config, f.name)!r}"
        for f in fields(config)
        if getattr(config, f.name) != getattr(default, f.name)
    ]
    return f"ReconstructionLossConfig({', '.join(changed)})"


#: the inputs of a call, in its order: what a case's ``layouts`` are given for
INPUT_NAMES = ("token_nll", "zfree_token_nll", "mask")
ALL_CONTIGUOUS = (CONTIGUOUS,) * len(INPUT_NAMES)


def views_of(layouts: tuple[str, ...]) -> dict[str, str]:
    """The inputs whose layout (``layouts``, by ``INPUT_NAMES``) is a view, with it."""
    return {
        name: layout
        for name, layout in zip(INPUT_NAMES, layouts, strict=True)
        if layout != CONTIGUOUS
    }


def alike_along_a_dimension(rows: Rows | MaskRows) -> bool:
    """Whether ``rows`` hold one row repeated, or one value per row, NaN alike (what an
    ``expanded`` layout holds: ``properties.layouts.lay_out``)."""
    if not rows or not rows[0]:
        return False
    keys = tuple(tuple("nan" if v != v else v for v in row) for row in rows)
    return all(row == keys[0] for row in keys) or all(len(set(row)) == 1 for row in keys)


@dataclass(frozen=True)
class LossCase:
    """Inputs of one call: ``token_nll`` (l), ``zfree_token_nll`` (b), ``mask``, ``config``.

    ``mask_dtype`` is ``torch.bool`` or an integer dtype (an integer 0/1 mask, accepted by
    MATH.md and treated as bool). ``device`` is where the tensors are made. ``layouts``
    gives each input's memory layout (``properties.layouts``, by ``INPUT_NAMES``): the
    values are the same whatever it is; an ``expanded`` layout that the values do not allow
    (after rows were changed) is made contiguous.
    """

    token_nll: Rows
    zfree_token_nll: Rows
    mask: MaskRows
    config: ReconstructionLossConfig = field(default_factory=ReconstructionLossConfig)
    dtype: torch.dtype = torch.float64
    mask_dtype: torch.dtype = torch.bool
    device: str = "cpu"
    layouts: tuple[str, ...] = ALL_CONTIGUOUS

    def __post_init__(self) -> None:
        if self.layouts == ALL_CONTIGUOUS:
            return
        rows = (self.token_nll, self.zfree_token_nll, self.mask)
        allowed = tuple(
            CONTIGUOUS if layout == "expanded" and not alike_along_a_dimension(values) else layout
            for layout, values in zip(self.layouts, rows, strict=True)
        )
        if allowed != self.layouts:
            object.__setattr__(self, "layouts", allowed)

    @property
    def views(self) -> dict[str, str]:
        """The inputs that are not contiguous, by name, with their layouts."""
        return views_of(self.layouts)

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.mask), len(self.mask[0]) if self.mask else 0

    @property
    def has_valid_token(self) -> bool:
        """Whether some position is valid (else the spec rejects the batch)."""
        return any(any(row) for row in self.mask)

    def tensors(self, *, requires_grad: bool = False) -> tuple[torch.Tensor, ...]:
        """Fresh ``(token_nll, zfree_token_nll, mask)`` tensors for one call."""
        batch, length = self.shape
        token_nll = torch.tensor(self.token_nll, dtype=self.dtype, device=self.device)
        zfree = torch.tensor(self.zfree_token_nll, dtype=self.dtype, device=self.device)
        mask = torch.tensor(self.mask, dtype=torch.bool, device=self.device).to(self.mask_dtype)
        token_nll = token_nll.reshape(batch, length)
        zfree = zfree.reshape(batch, length)
        mask = mask.reshape(batch, length)
        if self.layouts != ALL_CONTIGUOUS:
            # each a leaf with the view's strides: a gradient may be asked of it
            token_nll, zfree, mask = (
                lay_out(tensor, layout).detach()
                for tensor, layout in zip((token_nll, zfree, mask), self.layouts, strict=True)
            )
        if requires_grad:
            token_nll.requires_grad_()
        return token_nll, zfree, mask

    def with_config(self, **changes: float) -> LossCase:
        return replace(self, config=replace(self.config, **changes))

    def with_rows(self, token_nll: Rows, zfree_token_nll: Rows, mask: MaskRows) -> LossCase:
        return replace(self, token_nll=token_nll, zfree_token_nll=zfree_token_nll, mask=mask)

    def without_row(self, i: int) -> LossCase:
        """The batch without example ``i`` (from every tensor)."""
        l, b, m = (
            rows[:i] + rows[i + 1 :] for rows in (self.token_nll, self.zfree_token_nll, self.mask)
        )
        return self.with_rows(l, b, m)

    def without_column(self, t: int) -> LossCase:
        """The batch without position ``t`` (of every row, in every tensor)."""
        l, b, m = (
            tuple(row[:t] + row[t + 1 :] for row in rows)
            for rows in (self.token_nll, self.zfree_token_nll, self.mask)
        )
        return self.with_rows(l, b, m)

    def __repr__(self) -> str:
        parts = [
            f"token_nll={format_rows(self.token_nll)}",
            f"zfree_token_nll={format_rows(self.zfree_token_nll)}",
            f"mask={format_rows(self.mask)}",
            f"config={format_config(self.config)}",
            f"dtype={DTYPE_NAMES.get(self.dtype, self.dtype)}",
        ]
        if self.mask_dtype != torch.bool:
            parts.append(f"mask_dtype={self.mask_dtype}")
        if self.device != "cpu":
            parts.append(f"device={self.device!r}")
        if self.layouts != ALL_CONTIGUOUS:
            parts.append(f"layouts={self.layouts!r}")
        return f"LossCase({', '.join(parts)})"

    def on_device(self, device: str) -> LossCase:
        return self if self.device == device else replace(self, device=device)


def map_cases(value: Any, change: Callable[[LossCase], LossCase]) -> Any:
    """``value`` (an input record, or a tuple of them) with ``change`` applied to every
    ``LossCase`` in it; the value itself where nothing changes."""
    if isinstance(value, LossCase):
        return change(value)
    if isinstance(value, tuple):
        changed = tuple(map_cases(v, change) for v in value)
        return value if all(a is b for a, b in zip(changed, value, strict=True)) else changed
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: moved
            for f in dataclasses.fields(value)
            if f.init
            and (moved := map_cases(getattr(value, f.name), change)) is not getattr(value, f.name)
        }
        return replace(value, **changes) if changes else value
    return value


def cases_in(value: Any) -> list[LossCase]:
    """Every ``LossCase`` in ``value`` (an input record, or a tuple of them), in order."""
    found: list[LossCase] = []

    def collect(case: LossCase) -> LossCase:
        found.append(case)
        return case

    map_cases(value, collect)
    return found


def on_device(value: Any, device: str) -> Any:
    """``value`` with every case in it made on ``device``: a named edge case, written for
    the CPU, runs where the run's inputs do. A ``ScaleCase`` (``properties.scale``) moves
    itself, alone or as a record's ``case``."""
    if not isinstance(value, LossCase) and hasattr(value, "on_device"):
        return value.on_device(device)
    inner = getattr(value, "case", None)
    if dataclasses.is_dataclass(value) and not isinstance(inner, (LossCase, type(None))):
        return replace(value, case=on_device(inner, device))
    return map_cases(value, lambda case: case.on_device(device))
