r"""Splitting a batch into shards: gradient accumulation and data parallelism, exactly.

Every term and diagnostic of the stack is a mean over the batch's *kept* examples (those
with at least one valid token). For shards ``k`` with ``B'_k`` kept examples and values
``x_k`` the union's value is (MATH.md, "Batch decomposition")

.. math::

    x = \sum_k w_k \, x_k, \qquad w_k = \frac{B'_k}{\sum_j B'_j},

so backpropagating ``w_k * J_k`` on every shard, and summing the gradients (by
accumulation, or by an all-reduce), gives the gradient of ``J`` on the union. Weighting by
kept examples matters: the plain mean over shards (``w_k = 1/K``) or a weighting by rows or
tokens is exact only when every shard keeps the same number of examples.

A shard with no kept example (every row padded) contributes nothing: its weight is 0, and
``weighted_shard_losses`` returns zeros for it instead of the ``ValueError`` that
``reconstruction_losses`` raises for a batch without a valid token. Its
``total_reconstruction_loss`` is still connected to ``token_nll``, so that a data-parallel
rank holding only padding can run its backward pass (DDP waits for every rank's gradients).

Example (gradient accumulation over two micro-batches):
    >>> import torch
    >>> from recon_impl import ReconstructionLossConfig
    >>> config = ReconstructionLossConfig()
    >>> l1 = torch.tensor([[1.0, 2.0], [5.0, 0.0]]); m1 = torch.tensor([[1, 1], [1, 0]])
    >>> l2 = torch.tensor([[4.0]]); m2 = torch.tensor([[1]])
    >>> weights = shard_weights([kept_example_count(m1), kept_example_count(m2)])
    >>> weights
    [0.6666666666666666, 0.3333333333333333]
    >>> parts = [
    ...     weighted_shard_losses(l, l, m, config, weight=w)
    ...     for l, m, w in zip((l1, l2), (m1, m2), weights)
    ... ]
    >>> round(sum(float(p["reconstruction_loss"]) for p in parts), 6)  # mean(1.5, 5, 4)
    3.5
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from recon_impl.config import ReconstructionLossConfig, _short, finite_float
from recon_impl.distributed import collective_device, process_group_in_use
from recon_impl.reconstruction import (
    RECONSTRUCTION_LOSS_NAMES,
    compute_dtype,
    reconstruction_losses,
)
from recon_impl.validation import as_bool_mask, check_tensor_metadata

__all__ = ["kept_example_count", "shard_weights", "weighted_shard_losses"]


def kept_example_count(mask: Tensor) -> int:
    """B': the number of rows of a ``[B, T]`` mask (bool or integer 0/1) with a True entry."""
    if not isinstance(mask, Tensor) or mask.dim() != 2:
        shape = tuple(mask.shape) if isinstance(mask, Tensor) else type(mask).__name__
        raise ValueError(f"mask must be a 2-D [B, T] tensor, got {shape}")
    return int(as_bool_mask(mask).any(dim=1).sum())


def _integer_count(name: str, count: Any) -> int:
    """``count`` as an int: any integer scalar (Python's, numpy's, a 0-dim integer tensor);
    not a bool, a float or a float tensor, even 2.0: ``int()`` would truncate 2.7 to 2."""
    if isinstance(count, Tensor):
        integer = not (count.is_floating_point() or count.is_complex() or count.dtype == torch.bool)
        if count.dim() == 0 and integer:
            return int(count)
        kind = f"a {count.dtype} tensor of shape {tuple(count.shape)}"
    elif isinstance(count, Integral) and not isinstance(count, bool):
        return int(count)
    else:
        kind = f"{type(count).__name__} {count!r}"
    raise ValueError(f"{name} must be an integer (a count of examples), got {kind}")


