r"""The reconstruction stack in one formulation: a statistics stage, a reduction stage and
the analytic gradient that makes the two one autograd node.

The statistics stage (``recon_impl.statistics``) reads ``token_nll`` (l),
``zfree_token_nll`` (b) and the mask once each and reduces them to per-example vectors; the
reduction stage is arithmetic on those ``[B]`` vectors (:func:`reduce_statistics`). The same
code runs eagerly and under ``torch.compile`` (forward and backward traced, in one graph
when ``validate=False``); under ``torch.func`` transforms autograd differentiates the stages.

Both stages and the gradient are generic over the term table (``recon_impl.terms``, in
``plan.terms``): every output is addressed by its name, and a term is its record there.
Each term is linear in l for fixed b, :math:`R_k = \frac{1}{C_k} \operatorname{mean}_i
x_{ki}/d_{ki}`, and declares which of three extension points its gradient uses:

* **per-example** (raw, dist, ex): :math:`x_i = \bar l_i`,
  :math:`\partial R_k/\partial l_{it} = 1/(C_k d_{ki} B' n_i)`;
* **share-weighted** (tok, cc): :math:`x_i = \ell^\mathrm{tok}_i`,
  :math:`\partial R_k/\partial l_{it} = \pi_{it}/(C_k d_{ki} B')`;
* **per-token**: :math:`x_i = \sum_t k_{it} l_{it}` for a ``[B, T]`` coefficient k built
  from b (an l/(b + eps) weighting, say), :math:`\partial R_k/\partial l_{it} =
  k_{it}/(C_k d_{ki} B')`.

So the gradient of any mix of the terms takes one pass over the data (MATH.md, "Gradients"):

.. math::

    \frac{\partial}{\partial l_{it}} \sum_k a_k R_k
      = [t \in V_i] \Bigl(u_i + p_{it}\, v_i
        + \textstyle\sum_{k\ \text{per-token}} \frac{a_k\, k_{it}}{C_k d_{ki} B'}\Bigr),

with :math:`a_k` the upstream gradient of term :math:`k` (plus :math:`w_k` times that of
the total, for the terms with :math:`w_k \ne 0`), :math:`p` the share numerators and
:math:`u_i, v_i` per-example coefficients (:func:`token_gradient`). Each term keeps its own
gradient; the diagnostics carry none, and nothing flows to b. To add a term, add its
record (and any parameter it reads) to ``recon_impl/terms.py``: its kind, its C, its
:math:`d_i` (from the statistics or from b) or its :math:`k`; nothing here changes. (Much
of a call's cost at moderate sizes is per torch call, not per element: calls are kept few.)
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from recon_impl.statistics import Statistics, example_statistics
from recon_impl.terms import (
    DIAGNOSTIC_NAMES,
    LAYOUT,
    PARAMETER_FIELDS,
    TERMS,
    TOTAL_NAME,
    Layout,
    Term,
)
from recon_impl.validation import value_checksum

__all__ = ["Plan", "ReconstructionStack", "reduce_statistics", "stack_values", "token_gradient"]


class Plan(NamedTuple):
    """What the stack needs besides the tensors: the config's numbers, the dtype, the terms."""

    dtype: torch.dtype
    parameters: Mapping[str, float]  # each parameter's config field -> its value
    weights: Mapping[str, float]  # each term's name -> its weight
    validate: bool
    layout: Layout = LAYOUT  # the term table's, ``layout_of(terms)``

    @classmethod
    def of(cls, config: Any, dtype: torch.dtype, *, validate: bool) -> Plan:
        """The plan of a ``ReconstructionLossConfig`` (its fields by the term table's names)."""
        parameters, weights = {}, {}  # loops, not comprehensions: no frame of their own
        for field in PARAMETER_FIELDS:
            parameters[field] = getattr(config, field)
        for term in TERMS:
            weights[term.name] = getattr(config, term.weight_field)
        return cls(dtype, parameters, weights, validate)

    @property
    def terms(self) -> tuple[Term, ...]:
        return self.layout.terms


class Reduction(NamedTuple):
    """The outputs by name (in ``layout.names`` order) and what the backward needs."""

    values: dict[str, Tensor]
    #: rows max(n_i, 1), q_i and each divisor d_i: finite on dropped rows too
    state: Tensor
    kept_count: Tensor  # B'


