"""A team's correct stack that checks its inputs itself and words every error in its own
names (nll, ref_nll, is_pad, temperature, inv_surprisal_eps, base_scale), as a trainer
written before the spec would: ``losses`` declares them (docs/GUIDE.md, "Your own
names") and passes the validation group with no rewriting of messages."""

from __future__ import annotations

import math

import torch

from spec.terms import TERMS

ARGUMENTS = {
    "token_nll": "nll",
    "zfree_token_nll": "ref_nll",
    "mask": "is_pad",
    "alpha": "temperature",
    "epsilon": "inv_surprisal_eps",
    "c": "base_scale",
}


def _check(nll, ref_nll, is_pad, temperature, eps, base_scale) -> None:
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError("temperature must be finite and >= 0")
    if not math.isfinite(eps) or eps < 0:
        raise ValueError("inv_surprisal_eps must be finite and >= 0")
    if not math.isfinite(base_scale) or base_scale <= 0:
        raise ValueError("base_scale must be finite and > 0")
    if nll.dim() != 2 or ref_nll.shape != nll.shape or is_pad.shape != nll.shape:
        raise ValueError("nll, ref_nll and is_pad must be [B, T] tensors of one shape")
    for name, x in (("nll", nll), ("ref_nll", ref_nll)):
        if not x.is_floating_point():  # a rule of one tensor names that tensor alone
            raise ValueError(f"{name} must be a floating tensor, got {x.dtype}")
    if ref_nll.device != nll.device or is_pad.device != nll.device:
        raise ValueError("ref_nll and is_pad must be on the device of nll")
    if not valid_kind(is_pad):
        raise ValueError("is_pad must be bool or an integer tensor of 0 and 1")
    valid = ~is_pad.bool()
    if not valid.any():
        raise ValueError("is_pad leaves no valid token")
    for name, x in (("nll", nll), ("ref_nll", ref_nll)):
        kept = x[valid]
        if not torch.isfinite(kept).all():
            raise ValueError(f"{name} must be finite at valid positions")
    if (ref_nll[valid] < 0).any():
        raise ValueError("ref_nll must be >= 0 at valid positions")
    empty_base = (torch.where(valid, ref_nll, 0).sum(1) == 0) & valid.any(1)
    if eps == 0 and empty_base.any():
        raise ValueError("inv_surprisal_eps must be > 0 where an example's ref_nll are all 0")


def valid_kind(is_pad: torch.Tensor) -> bool:
    if is_pad.dtype == torch.bool:
        return True
    if is_pad.is_floating_point() or is_pad.is_complex():
        return False
    return bool(((is_pad == 0) | (is_pad == 1)).all())


def _stack(nll, ref_nll, is_pad, temperature, eps, base_scale, weights) -> dict:
    _check(nll, ref_nll, is_pad, temperature, eps, base_scale)
    valid = ~is_pad.bool()
    dtype = torch.promote_types(torch.promote_types(nll.dtype, ref_nll.dtype), torch.float32)
    loss = torch.where(valid, nll.to(dtype), 0.0)
    base = torch.where(valid, ref_nll.detach().to(dtype), 0.0)
    n = valid.sum(1).to(dtype)
    kept = n > 0
    lbar, bbar = loss.sum(1) / n.clamp(min=1), base.sum(1) / n.clamp(min=1)
    top = base.amax(1, keepdim=True)
    ratio = torch.where(top > 0, base / top, 1.0)  # softmax(alpha log b), max taken out
    present = valid & (ratio > 0) if temperature > 0 else valid
    weight = torch.where(present, ratio.pow(temperature), 0.0)
    share = weight / weight.sum(1, keepdim=True).clamp(min=1.0)
    ltok, btok = (share * loss).sum(1), (share * base).sum(1)
    kappa = torch.where(bbar > 0, btok / bbar, 1.0)

    def mean(x: torch.Tensor) -> torch.Tensor:
        return torch.where(kept, x, 0.0).sum() / kept.sum()

    out = {
        "reconstruction_loss": mean(lbar),
        "distribution_normalized_reconstruction_loss": mean(lbar) / base_scale,
        "example_inverse_surprisal_weighted_reconstruction_loss": mean(
            lbar / torch.where(kept, bbar + eps, 1.0)
        ),
        "token_weighted_reconstruction_loss": mean(ltok),
        "normalized_concentration_corrected_token_weighted_reconstruction_loss": mean(ltok / kappa)
        / base_scale,
        "token_weighted_base_loss": mean(btok),
        "token_concentration_factor": mean(kappa),
    }
    out["total_reconstruction_loss"] = sum(w * out[name] for name, w in weights.items())
    return out


def losses(token_nll, zfree_token_nll, mask, config):
    # the spec's mask is True at valid positions; this team's is_pad at padded ones
    is_pad = ~mask if mask.dtype == torch.bool else 1 - mask
    weights = {term.name: getattr(config, term.weight_field) for term in TERMS}
    return _stack(
        token_nll,
        zfree_token_nll,
        is_pad,
        config.token_weight_alpha,
        config.example_inverse_surprisal_epsilon,
        config.zfree_reference_scale,
        weights,
    )


losses.argument_names = ARGUMENTS


def undeclared(token_nll, zfree_token_nll, mask, config):
    return losses(token_nll, zfree_token_nll, mask, config)
