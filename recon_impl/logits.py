r"""Per-token NLL straight from logits, for the model and for the z-free reference.

Two things a language-model training loop otherwise writes by hand:

* **The causal-LM shift.** With ``shift=True`` position ``t`` predicts ``labels[t + 1]``
  (Hugging Face's convention: ``labels`` are the input ids, with ``ignore_index`` at
  padding), and the result is that of ``logits[:, :-1]`` against ``labels[:, 1:]``. The
  logits are not sliced: the labels are shifted instead and the last position is ignored,
  since a slice of ``[B, T, V]`` logits along ``T`` cannot be viewed as ``[B*(T-1), V]``
  and would be copied.
* **Precision.** The losses are float32 for bfloat16 and float16 logits (float64 for
  float64). ``F.cross_entropy`` on half-precision logits returns half-precision losses
  outside autocast (its log-softmax is rounded to 8 bits of mantissa for bfloat16: errors
  of several hundredths of a nat), and under autocast it first casts the whole ``[B, T, V]``
  tensor to float32 and keeps a float32 log-softmax of it for backward. Half-precision
  logits go through ``_HalfCrossEntropy`` instead: the log-softmax is taken in float32 over
  blocks of rows, nothing but the logits themselves is kept for backward, and the gradient
  (in the logits' dtype, as cross-entropy's) is written block by block from a float32
  softmax recomputed per block. The price is more, smaller calls than one cross-entropy:
  as fast on one CPU thread, slower where each call's threads must wait for busy cores.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["token_nll_from_logits"]

# Elements of a float32 block of rows, a bounded working set whatever V is: on the CPU
# 4 MiB, about what its caches hold; elsewhere 256 MiB, so that a large batch takes tens
# of blocks (each a handful of kernel launches), not thousands.
_CPU_BLOCK_ELEMENTS = 1 << 20
_ACCELERATOR_BLOCK_ELEMENTS = 1 << 26
_HALF_DTYPES = (torch.float16, torch.bfloat16)


def token_nll_from_logits(
    logits: Tensor, labels: Tensor, ignore_index: int = -100, shift: bool = False
) -> tuple[Tensor, Tensor]:
    r"""Per-token cross-entropy :math:`l_{it} = -\log \mathrm{softmax}(z_{it})_{y_{it}}`.

    Args:
        logits: ``[B, T, V]`` floating logits.
        labels: ``[B, T]`` integer class indices in ``[0, V)``, or ``ignore_index``, of any
            integer dtype (compared as integers: uint8 labels never wrap to -100).
            With ``shift=True`` only ``labels[:, 1:]`` are targets (``labels[:, 0]`` is
            never read, and may hold anything).
        ignore_index: the label value of padded positions.
        shift: the causal-LM convention: the target of position ``t`` is
            ``labels[:, t + 1]``, and the last position has none.

    Returns:
        ``(token_nll, mask)``: ``[B, T]`` losses (``[B, T-1]`` with ``shift=True``), 0 at
        ignored positions, and the bool mask of the positions whose target is not
        ignored. The losses are float32 for float16 and bfloat16 logits and keep the
        dtype of float32 and float64 logits, under autocast or not. Nothing of ``[B, T, V]``
        size is materialised beyond what cross-entropy itself needs (for half-precision
        logits, less: see the module docstring). Inputs are never modified.

    Raises:
        ValueError: a shape, dtype or device does not fit, a label lies outside
            ``[0, V)`` without being ``ignore_index``, or ``ignore_index``/``shift`` have
            the wrong type.

    Example:
        >>> logits = torch.zeros(1, 3, 4, dtype=torch.bfloat16)
        >>> labels = torch.tensor([[7, 3, -100]])  # input ids, padded
        >>> token_nll, mask = token_nll_from_logits(logits, labels, shift=True)
        >>> token_nll.dtype, round(float(token_nll[0, 0]), 4), mask.tolist()  # log 4
        (torch.float32, 1.3863, [[True, False]])
    """
    _check_arguments(logits, labels, ignore_index, shift)
    # As int64, whatever the labels' integer dtype: a uint8 label compared with -100 in uint8
    # would be compared with 156, and a vocabulary of 256 would wrap to 0.
    labels = labels.long()
    batch, length, vocab = logits.shape
    if shift and length > 0:
        # Shift the labels, not the logits: a slice of the logits along T would be copied.
        targets = torch.cat([labels[:, 1:], labels.new_full((batch, 1), ignore_index)], dim=1)
    else:
        targets = labels
    mask = targets != ignore_index
    out_of_range = mask & ((targets < 0) | (targets >= vocab))
    if bool(out_of_range.any()):
        first = targets[out_of_range][0].item()
        raise ValueError(
            f"labels must lie in [0, {vocab}) or equal ignore_index={ignore_index}, found {first}"
        )
    flat_logits = logits.reshape(batch * length, vocab)  # a view: logits are [B, T, V]
    flat_targets = targets.reshape(batch * length).long()
    if logits.dtype in _HALF_DTYPES:
        flat_nll = _HalfCrossEntropy.apply(flat_logits, flat_targets, ignore_index)
    else:
        flat_nll = F.cross_entropy(
            flat_logits, flat_targets, ignore_index=ignore_index, reduction="none"
        )
    token_nll = flat_nll.view(batch, length)
    if shift and length > 0:
        return token_nll[:, :-1].contiguous(), mask[:, :-1].contiguous()
    return token_nll, mask


def _check_arguments(logits: Tensor, labels: Tensor, ignore_index: int, shift: bool) -> None:
    if not isinstance(logits, Tensor) or logits.dim() != 3:
        shape = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a 3-D [B, T, V] tensor, got {shape}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must have a floating dtype, got {logits.dtype}")
    if not isinstance(labels, Tensor) or labels.shape != logits.shape[:2]:
        shape = tuple(labels.shape) if isinstance(labels, Tensor) else type(labels).__name__
        raise ValueError(f"labels must be a [B, T] = {tuple(logits.shape[:2])} tensor, got {shape}")
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise ValueError(f"labels must have an integer dtype, got {labels.dtype}")
    if labels.device != logits.device:
        raise ValueError(
            f"labels must be on the logits' device {logits.device}, got {labels.device}"
        )
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise ValueError(f"ignore_index must be an int, got {type(ignore_index).__name__}")
    if not isinstance(shift, bool):
        raise ValueError(f"shift must be a bool, got {type(shift).__name__} {shift!r}")


def _block_rows(logits: Tensor) -> int:
    elements = _CPU_BLOCK_ELEMENTS if logits.device.type == "cpu" else _ACCELERATOR_BLOCK_ELEMENTS
    return max(1, elements // max(logits.shape[1], 1))


class _HalfCrossEntropy(torch.autograd.Function):
    r"""Cross-entropy of ``[N, V]`` half-precision logits with float32 losses.

    Forward, per block of rows: :math:`\ell_n = -\log \mathrm{softmax}(z_n)_{y_n}`, the
    log-softmax computed in float32. Backward, per block: :math:`\partial \ell_n /
    \partial z_{nv} = \mathrm{softmax}(z_n)_v - [v = y_n]`, the softmax recomputed in
    float32, times the incoming gradient (0 for ignored rows), written in the logits' dtype.
    Saved for backward: the logits themselves (no copy) and the targets.
    """

    @staticmethod
    def forward(ctx, logits: Tensor, targets: Tensor, ignore_index: int) -> Tensor:
        valid = targets != ignore_index
        safe_targets = torch.where(valid, targets, 0)[:, None]
        nll = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
        block = _block_rows(logits)
        for start in range(0, logits.shape[0], block):
            rows = slice(start, start + block)
            log_p = torch.log_softmax(logits[rows], dim=1, dtype=torch.float32)
            nll[rows] = log_p.gather(1, safe_targets[rows])[:, 0].neg_()
        ctx.save_for_backward(logits, safe_targets, valid)
        return torch.where(valid, nll, 0.0)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll: Tensor) -> tuple[Tensor, None, None]:
        logits, safe_targets, valid = ctx.saved_tensors
        scale = torch.where(valid, grad_nll.float(), 0.0)[:, None]
        minus_one = torch.full_like(scale, -1.0)
        grad = torch.empty_like(logits)
        block = _block_rows(logits)
        for start in range(0, logits.shape[0], block):
            rows = slice(start, start + block)
            # Few passes over a float32 block: softmax, minus the one-hot target, scaled
            # and rounded to the logits' dtype in one multiplication.
            part = torch.softmax(logits[rows], dim=1, dtype=torch.float32)
            part.scatter_add_(1, safe_targets[rows], minus_one[rows])
            torch.mul(part, scale[rows], out=grad[rows])
        return grad, None, None
