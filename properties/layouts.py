"""How an input tensor lies in memory: MATH.md, "Inputs", admits any strided layout.

The same values reach an implementation as a contiguous tensor or as a view, as they do in
training (a transposed buffer, a slice of a wider one, a tensor expanded along a dimension).
A kernel that reads its data pointer as if it were contiguous, or writes where the view's
buffer is shared, is right on contiguous inputs alone; so each input of a case names its
layout (``LossCase.layouts``) and ``lay_out`` builds it. Where a view leaves room in its
buffer (a column between two, an offset), the room holds what a misread turns into a wrong
output: NaN for losses, padding for a mask.

``lay_out`` is called by the suite and by the scripts a report prints, so that both build
the same tensor.
"""

from __future__ import annotations

import torch

CONTIGUOUS = "contiguous"
#: each layout, and how a report says it (``{name} as ...``)
LAYOUTS: dict[str, str] = {
    CONTIGUOUS: "a contiguous tensor",
    "transposed": "a transposed view (a [T, B] buffer seen as [B, T])",
    "strided": "a slice with a column stride of 2 and a storage offset of 1 of a wider buffer",
    "offset": "a contiguous view at a storage offset of 3 into a longer buffer",
    "expanded": "a stride-0 view expanded from one row or one column",
}
#: the layouts that are views
VIEW_LAYOUTS = tuple(layout for layout in LAYOUTS if layout != CONTIGUOUS)


def _alike(values: torch.Tensor, first: torch.Tensor) -> bool:
    """Whether ``values`` equal ``first`` (broadcast), NaN equal to NaN."""
    same = values == first
    if values.is_floating_point():
        same |= values.isnan() & first.isnan()
    return bool(same.all())


def _room(values: torch.Tensor) -> object:
    """What the room of a view's buffer holds: NaN for losses, and padding for a mask (a
    misread valid position is lost from its example, an empty one fails the batch)."""
    if values.is_floating_point():
        return float("nan")
    return False if values.dtype == torch.bool else 0


def lay_out(values: torch.Tensor, layout: str) -> torch.Tensor:
    """``values`` (a contiguous ``[B, T]`` tensor) as ``layout``: the same values, another
    memory layout (``LAYOUTS``)."""
    if layout == CONTIGUOUS:
        return values
    batch, length = values.shape
    if layout == "transposed":
        return values.t().contiguous().t()
    if layout == "strided":
        buffer = values.new_full((batch, 2 * length + 1), _room(values))
        buffer[:, 1::2] = values
        return buffer[:, 1::2]
    if layout == "offset":
        buffer = values.new_full((batch * length + 3,), _room(values))
        buffer[3:] = values.reshape(-1)
        return buffer[3:].view(batch, length)
    if layout == "expanded":
        if batch > 0 and _alike(values, values[:1]):
            return values[:1].clone().expand(batch, length)
        if length > 0 and _alike(values, values[:, :1]):
            return values[:, :1].clone().expand(batch, length)
        raise ValueError("an expanded layout needs values alike along a dimension")
    raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")


def storage_of(tensor: torch.Tensor) -> torch.Tensor:
    """Every byte of the storage ``tensor`` views, the room of its buffer included, as a
    ``uint8`` tensor sharing that storage (``.clone()`` it to keep what it holds now)."""
    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(tensor.untyped_storage())
