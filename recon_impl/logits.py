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
  logits go through ``_HalfCrossEntropy`` instead: the log-sum-exp is taken in float32 over
  blocks of rows, only the ``[B*T]`` row log-sum-exps are kept for backward, and the
  gradient (in the logits' dtype, as cross-entropy's) is written block by block.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["token_nll_from_logits"]

# Elements of a float32 block of rows: 4 MiB, a bounded working set whatever V is.
_BLOCK_ELEMENTS = 1 << 20
_HALF_DTYPES = (torch.float16, torch.bfloat16)


def token_nll_from_logits(
    logits: Tensor, labels: Tensor, ignore_index: int = -100, shift: bool = False
) -> tuple[Tensor, Tensor]:
    r"""Per-token cross-entropy :math:`l_{it} = -\log \mathrm{softmax}(z_{it})_{y_{it}}`.

    Args:
        logits: ``[B, T, V]`` floating logits.
        labels: ``[B, T]`` integer class indices in ``[0, V)``, or ``ignore_index``.
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


class _HalfCrossEntropy(torch.autograd.Function):
    r"""Cross-entropy of ``[N, V]`` half-precision logits with float32 losses.

    Forward, per block of rows: :math:`\ell_n = \mathrm{lse}(z_n) - z_{n, y_n}` with the
    log-sum-exp in float32. Backward: :math:`\partial \ell_n / \partial z_{nv} =
    \exp(z_{nv} - \mathrm{lse}(z_n)) - [v = y_n]`, times the incoming gradient, 0 for
    ignored rows. Saved for backward: the logits themselves (no copy) and ``lse``.
    """

    @staticmethod
    def forward(ctx, logits: Tensor, targets: Tensor, ignore_index: int) -> Tensor:
        valid = targets != ignore_index
        safe_targets = torch.where(valid, targets, 0)
        rows, vocab = logits.shape
        log_sum_exp = torch.empty(rows, dtype=torch.float32, device=logits.device)
        block = max(1, _BLOCK_ELEMENTS // max(vocab, 1))
        for start in range(0, rows, block):
            stop = min(start + block, rows)
            log_sum_exp[start:stop] = torch.logsumexp(logits[start:stop].float(), dim=1)
        picked = logits.gather(1, safe_targets[:, None])[:, 0].float()  # exact in float32
        ctx.save_for_backward(logits, safe_targets, valid, log_sum_exp)
        return torch.where(valid, log_sum_exp - picked, 0.0)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll: Tensor) -> tuple[Tensor, None, None]:
        logits, safe_targets, valid, log_sum_exp = ctx.saved_tensors
        scale = torch.where(valid, grad_nll.float(), 0.0)
        grad = torch.empty_like(logits)
        rows, vocab = logits.shape
        block = max(1, _BLOCK_ELEMENTS // max(vocab, 1))
        for start in range(0, rows, block):
            stop = min(start + block, rows)
            # In place on one float32 block: softmax, minus the one-hot target, scaled.
            part = logits[start:stop].float().sub_(log_sum_exp[start:stop, None]).exp_()
            part.scatter_add_(
                1,
                safe_targets[start:stop, None],
                torch.full((stop - start, 1), -1.0, device=part.device),
            )
            grad[start:stop] = part.mul_(scale[start:stop, None])
        return grad, None, None
