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
record (and any parameter it reads) to ``recon_impl/terms.py``. (Much of a call's cost at
moderate sizes is per torch call, not per element: calls are kept few.)
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from recon_impl.statistics import Statistics, example_statistics
from recon_impl.terms import DIAGNOSTICS, TERMS, TOTAL_NAME, ExampleDivisor, Term
from recon_impl.validation import value_checksum

__all__ = ["Plan", "ReconstructionStack", "reduce_statistics", "stack_values", "token_gradient"]


class Plan(NamedTuple):
    """What the stack needs besides the tensors: the config's numbers, the dtype, the terms."""

    dtype: torch.dtype
    #: each parameter's config field -> its value
    parameters: Mapping[str, float]
    #: each term's name -> its weight
    weights: Mapping[str, float]
    validate: bool
    terms: tuple[Term, ...] = TERMS

    @property
    def alpha(self) -> float:
        return self.parameters["token_weight_alpha"]

    @property
    def epsilon(self) -> float:
        return self.parameters["example_inverse_surprisal_epsilon"]

    def scale_of(self, term: Term) -> float | None:
        """C of ``term``: the parameter its mean is divided by, None for 1."""
        return None if term.scale_field is None else self.parameters[term.scale_field]


def output_names(terms: Iterable[Term]) -> tuple[str, ...]:
    """The stack's outputs, in order: the terms, the diagnostics, the total."""
    return (*(t.name for t in terms), *(d.name for d in DIAGNOSTICS), TOTAL_NAME)


def _divisors(terms: Iterable[Term]) -> tuple[ExampleDivisor, ...]:
    """The distinct per-example divisors of the terms, in the terms' order."""
    return tuple({t.divisor.name: t.divisor for t in terms if t.divisor is not None}.values())


def _statistic(term: Term, stats: Statistics) -> Tensor:
    """x_i of ``term``: the per-example statistic its kind averages."""
    if term.kind == "per-example":
        return stats.l_mean
    if term.kind == "share-weighted":
        return stats.l_tok
    return stats.token_sums[term.name]


class Reduction(NamedTuple):
    """The outputs by name (in :func:`output_names` order) and what the backward needs."""

    values: dict[str, Tensor]
    #: rows max(n_i, 1), q_i and each divisor d_i: finite on dropped rows too
    state: Tensor
    kept_count: Tensor  # B'