def reduce_statistics(stats: Statistics, plan: Plan) -> Reduction:
    r"""The reduction stage: means over the :math:`B'` kept examples (MATH.md, the terms).

    .. math::

        R_k = \frac{1}{C_k} \operatorname{mean}_i \frac{x_{ki}}{d_{ki}}, \qquad
        J = \textstyle\sum_{k:\, w_k \ne 0} w_k R_k

    (raw: :math:`\bar l_i`; dist: :math:`\bar l_i / c`; ex: :math:`\bar l_i/(\bar b_i +
    \varepsilon)`; tok: :math:`\ell^\mathrm{tok}_i`; cc: :math:`\ell^\mathrm{tok}_i /
    (c \kappa_i)`) and the diagnostics :math:`\operatorname{mean}_i b^\mathrm{tok}_i`,
    :math:`\operatorname{mean}_i \kappa_i`. A zero-weighted term is returned but left out of
    J, so that its overflow (0 * inf) cannot reach the total. Divisions, never products with
    reciprocals (they overflow for a tiny eps or c). Each output is a tensor of its own.
    """
    kept, kept_count = stats.kept, stats.kept.sum(dtype=plan.dtype)
    layout, parameters = plan.layout, plan.parameters
    divisors = {}  # loops, not comprehensions, on the hot path: no frame of their own
    for d in layout.divisors:
        divisors[d.name] = (
            stats.token_divisors[d.name] if d.compute is None else d.compute(stats, plan)
        )
    rows = []  # the distinct x_i / d_i (raw and dist share one), stacked once
    for row in layout.rows:
        x = getattr(stats, row.statistic) if row.token is None else stats.token_sums[row.token]
        rows.append(x if row.divisor is None else x / divisors[row.divisor])
    per_example = torch.stack(rows)
    # each over B' before the sum, which cannot overflow then (means near the dtype's maximum)
    means = (torch.where(kept, per_example, 0.0) / kept_count).sum(1)
    if per_example.shape[1] == 0:
        means = means / kept_count  # B = 0: 0/0, like the other means without an example
    mean_of = dict(zip(layout.rows, torch.unbind_copy(means), strict=True))
    values, total = {}, None
    for name, row, scale in layout.outputs:
        values[name] = mean_of[row] if scale is None else mean_of[row] / parameters[scale]
    largest = torch.finfo(plan.dtype).max  # add's alpha must be a number of the dtype
    for name, w in plan.weights.items():
        if w == 0:
            continue
        if total is None:
            total = w * values[name]
        elif abs(w) <= largest:  # total + w R_k in one call: a call costs more than its flops
            total = torch.add(total, values[name], alpha=w)
        else:
            total = total + w * values[name]  # w * R_k is inf (or NaN), as it should be
    values[TOTAL_NAME] = torch.zeros_like(kept_count) if total is None else total
    state = torch.stack([stats.count, stats.share_sum, *divisors.values()])
    return Reduction(values, state, kept_count)


def token_gradient(
    upstream: Mapping[str, Tensor | None],
    valid: Tensor,
    saved: Mapping[str, Tensor],
    plan: Plan,
) -> Tensor:
    r"""The gradient of :math:`\sum_k a_k R_k` with respect to l (MATH.md, "Gradients").

    ``upstream`` holds the gradients of the outputs by name; :math:`a_k = g_k + w_k g_J`,
    where a term's own gradient :math:`g_k` may be absent and the total's counts only for
    the terms with :math:`w_k \ne 0`: an absent contribution is nothing (rather than 0
    times a coefficient that may overflow). The terms are summed by extension point, with
    :math:`\pi_{it} = p_{it}/q_i` (:math:`1/n_i` where the shares are uniform): the
    gradient is :math:`u_i + p_{it} v_i + \sum_k a_k k_{it}/(C_k d_{ki} B')` (per-token
    terms), with :math:`m_i = \sum_{k\ \text{share-weighted}} a_k/(C_k d_{ki})`,
    :math:`u_i = (\sum_{k\ \text{per-example}} a_k/(C_k d_{ki}) + [\text{uniform}_i]\,
    m_i) / (B' n_i)` and :math:`v_i = [\text{not uniform}_i]\, m_i / (B' q_i)`; for the
    design's terms :math:`u_i = (a_\mathrm{raw} + a_\mathrm{dist}/c + a_\mathrm{ex}/(\bar
    b_i + \varepsilon) + [\text{uniform}_i]\, m_i)/(B' n_i)` and :math:`m_i =
    a_\mathrm{tok} + a_\mathrm{cc}/(c \kappa_i)`. The coefficients depend on b and the
    upstream gradients, never on l, and the gradient is selected with ``torch.where``:
    exactly 0 at every padded position, whatever the coefficients are. Every coefficient
    is finite on a dropped example too (whose positions are all padded), so that
    differentiating the gradient (``create_graph=True``) meets no 0 * inf.
    """
    total, kept_count = upstream[TOTAL_NAME], saved["kept_count"]
    state = dict(zip(plan.layout.state_rows, saved["state"], strict=True))
    # the sums over the per-example and the share-weighted groups of a_k / (C_k d_ki)
    sums: dict[str, Tensor | None] = {"per-example": None, "share-weighted": None}
    per_token: list[tuple[Tensor, Tensor]] = []
    for (kind, divisor, token), members in plan.layout.groups.items():
        # the weights' part as one number, C folded in, and the terms' own gradients
        weight = 0.0
        for name, field in members:
            w = plan.weights[name]
            weight += w if field is None else w / plan.parameters[field]
        a = _scaled(total, weight)
        for name, field in members:
            if (g := upstream[name]) is not None:
                g = g if field is None else g / plan.parameters[field]
                a = g if a is None else a + g
        if a is None:
            continue
        d = None if divisor is None else state[divisor]
        if kind == "per-token":
            per_token.append((saved[f"k:{token}"], a if d is None else a / d))
        else:
            sums[kind] = _add_quotient(sums[kind], a, d)
    m = sums["share-weighted"]
    uniform, p = saved.get("uniform"), saved.get("shares")
    per_example = [sums["per-example"]]
    if m is not None:
        # uniform shares put m on the uniform weights (every row's for alpha = 0)
        per_example.append(m if uniform is None else torch.where(uniform, m, 0.0))
    u = _add(per_example)
    count = state["count"]
    u = torch.zeros_like(count) if u is None else u / (kept_count * count)
    grad = None
    if m is not None and p is not None:
        v = torch.where(uniform, 0.0, m / (kept_count * state["share_sum"]))
        # p v + u as a product and an in-place sum (faster than addcmul's broadcasting on
        # CPUs), one [B, T] buffer in all
        grad = torch.mul(p, v[:, None]).add_(u[:, None])
    for k, a in per_token:
        part = k * (a / kept_count)[..., None]  # a: 0-dim, or [B] with a divisor
        grad = part.add_(u[:, None]) if grad is None else grad.add_(part)
    if grad is None:
        return torch.where(valid, u[:, None], 0.0)
    # the selection in place; out= cannot be recorded, so a gradient that is itself
    # differentiated (create_graph) takes another buffer
    out = None if torch.is_grad_enabled() else grad
    return torch.where(valid, grad, grad.new_zeros(()), out=out)


