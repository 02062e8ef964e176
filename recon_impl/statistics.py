r"""The statistics stage of the stack: ``[B, T]`` inputs to per-example vectors.

It reads ``token_nll`` (l), ``zfree_token_nll`` (b) and the mask once each; the reduction
stage and the gradient (``recon_impl.stack``) work on what it returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import Tensor

if TYPE_CHECKING:  # the plan is the stack's; only its attributes are read here
    from recon_impl.stack import Plan


class Statistics(NamedTuple):
    """Per-example results of the statistics stage: ``[B]`` vectors, and p."""

    kept: Tensor  # bool: n_i > 0
    count: Tensor  # max(n_i, 1)
    l_mean: Tensor  # lbar_i
    b_mean: Tensor  # bbar_i
    l_tok: Tensor  # ltok_i
    b_tok: Tensor  # btok_i
    kappa: Tensor  # kappa_i
    share_sum: Tensor  # q_i = sum_t p_it, or max(n_i, 1) where the shares are uniform
    uniform: Tensor | None  # bool: the shares are uniform (no share mass); None for alpha = 0
    shares: Tensor | None  # p, [B, T], 0 at padded positions; None for alpha = 0
    b_sum: Tensor  # sum_t b_it (for validation: an overflow shows here)
    b_min: Tensor | None  # min_t b_it (validation only)
    # the "per-token" terms' k (the [B, T] coefficient) and sum_t k_it l_it, by term name
    token_coefficients: dict[str, Tensor]
    token_sums: dict[str, Tensor]
    # the divisors d_i built from b (``ExampleDivisor.from_tokens``), by name
    token_divisors: dict[str, Tensor]


def example_statistics(l: Tensor, b: Tensor, valid: Tensor, plan: Plan) -> Statistics:
    r"""The statistics stage: ``[B, T]`` inputs to per-example vectors (MATH.md, "Per example").

    .. math::

        n_i = |V_i|, \quad
        \bar l_i = \tfrac{1}{n_i}\textstyle\sum_{t \in V_i} l_{it}, \quad
        \bar b_i = \tfrac{1}{n_i}\textstyle\sum_{t \in V_i} b_{it}, \quad
        p_{it} = (b_{it}/s_i)^\alpha, \quad q_i = \textstyle\sum_{t \in V_i} p_{it}

        \ell^\mathrm{tok}_i = \tfrac{1}{q_i}\textstyle\sum_t p_{it} l_{it}, \quad
        b^\mathrm{tok}_i = \tfrac{1}{q_i}\textstyle\sum_t p_{it} b_{it}, \quad
        \kappa_i = b^\mathrm{tok}_i / \bar b_i \ (1 \text{ where } \bar b_i = 0)

    The shares :math:`\pi_{it} = p_{it}/q_i` are MATH.md's ``softmax(alpha * log b)``
    with the row maximum :math:`s_i` taken out: no finite alpha overflows, and since the
    maximum maps to exactly 1, :math:`q_i \ge 1`, so a tail share below the dtype's
    smallest normal number keeps its absolute error of half a subnormal (not divided by a
    small sum). A row whose valid b are all 0 has no share mass: its shares are uniform,
    :math:`1/n_i`, as every row's are for alpha = 0 (0^0 = 1). An empty row's means are 0
    (its sums over :math:`\max(n_i, 1)`), and the reduction stage drops the row.

    ``l`` and ``b`` are only read. The ``[B, T]`` buffers are the masked l, the masked b
    (then b/s) and p, in the compute dtype, each overwritten once its content is spent.
    """
    count = valid.sum(1, dtype=torch.int32)  # exact, and cheaper than a float sum
    kept = count > 0
    n = count.clamp(min=1).to(plan.dtype)  # an empty row's sums are 0, and so are its means
    # torch.where, never a product with the mask: padded NaN and inf must not leak. Then
    # the compute dtype (a copy only for low-precision inputs), contiguous so that the row
    # sums add in the same order whatever the inputs' strides.
    l_valid, b_valid = (_in_dtype(torch.where(valid, x, 0.0), plan) for x in (l, b))
    # before the share sums overwrite the masked l and b; nothing for the design's terms
    coefficients, token_sums, divisors = {}, {}, {}
    for term in plan.layout.token_terms:  # none for the design's terms
        coefficients[term.name] = k = term.token_coefficient(b_valid, valid, n, plan)
        token_sums[term.name] = (k * l_valid).sum(1)
    for d in plan.layout.token_divisors:
        divisors[d.name] = d.from_tokens(b_valid, valid, n, plan)
    l_sum, b_sum = l_valid.sum(1), b_valid.sum(1)
    b_min = b_valid.amin(1) if plan.validate and b.shape[1] > 0 else None
    l_mean, b_mean = l_sum / n, b_sum / n
    if plan.parameters["token_weight_alpha"] == 0.0:
        kappa = torch.ones_like(n)
        uniform = shares = None
        return Statistics(
            kept,
            n,
            l_mean,
            b_mean,
            l_mean,
            b_mean,
            kappa,
            n,
            uniform,
            shares,
            b_sum,
            b_min,
            coefficients,
            token_sums,
            divisors,
        )
    shares, share_sum, share_l_sum, share_b_sum = _share_sums(l_valid, b_valid, plan)
    uniform = share_sum == 0
    share_sum = torch.where(uniform, n, share_sum)
    l_tok = torch.where(uniform, l_mean, share_l_sum / share_sum)
    b_tok = torch.where(uniform, b_mean, share_b_sum / share_sum)
    kappa = torch.where(b_mean > 0, b_tok / b_mean, 1.0)  # an unselected 0/0 is harmless
    return Statistics(
        kept,
        n,
        l_mean,
        b_mean,
        l_tok,
        b_tok,
        kappa,
        share_sum,
        uniform,
        shares,
        b_sum,
        b_min,
        coefficients,
        token_sums,
        divisors,
    )


def _in_dtype(x: Tensor, plan: Plan) -> Tensor:
    x = x if x.dtype == plan.dtype else x.to(plan.dtype)
    return x if x.is_contiguous() else x.contiguous()


def _share_sums(l_valid: Tensor, b_valid: Tensor, plan: Plan) -> tuple[Tensor, ...]:
    """p, and per example (q, sum p l, sum p b); overwrites ``l_valid`` and ``b_valid``."""
    alpha = plan.parameters["token_weight_alpha"]
    b_max = b_valid.amax(1) if b_valid.shape[1] > 0 else b_valid.sum(1)
    scale = torch.where(b_max > 0, b_max, 1.0)
    # A division, not a product with the reciprocal, which overflows for a subnormal s.
    x = b_valid.div_(scale[:, None])  # b/s in [0, 1]; 0 at padded positions
    if alpha == 1.0:
        shares = x
        share_x_sum = torch.linalg.vector_norm(x, dim=1).square()  # sum x^2, no [B, T] buffer
    else:
        if alpha == 0.5:
            # torch's CPU sqrt is about 3x slower where its argument is 0 (all padding, on
            # an AMD EPYC); 1/rsqrt(x) is not, and maps x = 0 to 1/inf = 0
            shares = torch.rsqrt(x).reciprocal_()
        else:
            # An alpha below the smallest normal number would round to 0 in the dtype and
            # make 0^alpha = 0^0 = 1; the smallest normal gives the same shares.
            shares = torch.pow(x, max(alpha, torch.finfo(plan.dtype).tiny))
        share_x_sum = x.mul_(shares).sum(1)  # x is spent: p x in its place
    share_l_sum = l_valid.mul_(shares).sum(1)  # the masked l is spent: p l in its place
    return shares, shares.sum(1), share_l_sum, share_x_sum * scale