def reduce_statistics(stats: Statistics, plan: Plan) -> Reduction:
    r"""The reduction stage: means over the :math:`B'` kept examples (MATH.md, "The five terms").

    .. math::

        R_k = \frac{1}{C_k} \operatorname{mean}_i \frac{x_{ki}}{d_{ki}}, \qquad
        J = \textstyle\sum_{k:\, w_k \ne 0} w_k R_k

    (raw: :math:`\bar l_i`; dist: :math:`\bar l_i / c`; ex: :math:`\bar l_i/(\bar b_i +
    \varepsilon)`; tok: :math:`\ell^\mathrm{tok}_i`; cc: :math:`\ell^\mathrm{tok}_i /
    (c \kappa_i)`) and the diagnostics :math:`\operatorname{mean}_i b^\mathrm{tok}_i`,
    :math:`\operatorname{mean}_i \kappa_i`. A term whose weight is 0 is computed and
    returned but left out of J, so that its overflow (0 * inf) cannot reach the total.
    Divisions, never products with reciprocals, which overflow for a tiny eps or c. Each
    output is a tensor of its own (not a view), so that the caller may modify it in place.
    """
    kept, kept_count = stats.kept, stats.kept.sum(dtype=plan.dtype)
    divisors = {d.name: d.compute(stats, plan) for d in _divisors(plan.terms)}
    # each output's per-example x_i, divisor d_i and C: the terms', then the diagnostics'
    sources = [(t.name, _statistic(t, stats), t.divisor and t.divisor.name) for t in plan.terms]
    sources += [(d.name, getattr(stats, d.statistic), None) for d in DIAGNOSTICS]
    rows: dict[tuple[int, str | None], Tensor] = {}  # the distinct x_i / d_i, stacked once
    for _, x, divisor in sources:
        if (id(x), divisor) not in rows:
            rows[id(x), divisor] = x if divisor is None else x / divisors[divisor]
    per_example = torch.stack(list(rows.values()))
    # each over B' before the sum, which cannot overflow then (means near the dtype's maximum)
    means = (torch.where(kept, per_example, 0.0) / kept_count).sum(1)
    if per_example.shape[1] == 0:
        means = means / kept_count  # B = 0: 0/0, like the other means without an example
    mean_of = dict(zip(rows, torch.unbind_copy(means), strict=True))
    values: dict[str, Tensor] = {}
    scales = {t.name: plan.scale_of(t) for t in plan.terms}
    for name, x, divisor in sources:
        mean, scale = mean_of[id(x), divisor], scales.get(name)
        if scale is not None:
            values[name] = mean / scale
        else:  # a mean two outputs share (raw and tok for alpha = 0) is copied for the second
            values[name] = mean.clone() if any(v is mean for v in values.values()) else mean
    weighted = [plan.weights[t.name] * values[t.name] for t in plan.terms if plan.weights[t.name]]
    total = _add(weighted)
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
    rows = ("count", "share_sum", *(d.name for d in _divisors(plan.terms)))
    state = dict(zip(rows, saved["state"], strict=True))
    # per (kind, divisor, per-token term): the weights' part as one number, C folded in,
    # and the terms' own gradients, each over its C
    groups: dict[tuple[str, str | None, str | None], tuple[float, list[Tensor]]] = {}
    for term in plan.terms:
        scale, own = plan.scale_of(term), upstream[term.name]
        divisor = term.divisor and term.divisor.name
        key = (term.kind, divisor, term.name if term.kind == "per-token" else None)
        weight, parts = groups.get(key, (0.0, []))
        weight += plan.weights[term.name] if scale is None else plan.weights[term.name] / scale
        if own is not None:
            parts.append(own if scale is None else own / scale)
        groups[key] = (weight, parts)
    per_example: list[Tensor] = []
    shared: list[Tensor] = []
    per_token: list[tuple[Tensor, Tensor]] = []
    for (kind, divisor, name), (weight, parts) in groups.items():
        a = _add([_scaled(total, weight), *parts])
        if a is None:
            continue
        a = a if divisor is None else a / state[divisor]
        if kind == "per-example":
            per_example.append(a)
        elif kind == "share-weighted":
            shared.append(a)
        else:
            per_token.append((saved[f"k:{name}"], a))
    m = _add(shared)
    uniform, p = saved.get("uniform"), saved.get("shares")
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
    checksum = (
        value_checksum(tuple(values.values()), stats.b_sum, stats.b_min) if plan.validate else None
    )
    return values, checksum, (stats, reduction)


class ReconstructionStack(torch.autograd.Function):
    """``(token_nll, zfree_token_nll, valid, plan)`` -> the values in
    :func:`output_names` order (``RECONSTRUCTION_LOSS_NAMES`` for the design's terms) and,
    when ``plan.validate``, the checksum of :func:`~recon_impl.validation.value_checksum`;
    the backward is :func:`token_gradient`.

    ``zfree_token_nll`` comes detached and ``valid`` is the bool mask; the inputs are only
    read, and every output is a fresh tensor. Only the terms and the total carry a gradient.
    """

    @staticmethod
    def forward(ctx: Any, l: Tensor, b: Tensor, valid: Tensor, plan: Plan) -> tuple[Tensor, ...]:  # type: ignore[override]
        values, checksum, (stats, reduction) = stack_values(l, b, valid, plan)
        checks = () if checksum is None else (checksum,)
        ctx.mark_non_differentiable(*(values[d.name] for d in DIAGNOSTICS), *checks)
        ctx.set_materialize_grads(False)  # an unused output's gradient is None, not zeros
        ctx.plan, ctx.input_dtype = plan, l.dtype
        if ctx.needs_input_grad[0]:
            saved = {"valid": valid, "state": reduction.state, "kept_count": reduction.kept_count}
            if stats.shares is not None:
                saved.update(uniform=stats.uniform, shares=stats.shares)
            saved.update({f"k:{name}": k for name, k in stats.token_coefficients.items()})
            ctx.saved_names = tuple(saved)
            ctx.save_for_backward(*saved.values())
        return (*values.values(), *checks)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor | None) -> tuple[Tensor | None, None, None, None]:  # type: ignore[override]
        saved = dict(zip(ctx.saved_names, ctx.saved_tensors, strict=True))
        # the outputs' gradients by name (the checksum's, last when present, is never used)
        upstream = dict(zip(output_names(ctx.plan.terms), grads, strict=False))
        grad = token_gradient(upstream, saved["valid"], saved, ctx.plan)  # zeros if no weight
        return grad.to(ctx.input_dtype), None, None, None
