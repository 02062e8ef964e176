r"""The dataset-level z-free reference scale c, measured from data.

``zfree_reference_scale`` (c) is measured, not chosen (its trainer flag,
``--zfree-reference-scale``, passes the measured value): it is the mean per-example z-free
loss over the training data,

.. math::

    c = \frac{1}{|K|} \sum_{i \in K} \bar b_i, \qquad
    \bar b_i = \frac{1}{n_i} \sum_{t \in V_i} b_{it}, \qquad K = \{ i : n_i > 0 \},

the value that makes ``distribution_normalized_reconstruction_loss`` and
``normalized_concentration_corrected_token_weighted_reconstruction_loss`` equal 1 at the
z-free baseline (``token_nll = zfree_token_nll``) over that data (MATH.md, "Identities").
It is ``reconstruction_loss`` of ``b`` over the union of all batches, computed in a stream.

Example:
    >>> import torch
    >>> b = torch.tensor([[1.0, 3.0, float("nan")], [5.0, 0.0, 0.0]])
    >>> mask = torch.tensor([[True, True, False], [True, False, False]])
    >>> estimate_zfree_reference_scale([(b, mask), (b[:1], mask[:1])])  # (2 + 5 + 2) / 3
    3.0
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Iterator, Sized
from typing import Any, TextIO

import torch
import torch.distributed as dist
from torch import Tensor

from recon_impl.config import _short
from recon_impl.distributed import collective_device, process_group_in_use
from recon_impl.validation import as_bool_mask, raise_for_invalid_zfree_values

__all__ = ["estimate_zfree_reference_scale"]

_PROGRESS_INTERVAL_S = 0.1


def estimate_zfree_reference_scale(
    batches: Iterable[tuple[Tensor, Tensor]], *, group: Any = None
) -> float:
    """The example-weighted mean of ``bbar_i`` over every example with a valid token.

    Streams ``batches`` once with O(1) memory: per batch, ``bbar_i`` is computed in float64
    on the batch's device; the sum of ``bbar_i`` (compensated, float64) and the count of
    kept examples (an integer) are all that is carried from one batch to the next.

    Args:
        batches: an iterable of ``(zfree_token_nll, mask)`` pairs, each ``[B, T]`` (B and T
            may differ from batch to batch). ``zfree_token_nll`` is floating, finite and
            >= 0 where ``mask`` is True and ignored elsewhere (NaN and inf included);
            ``mask`` is bool or integer 0/1. Inputs are never modified.
        group: a ``torch.distributed`` process group. When one is given, or when
            ``torch.distributed`` is initialized (then the default group is used), each
            rank streams its own shard, the sums and counts are all-reduced over the group,
            and every rank returns the value of the union of all shards.

    Returns:
        c as a Python float: exactly the ``zfree_reference_scale`` that makes
        ``distribution_normalized_reconstruction_loss`` and
        ``normalized_concentration_corrected_token_weighted_reconstruction_loss`` equal 1
        at the z-free baseline over the same data. It is 0.0 when every valid
        ``zfree_token_nll`` is 0: then no scale does that, and ``ReconstructionLossConfig``
        rejects it.

    Raises:
        ValueError: ``batches`` is not iterable, a batch breaks a rule of MATH.md
            "Errors" for ``zfree_token_nll`` or ``mask`` or holds meta tensors (the
            message names the batch index, the argument and the rule), or
            the data (the union, when distributed) holds no valid token, or its values are
            so large (near float64's largest number, 1.8e308) that a per-example sum or
            the running sum overflows float64: then no finite mean can be accumulated, and
            this says so rather than returning inf. When distributed,
            every rank raises: a rank whose own stream failed raises its own error after
            the reduction, the others a ``ValueError`` saying how many ranks failed, so no
            rank is left waiting in a collective.

    A progress line is written to stderr when stderr is a terminal (on rank 0 of the group
    only, when distributed), with the proportion done when ``batches`` has a length.
    """
    distributed = process_group_in_use(group)
    show_progress = not distributed or dist.get_rank(group) == 0
    progress = _Progress(_length(batches), sys.stderr if show_progress else None)

    total = compensation = 0.0  # Neumaier-compensated float64 sum of bbar_i
    kept_examples = 0
    failure: Exception | None = None
    try:
        for index, item in enumerate(_iterate(batches)):
            batch_sum, batch_kept = _batch_statistics(index, item)
            total, compensation = _neumaier_add(total, compensation, batch_sum)
            _raise_if_overflowed(total, f"batch {index}: the running sum of bbar_i")
            kept_examples += batch_kept
            progress.update(index + 1, kept_examples)
    except Exception as error:
        if not distributed:
            raise
        failure = error  # raised after the reduction, so that no other rank hangs in it
    finally:
        progress.close()

    total += compensation
    if distributed:
        reduced = torch.tensor(
            [total, float(kept_examples), float(failure is not None)],
            dtype=torch.float64,
            device=collective_device(group),
        )
        dist.all_reduce(reduced, op=dist.ReduceOp.SUM, group=group)
        total, union_kept, failed_ranks = reduced.tolist()
        kept_examples = round(union_kept)
        if failure is not None:
            raise failure
        if failed_ranks > 0:
            raise ValueError(
                f"{round(failed_ranks)} other rank(s) of the process group failed while "
                "streaming their batches (see their errors); no scale was estimated"
            )
        _raise_if_overflowed(total, "the sum of bbar_i over the union of all ranks' batches")
    if kept_examples == 0:
        where = "the union of all ranks' batches" if distributed else "batches"
        raise ValueError(
            f"{where} must hold at least one valid token (a mask entry that is True); it holds none"
        )
    return total / kept_examples


def _iterate(batches: Any) -> Iterator[Any]:
    """An iterator over ``batches``, or the ``ValueError`` of an argument that is not iterable."""
    try:
        return iter(batches)
    except TypeError:
        raise ValueError(
            "batches must be an iterable of (zfree_token_nll, mask) pairs, e.g. "
            f"[(zfree_token_nll, mask)], got {type(batches).__name__} {_short(batches)}"
        ) from None


def _batch_statistics(index: int, item: Any) -> tuple[float, int]:
    """Validate batch ``index``; return (sum of its bbar_i, number of kept examples)."""
    where = f"batch {index}: "
    if isinstance(item, Tensor):
        raise ValueError(
            f"{where}expected a (zfree_token_nll, mask) pair, got a single tensor; pass an "
            "iterable of pairs, e.g. [(zfree_token_nll, mask)]"
        )
    try:
        zfree_token_nll, mask = item
    except (TypeError, ValueError):
        raise ValueError(
            f"{where}expected a (zfree_token_nll, mask) pair, got {type(item).__name__}"
        ) from None
    for name, value in (("zfree_token_nll", zfree_token_nll), ("mask", mask)):
        if not isinstance(value, Tensor):
            raise ValueError(f"{where}{name} must be a torch.Tensor, got {type(value).__name__}")
        if value.dim() != 2:
            raise ValueError(
                f"{where}{name} must be 2-D [B, T], got {value.dim()}-D with shape "
                f"{tuple(value.shape)}"
            )
    if mask.shape != zfree_token_nll.shape:
        raise ValueError(
            f"{where}zfree_token_nll and mask must have the same shape, got "
            f"{tuple(zfree_token_nll.shape)} and {tuple(mask.shape)}"
        )
    if not zfree_token_nll.is_floating_point():
        raise ValueError(
            f"{where}zfree_token_nll must have a floating dtype, got {zfree_token_nll.dtype}"
        )
    if zfree_token_nll.device != mask.device:
        raise ValueError(
            f"{where}zfree_token_nll and mask must be on the same device, got "
            f"{zfree_token_nll.device} and {mask.device}"
        )
    if zfree_token_nll.device.type == "meta":
        # checked here: reading a meta tensor's values raises NotImplementedError or RuntimeError
        raise ValueError(
            f"{where}zfree_token_nll and mask must hold values (the scale is computed from them), "
            "got meta tensors, which hold none; pass tensors on the CPU or an accelerator"
        )
    try:
        valid = as_bool_mask(mask)
    except ValueError as error:
        raise ValueError(f"{where}{error}") from None

    # torch.where, not multiplication by the mask: padded NaN/inf must not leak in.
    b = torch.where(valid, zfree_token_nll.detach().to(torch.float64), 0.0)
    count = valid.sum(dim=1)
    b_mean = b.sum(dim=1) / count.clamp(min=1).to(torch.float64)  # empty rows: 0
    broken = ~torch.isfinite(b).all() | (b < 0).any()  # padded positions hold 0 here
    batch_sum, batch_kept, batch_broken = torch.stack(
        [b_mean.sum(), (count > 0).sum().to(torch.float64), broken.to(torch.float64)]
    ).tolist()  # the one host sync per batch
    if batch_broken:
        raise_for_invalid_zfree_values(zfree_token_nll, valid, where=where)
    if not math.isfinite(batch_sum):  # finite values >= 0 whose float64 sums overflow
        overflowed = torch.isinf(b.sum(dim=1))
        what = "the sum of bbar_i over its examples"
        if bool(overflowed.any()):
            what = f"the sum over example {int(overflowed.nonzero()[0, 0])}'s valid positions"
        raise ValueError(
            f"{where}zfree_token_nll is too large for float64: {what} overflows (the largest "
            f"value is {b.max().item():.4g}); no mean can be accumulated from values this large"
        )
    return batch_sum, round(batch_kept)


def _raise_if_overflowed(total: float, what: str) -> None:
    if not math.isfinite(total):
        raise ValueError(
            f"{what} overflows float64: zfree_token_nll holds values too large to average "
            "(near float64's largest number); no scale can be estimated from them"
        )


def _neumaier_add(total: float, compensation: float, value: float) -> tuple[float, float]:
    """Add ``value`` to the compensated sum ``total + compensation``."""
    new_total = total + value
    if abs(total) >= abs(value):
        compensation += (total - new_total) + value
    else:
        compensation += (value - new_total) + total
    return new_total, compensation


def _length(batches: Iterable[Any]) -> int | None:
    if not isinstance(batches, Sized):
        return None
    try:
        return len(batches)
    except TypeError:  # e.g. a DataLoader over an IterableDataset without a length
        return None


class _Progress:
    """A one-line progress display on ``stream``, drawn only when it is a terminal."""

    def __init__(self, length: int | None, stream: TextIO | None) -> None:
        try:
            self.stream = stream if stream is not None and stream.isatty() else None
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            self.stream = None
        self.length = length
        self.last_drawn = 0.0
        self.drawn: tuple[int, int] | None = None
        self.state = (0, 0)

    def update(self, batches: int, examples: int) -> None:
        self.state = (batches, examples)
        now = time.monotonic()
        if self.stream is not None and now - self.last_drawn >= _PROGRESS_INTERVAL_S:
            self.last_drawn = now
            self._draw()

    def close(self) -> None:
        if self.stream is not None and self.state[0] > 0:
            if self.drawn != self.state:
                self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self) -> None:
        batches, examples = self.state
        if self.length:
            done = min(batches / self.length, 1.0)
            counter = f"[{'#' * round(20 * done):<20}] {batches}/{self.length} batches ({done:.0%})"
        else:
            counter = f"{batches} batches"
        self.stream.write(f"\rzfree reference scale: {counter}, {examples} examples")
        self.stream.flush()
        self.drawn = self.state
