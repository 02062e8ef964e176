r"""The reconstruction stack in one formulation: a statistics stage, a reduction stage and
the analytic gradient that makes the two one autograd node.

The statistics stage reads ``token_nll`` (l), ``zfree_token_nll`` (b) and the mask once
each and reduces them to per-example vectors (:func:`example_statistics`); the reduction
stage is arithmetic on those ``[B]`` vectors (:func:`reduce_statistics`). The same code
runs eagerly and under ``torch.compile`` (forward and backward traced, in one graph when
``validate=False``); under ``torch.func`` transforms autograd differentiates the stages.

Every term is linear in l for fixed b, so the gradient of any mix of the five terms takes
one pass over the data (MATH.md, "Gradients"):

.. math::

    \frac{\partial}{\partial l_{it}} \sum_k a_k R_k
      = [t \in V_i] \bigl(u_i + p_{it}\, v_i\bigr),

with :math:`a_k` the upstream gradient of term :math:`k` (plus :math:`w_k` times that of
the total, for the terms with :math:`w_k \ne 0`), :math:`p` the share numerators and
:math:`u_i, v_i` per-example coefficients (:func:`token_gradient`). Each of the five terms
keeps its own gradient; the two diagnostics carry none, and nothing flows to b. (Much of a
call's cost at moderate sizes is per torch call, not per element: calls are kept few.)
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from recon_impl.validation import value_checksum


class Plan(NamedTuple):
    """What the stack needs besides the tensors: the config's numbers and the dtype."""

    dtype: torch.dtype
    alpha: float
    epsilon: float
    scale: float
    weights: tuple[float, float, float, float, float]
    validate: bool


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
    l_sum, b_sum = l_valid.sum(1), b_valid.sum(1)
    b_min = b_valid.amin(1) if plan.validate and b.shape[1] > 0 else None
    l_mean, b_mean = l_sum / n, b_sum / n
    if plan.alpha == 0.0:
        kappa = torch.ones_like(n)
        return Statistics(
            kept, n, l_mean, b_mean, l_mean, b_mean, kappa, n, None, None, b_sum, b_min
        )
    shares, share_sum, share_l_sum, share_b_sum = _share_sums(l_valid, b_valid, plan)
    uniform = share_sum == 0
    share_sum = torch.where(uniform, n, share_sum)
    l_tok = torch.where(uniform, l_mean, share_l_sum / share_sum)
    b_tok = torch.where(uniform, b_mean, share_b_sum / share_sum)
    kappa = torch.where(b_mean > 0, b_tok / b_mean, 1.0)  # an unselected 0/0 is harmless
    return Statistics(
        kept, n, l_mean, b_mean, l_tok, b_tok, kappa, share_sum, uniform, shares, b_sum, b_min
    )


def _in_dtype(x: Tensor, plan: Plan) -> Tensor:
    x = x if x.dtype == plan.dtype else x.to(plan.dtype)
    return x if x.is_contiguous() else x.contiguous()


def _share_sums(l_valid: Tensor, b_valid: Tensor, plan: Plan) -> tuple[Tensor, ...]:
    """p, and per example (q, sum p l, sum p b); overwrites ``l_valid`` and ``b_valid``."""
    b_max = b_valid.amax(1) if b_valid.shape[1] > 0 else b_valid.sum(1)
    scale = torch.where(b_max > 0, b_max, 1.0)
    # A division, not a product with the reciprocal, which overflows for a subnormal s.
    x = b_valid.div_(scale[:, None])  # b/s in [0, 1]; 0 at padded positions
    if plan.alpha == 1.0:
        shares = x
        share_x_sum = torch.linalg.vector_norm(x, dim=1).square()  # sum x^2, no [B, T] buffer
    else:
        if plan.alpha == 0.5:
            # torch's CPU sqrt is about 3x slower where its argument is 0 (all padding, on
            # an AMD EPYC); 1/rsqrt(x) is not, and maps x = 0 to 1/inf = 0
            shares = torch.rsqrt(x).reciprocal_()
        else:
            # An alpha below the smallest normal number would round to 0 in the dtype and
            # make 0^alpha = 0^0 = 1; the smallest normal gives the same shares.
            shares = torch.pow(x, max(plan.alpha, torch.finfo(plan.dtype).tiny))
        share_x_sum = x.mul_(shares).sum(1)  # x is spent: p x in its place
    share_l_sum = l_valid.mul_(shares).sum(1)  # the masked l is spent: p l in its place
    return shares, shares.sum(1), share_l_sum, share_x_sum * scale


