"""Wrong: a label outside [0, V) is clamped into it instead of raising, so a tokenizer whose
ids exceed the model's vocabulary trains silently on the wrong class."""

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
    labels = labels.to(torch.int64)
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    valid = labels != ignore_index
    clamped = torch.where(valid, labels.clamp(0, logits.shape[-1] - 1), labels)  # the mistake
    return log_softmax_nll(logits, clamped, ignore_index)


__all__ = [
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "add_reconstruction_loss_arguments",
    "compute_total_loss",
    "reconstruction_loss_config_from_args",
]