def _scaled(total: Tensor | None, weight: float) -> Tensor | None:
    """``weight * total``, or None where it is absent (no total's gradient, or weight 0)."""
    return None if total is None or weight == 0 else total * weight


def _add_quotient(total: Tensor | None, a: Tensor, divisor: Tensor | None) -> Tensor:
    """``total + a / divisor`` (``a / divisor`` without a total; no divisor: 1) in one call:
    a call costs more than its flops on these [B] vectors."""
    if divisor is None:
        return a if total is None else total + a
    return a / divisor if total is None else torch.addcdiv(total, a, divisor)


def _add(parts: Sequence[Tensor | None]) -> Tensor | None:
    """The sum of the parts that are present, or None if none is."""
    present = [x for x in parts if x is not None]
    return functools.reduce(operator.add, present) if present else None


def stack_values(
    l: Tensor, b: Tensor, valid: Tensor, plan: Plan
) -> tuple[dict[str, Tensor], Tensor | None, tuple[Statistics, Reduction]]:
    """Both stages: the values by name, the validation checksum (None without validation)
    and the stages' results, differentiable by autograd where ``l`` requires grad."""
    stats = example_statistics(l, b, valid, plan)
    reduction = reduce_statistics(stats, plan)
    values = reduction.values
    checksum = None
    if plan.validate:
        divisors = tuple(stats.token_divisors.values())  # those built from b may overflow
        checksum = value_checksum(tuple(values.values()), stats.b_sum, stats.b_min, divisors)
    return values, checksum, (stats, reduction)


class ReconstructionStack(torch.autograd.Function):
    """``(token_nll, zfree_token_nll, valid, plan)`` -> the values in ``output_names``
    order (``RECONSTRUCTION_LOSS_NAMES`` for the design's terms) and, when
    ``plan.validate``, the checksum of :func:`~recon_impl.validation.value_checksum`; the
    backward is :func:`token_gradient`.

    ``zfree_token_nll`` comes detached and ``valid`` is the bool mask; the inputs are only
    read, and every output is a fresh tensor. Only the terms and the total carry a gradient.
    """

    @staticmethod
    def forward(ctx: Any, l: Tensor, b: Tensor, valid: Tensor, plan: Plan) -> tuple[Tensor, ...]:  # type: ignore[override]
        values, checksum, (stats, reduction) = stack_values(l, b, valid, plan)
        checks = () if checksum is None else (checksum,)
        ctx.mark_non_differentiable(*[values[name] for name in DIAGNOSTIC_NAMES], *checks)
        ctx.set_materialize_grads(False)  # an unused output's gradient is None, not zeros
        ctx.plan, ctx.input_dtype = plan, l.dtype
        if ctx.needs_input_grad[0]:
            saved = {"valid": valid, "state": reduction.state, "kept_count": reduction.kept_count}
            if stats.shares is not None:
                saved.update(uniform=stats.uniform, shares=stats.shares)
            for name, k in stats.token_coefficients.items():
                saved[f"k:{name}"] = k
            ctx.saved_names = tuple(saved)
            ctx.save_for_backward(*saved.values())
        return (*values.values(), *checks)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor | None) -> tuple[Tensor | None, None, None, None]:  # type: ignore[override]
        saved = dict(zip(ctx.saved_names, ctx.saved_tensors, strict=True))
        # the outputs' gradients by name (the checksum's, last when present, is never used)
        upstream = dict(zip(ctx.plan.layout.names, grads, strict=False))
        grad = token_gradient(upstream, saved["valid"], saved, ctx.plan)  # zeros if no weight
        return grad.to(ctx.input_dtype), None, None, None
