"""Per-token NLL straight from logits, for the model and for the z-free reference."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def token_nll_from_logits(
    logits: Tensor, targets: Tensor, ignore_index: int = -100
) -> tuple[Tensor, Tensor]:
    r"""Per-token cross-entropy :math:`l_{it} = -\log \mathrm{softmax}(z_{it})_{y_{it}}`.

    Args:
        logits: ``[B, T, V]`` floating logits.
        targets: ``[B, T]`` integer class indices in ``[0, V)``, or ``ignore_index``.
        ignore_index: the target value of padded positions.

    Returns:
        ``(token_nll, mask)``: ``[B, T]`` losses in the logits' dtype (0 at ignored
        positions) and the bool mask of the positions whose target is not ignored.
        Nothing beyond what cross-entropy itself needs is materialised: the logits are
        viewed as ``[B*T, V]``, never copied, transposed or upcast here.

    Example:
        >>> logits = torch.zeros(1, 2, 4)
        >>> token_nll, mask = token_nll_from_logits(logits, torch.tensor([[3, -100]]))
        >>> round(float(token_nll[0, 0]), 4), mask.tolist()
        (1.3863, [[True, False]])
    """
    if not isinstance(logits, Tensor) or logits.dim() != 3:
        shape = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a 3-D [B, T, V] tensor, got {shape}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must have a floating dtype, got {logits.dtype}")
    if not isinstance(targets, Tensor) or targets.shape != logits.shape[:2]:
        shape = tuple(targets.shape) if isinstance(targets, Tensor) else type(targets).__name__
        raise ValueError(
            f"targets must be a [B, T] = {tuple(logits.shape[:2])} tensor, got {shape}"
        )
    if targets.dtype.is_floating_point or targets.dtype.is_complex or targets.dtype == torch.bool:
        raise ValueError(f"targets must have an integer dtype, got {targets.dtype}")
    if targets.device != logits.device:
        raise ValueError(
            f"targets must be on the logits' device {logits.device}, got {targets.device}"
        )
    batch, length, vocab = logits.shape
    mask = targets != ignore_index
    out_of_range = mask & ((targets < 0) | (targets >= vocab))
    if bool(out_of_range.any()):
        first = targets[out_of_range][0].item()
        raise ValueError(
            f"targets must lie in [0, {vocab}) or equal ignore_index={ignore_index}, found {first}"
        )
    token_nll = F.cross_entropy(
        logits.reshape(batch * length, vocab),
        targets.reshape(batch * length).long(),
        ignore_index=ignore_index,
        reduction="none",
    ).view(batch, length)
    return token_nll, mask
