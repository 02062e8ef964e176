"""Wrong: the labels are compared with ignore_index in their own dtype: for uint8 labels
-100 is 156, so a real class 156 (a byte-level vocabulary) is taken for padding."""

import torch

from properties.zoo.api.correct import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    check_logits_arguments,
    compute_total_loss,
    log_softmax_nll,
    reconstruction_loss_config_from_args,
)


def token_nll_from_logits(logits, labels, ignore_index=-100, shift=False):
    check_logits_arguments(logits, labels, ignore_index, shift)
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    padded = labels == torch.tensor(ignore_index).to(labels.dtype)  # the mistake: wraps
    labels = torch.where(padded, -1, labels.to(torch.int64))
    return log_softmax_nll(logits, labels, -1)


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "compute_total_loss",
    "reconstruction_loss_config_from_args",
]
