"""Wrong: half-precision logits give half-precision losses (cross-entropy in the logits'
dtype, as F.cross_entropy outside autocast): errors of hundredths of a nat in bfloat16."""

import torch

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    check_logits_arguments,
    compute_total_loss,
    reconstruction_loss_config_from_args,
)


def token_nll_from_logits(logits, labels, ignore_index=-100, shift=False):
    check_logits_arguments(logits, labels, ignore_index, shift)
    labels = labels.to(torch.int64)
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    mask = labels != ignore_index
    if bool((mask & ((labels < 0) | (labels >= logits.shape[-1]))).any()):
        raise ValueError(f"labels must lie in [0, {logits.shape[-1]}) or be ignore_index")
    log_p = torch.log_softmax(logits, -1)  # the mistake: in the logits' own dtype
    nll = -log_p.gather(-1, torch.where(mask, labels, 0)[..., None])[..., 0]
    return torch.where(mask, nll, 0.0), mask


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "compute_total_loss",
    "reconstruction_loss_config_from_args",
]