class Reduction(NamedTuple):
    """The eight outputs (``RECONSTRUCTION_LOSS_NAMES`` order) and what the backward needs."""

    values: tuple[Tensor, ...]
    state: Tensor  # rows max(n_i, 1), q_i, bbar_i + eps, kappa_i: finite on dropped rows too
    kept_count: Tensor  # B'


def reduce_statistics(stats: Statistics, plan: Plan) -> Reduction:
    r"""The reduction stage: means over the :math:`B'` kept examples (MATH.md, "The five terms").

    .. math::

        R_\mathrm{raw} = \operatorname{mean}_i \bar l_i, \quad
        R_\mathrm{dist} = R_\mathrm{raw}/c, \quad
        R_\mathrm{ex} = \operatorname{mean}_i \frac{\bar l_i}{\bar b_i + \varepsilon}, \quad
        R_\mathrm{tok} = \operatorname{mean}_i \ell^\mathrm{tok}_i, \quad
        R_\mathrm{cc} = \frac{1}{c} \operatorname{mean}_i \frac{\ell^\mathrm{tok}_i}{\kappa_i}

        J = \textstyle\sum_{k:\, w_k \ne 0} w_k R_k

    and the diagnostics :math:`\operatorname{mean}_i b^\mathrm{tok}_i`,
    :math:`\operatorname{mean}_i \kappa_i`. A term whose weight is 0 is computed and
    returned but left out of J, so that its overflow (0 * inf) cannot reach the total.
    Divisions, never products with reciprocals, which overflow for a tiny eps or c. Each
    output is a tensor of its own (not a view), so that the caller may modify it in place.
    """
    kept, kept_count = stats.kept, stats.kept.sum(dtype=plan.dtype)
    # (1 on a dropped row, whose bbar + eps may be 0: every coefficient stays finite)
    divisor = torch.where(kept, stats.b_mean + plan.epsilon, 1.0)
    terms = (stats.l_mean, stats.l_mean / divisor, stats.l_tok, stats.l_tok / stats.kappa)
    per_example = torch.stack([*terms, stats.b_tok, stats.kappa])
    # each over B' before the sum, which cannot overflow then (means near the dtype's maximum)
    means = (torch.where(kept, per_example, 0.0) / kept_count).sum(1)
    if per_example.shape[1] == 0:
        means = means / kept_count  # B = 0: 0/0, like the other means without an example
    raw, inverse, token, corrected, base, concentration = torch.unbind_copy(means)
    terms = (raw, raw / plan.scale, inverse, token, corrected / plan.scale)
    total = _add([w * term for w, term in zip(plan.weights, terms, strict=True) if w != 0])
    total = torch.zeros_like(raw) if total is None else total
    state = torch.stack([stats.count, stats.share_sum, divisor, stats.kappa])
    return Reduction((*terms, base, concentration, total), state, kept_count)


