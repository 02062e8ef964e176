"""A stack that checks its inputs (MATH.md, "Errors"), with one slip in its messages at a time.

``checked_losses(..., slip=None)`` validates as MATH.md says, each message naming the
argument it is about (docs/API.md, "What an error names"), then computes the textbook
stack: ``recon-spec check properties.zoo.validation:checked_losses --with-validation``
passes. Each name in ``SLIPS`` switches on one mistake such messages are written with: the
right error, raised at the right time, that sends its reader to the wrong argument. None of
them shows without the validation group (``--with-validation``), which names each.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

from properties.zoo.textbook import textbook_losses

#: slip -> (the invariant that names it, the mistake)
SLIPS: dict[str, tuple[str, str]] = {
    "copied-checks": (
        "rejects-bad-values",
        "token_nll's checks were copied from zfree_token_nll's and still name it: a NaN "
        "token_nll is reported as a bad zfree_token_nll",
    ),
    "one-message-for-both": (
        "rejects-bad-values",
        "one finiteness check for both tensors: a NaN in either names token_nll and "
        "zfree_token_nll",
    ),
    "copied-dtype-check": (
        "rejects-bad-tensors",
        "the dtype check of token_nll names zfree_token_nll",
    ),
}


def _validate(
    token_nll: Tensor, zfree_token_nll: Tensor, mask: Tensor, config, slip: str | None
) -> Tensor:
    """Raise the ValueError of the first broken rule; return the mask as bool."""
    tensors = {"token_nll": token_nll, "zfree_token_nll": zfree_token_nll, "mask": mask}
    for name, value in tensors.items():
        if not isinstance(value, Tensor) or value.dim() != 2:
            raise ValueError(f"{name} must be a 2-D [B, T] tensor")
    if not token_nll.shape == zfree_token_nll.shape == mask.shape:
        raise ValueError("token_nll, zfree_token_nll and mask must have the same shape")
    if not token_nll.device == zfree_token_nll.device == mask.device:
        raise ValueError("token_nll, zfree_token_nll and mask must be on one device")
    for name, value in (("token_nll", token_nll), ("zfree_token_nll", zfree_token_nll)):
        said = "zfree_token_nll" if slip == "copied-dtype-check" else name
        if not value.is_floating_point():
            raise ValueError(f"{said} must have a floating dtype, got {value.dtype}")
    if mask.is_floating_point() or mask.is_complex():
        raise ValueError(f"mask must be bool or an integer 0/1 tensor, got {mask.dtype}")
    if mask.dtype != torch.bool and bool(((mask != 0) & (mask != 1)).any()):
        raise ValueError("mask must hold only 0 and 1")
    valid = mask.bool()
    if not bool(valid.any()):
        raise ValueError("mask selects no valid token in the batch")
    if slip == "one-message-for-both":
        finite = torch.isfinite(token_nll) & torch.isfinite(zfree_token_nll)
        if not bool(finite[valid].all()):
            raise ValueError("token_nll and zfree_token_nll must be finite where mask is True")
    for name, value in (("token_nll", token_nll), ("zfree_token_nll", zfree_token_nll)):
        said = "zfree_token_nll" if slip == "copied-checks" else name
        if not bool(torch.isfinite(value[valid]).all()):
            raise ValueError(f"{said} must be finite where mask is True")
    if bool((zfree_token_nll[valid] < 0).any()):
        raise ValueError("zfree_token_nll must be >= 0 where mask is True")
    base = torch.where(valid, zfree_token_nll, 0.0).sum(1)
    if config.example_inverse_surprisal_epsilon == 0 and bool(((base == 0) & valid.any(1)).any()):
        raise ValueError(
            "example_inverse_surprisal_epsilon = 0 needs every kept example's mean "
            "zfree_token_nll above 0"
        )
    return valid


def checked_losses(
    token_nll: Tensor, zfree_token_nll: Tensor, mask: Tensor, config, *, slip: str | None = None
) -> dict[str, Tensor]:
    """The textbook stack after the checks (no slip: correct, the validation group too)."""
    if slip is not None and slip not in SLIPS:
        raise ValueError(f"unknown slip {slip!r}")
    valid = _validate(token_nll, zfree_token_nll, mask, config, slip)
    return textbook_losses(token_nll, zfree_token_nll, valid, config)


# one module attribute per slip, spelt with "_" for "-": properties.zoo.validation:copied_checks
copied_checks = partial(checked_losses, slip="copied-checks")
one_message_for_both = partial(checked_losses, slip="one-message-for-both")
copied_dtype_check = partial(checked_losses, slip="copied-dtype-check")
