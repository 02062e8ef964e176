"""Correct implementations that look nothing like ``recon_impl``: the suite must accept them.

* ``python_loop_losses`` walks examples and tokens in Python, with float64 ``math`` for
  everything built from b and torch only where a gradient must reach l.
* ``naive_float64_losses`` is the formula as written, b**alpha / sum b**alpha in float64,
  with no log-space care: right on the safe range it is meant for (alpha <= 10, where
  every b**alpha with b in {0} or [1e-30, 1e4] lies in [1e-300, 1e40], inside float64),
  and checked on that range with
  ``recon-spec check properties.zoo.correct:naive_float64_losses --max-alpha 10``.
* ``textbook_losses`` (in ``properties.zoo.textbook``) with no mistake switched on.
* ``fused_losses`` (in ``properties.zoo.fused``) with no slip: one autograd node whose
  backward writes the gradient of any mix of the outputs from token weights.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from properties.zoo.fused import fused_losses
from properties.zoo.textbook import textbook_losses
from spec.terms import BTOK, CC, DIST, EX, KAPPA, RAW, TERMS, TOK, TOTAL

#: the range on which ``naive_float64_losses`` is correct
NAIVE_MAX_ALPHA = 10.0

__all__ = [
    "NAIVE_MAX_ALPHA",
    "fused_losses",
    "naive_float64_losses",
    "python_loop_losses",
    "textbook_losses",
]


def _result_dtype(*tensors: Tensor) -> torch.dtype:
    dtype = torch.promote_types(tensors[0].dtype, tensors[1].dtype)
    return dtype if torch.finfo(dtype).bits >= 32 else torch.float32


def weighted_total(terms: dict, config):
    """J = w_raw R_raw + w_dist R_dist + w_ex R_ex + w_tok R_tok + w_cc R_cc."""
    return sum(getattr(config, term.weight_field) * terms[term.name] for term in TERMS)


def python_loop_losses(token_nll: Tensor, zfree_token_nll: Tensor, mask: Tensor, config):
    dtype = _result_dtype(token_nll, zfree_token_nll)
    alpha = config.token_weight_alpha
    eps = config.example_inverse_surprisal_epsilon
    c = config.zfree_reference_scale
    l = token_nll.to(dtype)
    b_values = zfree_token_nll.detach().double().tolist()
    mask_values = mask.bool().tolist()
    raw, ex, tok, cc, btok_sum, kappa_sum = [], [], [], [], 0.0, 0.0
    for i, row in enumerate(mask_values):
        positions = [t for t, valid in enumerate(row) if valid]
        if not positions:
            continue
        b = [b_values[i][t] for t in positions]
        n = len(positions)
        bbar = math.fsum(b) / n
        top = max(b)
        # 0^0 = 1, and a row of zeros is the limit of equal losses: uniform either way
        uniform = alpha == 0 or top == 0
        weights = [1.0] * n if uniform else [(v / top) ** alpha for v in b]
        total_weight = math.fsum(weights)
        shares = [w / total_weight for w in weights]
        btok = math.fsum(p * v for p, v in zip(shares, b, strict=True))
        kappa = btok / bbar if bbar > 0 else 1.0
        lbar = sum(l[i, t] for t in positions) / n
        ltok = sum(p * l[i, t] for p, t in zip(shares, positions, strict=True))
        raw.append(lbar)
        ex.append(lbar / (bbar + eps))
        tok.append(ltok)
        cc.append(ltok / kappa)
        btok_sum += btok
        kappa_sum += kappa
    kept = len(raw)
    r_raw = sum(raw) / kept
    values = {
        RAW.name: r_raw,
        DIST.name: r_raw / c,
        EX.name: sum(ex) / kept,
        TOK.name: sum(tok) / kept,
        CC.name: (sum(cc) / kept / c),
    }
    values[TOTAL.name] = weighted_total(values, config)
    values[BTOK.name] = torch.tensor(btok_sum / kept, dtype=dtype)
    values[KAPPA.name] = torch.tensor(kappa_sum / kept, dtype=dtype)
    return values


def naive_float64_losses(token_nll: Tensor, zfree_token_nll: Tensor, mask: Tensor, config):
    dtype = _result_dtype(token_nll, zfree_token_nll)
    m = mask.bool()
    l = torch.where(m, token_nll.double(), 0.0)
    b = torch.where(m, zfree_token_nll.detach().double(), 0.0)
    alpha = config.token_weight_alpha
    c = config.zfree_reference_scale
    n = m.sum(1).double()
    kept = n > 0
    lbar = l.sum(1)[kept] / n[kept]
    bbar = b.sum(1)[kept] / n[kept]
    powered = torch.where(m, b**alpha, 0.0)  # 0**0 = 1 in torch
    norm = powered.sum(1, keepdim=True)
    all_zero = (norm == 0) & kept[:, None]
    pi = torch.where(all_zero, m / n.clamp(min=1)[:, None], powered / norm.clamp(min=1e-300))
    ltok = (pi * l).sum(1)[kept]
    btok = (pi * b).sum(1)[kept]
    kappa = torch.where(bbar > 0, btok / bbar, 1.0)
    terms = {
        RAW.name: lbar.mean(),
        DIST.name: lbar.mean() / c,
        EX.name: (lbar / (bbar + config.example_inverse_surprisal_epsilon)).mean(),
        TOK.name: ltok.mean(),
        CC.name: ((ltok / kappa).mean() / c),
        BTOK.name: btok.mean(),
        KAPPA.name: kappa.mean(),
    }
    terms[TOTAL.name] = weighted_total(terms, config)
    return {name: value.to(dtype) for name, value in terms.items()}