def token_gradient(
    upstream: Sequence[Tensor | None], valid: Tensor, saved: Sequence[Tensor], plan: Plan
) -> Tensor:
    r"""The gradient of :math:`\sum_k a_k R_k` with respect to l (MATH.md, "Gradients").

    ``upstream`` holds the gradients of the eight outputs; :math:`a_k = g_k + w_k g_J`,
    where a term's own gradient :math:`g_k` may be absent and the total's counts only for
    the terms with :math:`w_k \ne 0`: an absent contribution is nothing (rather than 0
    times a coefficient that may overflow). For kept example i, with
    :math:`\pi_{it} = p_{it}/q_i` (:math:`1/n_i` where the shares are uniform):

    .. math::

        \frac{\partial R_\mathrm{raw}}{\partial l_{it}} = \frac{1}{B' n_i}, \quad
        \frac{\partial R_\mathrm{dist}}{\partial l_{it}} = \frac{1}{c B' n_i}, \quad
        \frac{\partial R_\mathrm{ex}}{\partial l_{it}}
            = \frac{1}{B' n_i (\bar b_i + \varepsilon)}, \quad
        \frac{\partial R_\mathrm{tok}}{\partial l_{it}} = \frac{\pi_{it}}{B'}, \quad
        \frac{\partial R_\mathrm{cc}}{\partial l_{it}} = \frac{\pi_{it}}{c B' \kappa_i}

    so the gradient is :math:`u_i + p_{it} v_i` with :math:`m_i = a_\mathrm{tok} +
    a_\mathrm{cc}/(c \kappa_i)`, :math:`u_i = (a_\mathrm{raw} + a_\mathrm{dist}/c +
    a_\mathrm{ex}/(\bar b_i + \varepsilon) + [\text{uniform}_i]\, m_i) / (B' n_i)` and
    :math:`v_i = [\text{not uniform}_i]\, m_i / (B' q_i)`. The coefficients depend on b
    and the upstream gradients, never on l, and the gradient is selected with
    ``torch.where``: exactly 0 at every padded position, whatever the coefficients are.
    Every coefficient is finite on a dropped example too (whose positions are all padded),
    so that differentiating the gradient (``create_graph=True``) meets no 0 * inf.
    """
    (state, kept_count, *shares), total = saved, upstream[7]
    count, share_sum, divisor, kappa = state
    w_raw, w_dist, w_ex, w_tok, w_cc = plan.weights
    c = plan.scale
    # sum_k a_k dR_k/dl times B' n_i over the uniform-weight terms, and m_i (times pi_it/B')
    # over the share-weighted ones, with the weights' part as one number each
    ex = _add([_scaled(total, w_ex), upstream[2]])
    per_token = [_scaled(total, w_raw + w_dist / c), upstream[0], _div(upstream[1], c)]
    per_token = [x for x in (*per_token, _div(ex, divisor)) if x is not None]
    corrected = _add([_scaled(total, w_cc / c), _div(upstream[4], c)])
    m = _add([_scaled(total, w_tok), upstream[3], _div(corrected, kappa)])
    uniform, p = shares if shares else (None, None)
    if m is not None:
        # uniform shares put m on the uniform weights (every row's for alpha = 0)
        per_token.append(m if uniform is None else torch.where(uniform, m, 0.0))
    u = _add(per_token)
    u = torch.zeros_like(count) if u is None else u / (kept_count * count)
    if m is None or p is None:
        return torch.where(valid, u[:, None], 0.0)
    v = torch.where(uniform, 0.0, m / (kept_count * share_sum))
    # p v + u as a product and an in-place sum (faster than addcmul's broadcasting on
    # CPUs), then the selection in place, one [B, T] buffer in all; out= cannot be
    # recorded, so a gradient that is itself differentiated (create_graph) takes another
    grad = torch.mul(p, v[:, None]).add_(u[:, None])
    out = None if torch.is_grad_enabled() else grad
    return torch.where(valid, grad, grad.new_zeros(()), out=out)


def _scaled(total: Tensor | None, weight: float) -> Tensor | None:
    """``weight * total``, or None where it is absent (no total's gradient, or weight 0)."""
    return None if total is None or weight == 0 else total * weight


def _div(x: Tensor | None, divisor: Tensor | float) -> Tensor | None:
    return None if x is None else x / divisor


def _add(parts: Sequence[Tensor | None]) -> Tensor | None:
    """The sum of the parts that are present, or None if none is."""
    present = [x for x in parts if x is not None]
    return functools.reduce(operator.add, present) if present else None


def stack_values(l: Tensor, b: Tensor, valid: Tensor, plan: Plan) -> tuple[tuple[Tensor, ...], Any]:
    """Both stages: the eight values, the validation checksum (None without validation) and
    the reduction, differentiable by autograd where ``l`` requires grad."""
    stats = example_statistics(l, b, valid, plan)
    reduction = reduce_statistics(stats, plan)
    values = reduction.values
    checksum = value_checksum(values, stats.b_sum, stats.b_min) if plan.validate else None
    return values, checksum, (stats, reduction)


class ReconstructionStack(torch.autograd.Function):
    """``(token_nll, zfree_token_nll, valid, plan)`` -> the eight values in
    ``RECONSTRUCTION_LOSS_NAMES`` order and, when ``plan.validate``, the checksum of
    :func:`~recon_impl.validation.value_checksum`; the backward is :func:`token_gradient`.

    ``zfree_token_nll`` comes detached and ``valid`` is the bool mask; the inputs are only
    read, and every output is a fresh tensor. Only the five terms and the total carry a
    gradient.
    """

    @staticmethod
    def forward(ctx: Any, l: Tensor, b: Tensor, valid: Tensor, plan: Plan) -> tuple[Tensor, ...]:  # type: ignore[override]
        values, checksum, (stats, reduction) = stack_values(l, b, valid, plan)
        checks = () if checksum is None else (checksum,)
        ctx.mark_non_differentiable(*values[5:7], *checks)
        ctx.set_materialize_grads(False)  # an unused output's gradient is None, not zeros
        ctx.plan, ctx.input_dtype = plan, l.dtype
        if ctx.needs_input_grad[0]:
            shares = () if stats.shares is None else (stats.uniform, stats.shares)
            ctx.save_for_backward(valid, reduction.state, reduction.kept_count, *shares)
        return (*values, *checks)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor | None) -> tuple[Tensor | None, None, None, None]:  # type: ignore[override]
        valid, *saved = ctx.saved_tensors
        grad = token_gradient(grads, valid, saved, ctx.plan)  # zeros where no term is weighted
        return grad.to(ctx.input_dtype), None, None, None