def kept_count_list(kept_counts: Any) -> list[Any]:
    """``kept_counts`` as a list (its entries unchecked), or ``ValueError`` where it is not an
    iterable of counts: a single count (``3``, a 0-dim tensor) or None."""
    try:
        counts = iter(kept_counts)
    except TypeError:
        raise ValueError(
            "kept_counts must be a sequence of kept-example counts, one integer per shard "
            "(micro-batch), e.g. [kept_example_count(mask) for mask in masks], got "
            f"{type(kept_counts).__name__} {_short(kept_counts)}"
        ) from None
    return list(counts)  # outside the try: a TypeError of the iteration itself is not hidden


def shard_weights(kept_counts: Sequence[int], *, group: Any = None) -> list[float]:
    """The weight ``B'_k / sum_j B'_j`` of each shard, from its kept-example count.

    Args:
        kept_counts: ``B'_k`` of each of this process's shards (its micro-batches), as
            ``kept_example_count`` gives them. A shard with 0 gets weight 0.
        group: a ``torch.distributed`` process group. When one is given, or when
            ``torch.distributed`` is initialized, the denominator is summed over every
            shard of every rank of the group (one all-reduce, which every rank must call):
            then the weights of all ranks' shards together sum to 1.

    Raises:
        ValueError: ``kept_counts`` is not iterable, a count is not a non-negative integer,
            or no shard (of any rank) keeps an example. When distributed, every rank raises
            after the all-reduce.
    """
    counts = []
    for index, given in enumerate(kept_count_list(kept_counts)):
        count = _integer_count(f"kept_counts[{index}]", given)
        if count < 0:
            raise ValueError(f"kept_counts[{index}] must be >= 0, got {count}")
        counts.append(count)
    total = sum(counts)
    distributed = process_group_in_use(group)
    if distributed:
        reduced = torch.tensor([total], dtype=torch.int64, device=collective_device(group))
        dist.all_reduce(reduced, op=dist.ReduceOp.SUM, group=group)
        total = int(reduced.item())
    if total == 0:
        raise ValueError(
            "kept_counts must hold at least one kept example over all shards"
            + (" of all ranks" if distributed else "")
            + "; every shard is empty"
        )
    return [count / total for count in counts]


def weighted_shard_losses(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    mask: Tensor,
    config: ReconstructionLossConfig,
    *,
    weight: float,
    validate: bool = True,
) -> dict[str, Tensor]:
    """The scalars of one shard, each multiplied by the shard's ``weight``.

    Summed over the shards (with the weights of ``shard_weights``), every entry is the
    union's value; backpropagating every shard's ``total_reconstruction_loss`` gives the
    union's gradient. A shard with no kept example gives zeros: every entry is 0, and its
    ``total_reconstruction_loss`` is a zero that depends on ``token_nll`` (its gradient
    is 0 at every position, padded NaN and inf included).

    Args:
        token_nll, zfree_token_nll, mask, config, validate: as ``reconstruction_losses``.
        weight: the shard's weight, finite and >= 0 (``shard_weights``).
    """
    weight = finite_float("weight", weight)
    if weight < 0:
        raise ValueError(f"weight must be >= 0, got {weight!r}")
    if validate:
        valid = check_tensor_metadata(token_nll, zfree_token_nll, mask)
    else:
        valid = mask if mask.dtype == torch.bool else mask != 0
    if bool(valid.any()):
        losses = reconstruction_losses(token_nll, zfree_token_nll, mask, config, validate=validate)
        return {name: weight * value for name, value in losses.items()}

    dtype = compute_dtype(token_nll, zfree_token_nll)
    # A zero in the graph of token_nll (torch.where: padded NaN/inf give gradient 0, not NaN).
    connected_zero = torch.where(valid, token_nll, 0.0).to(dtype).sum() * 0.0
    values = {
        name: torch.zeros((), dtype=dtype, device=token_nll.device)
        for name in RECONSTRUCTION_LOSS_NAMES
    }
    values["total_reconstruction_loss"] = connected_zero
    return values
