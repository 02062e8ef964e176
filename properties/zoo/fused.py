r"""A fused stack: one autograd node whose backward writes the gradient of any mix of the
outputs, with one slip at a time in that backward.

The forward takes the textbook's values (``properties.zoo.textbook``) and, once per call,
each term's token weights :math:`G_k = \partial R_k / \partial l` (autograd through the
textbook on a float32-or-better copy of l); the backward writes

.. math::

    \frac{\partial}{\partial l} \Bigl(\sum_k g_k R_k + g_J J\Bigr)
        = \sum_k (g_k + w_k\, g_J)\, G_k

from the upstream gradients :math:`g` (MATH.md, "Gradients"), as Liger-Kernel's
cross-entropy writes its gradient beside its forward. With no slip it is correct, second
order included (the backward is differentiable in the upstream gradients). Each name in
``SLIPS`` switches on one mistake such a backward is written with; only the gradient is
wrong, never a value, and differentiating J alone is right for every slip but the last
two.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor

from properties.invariants.gradients import MixedGradient, SecondOrderUse
from properties.zoo.smallest import ANY_INPUT, ONE_CELL, Smallest
from properties.zoo.textbook import textbook_losses
from spec.terms import (
    BTOK,
    CC,
    DIAGNOSTIC_NAMES,
    KAPPA,
    LOSS_NAMES,
    TERM_NAMES,
    TERMS,
    TOK,
    TOTAL_NAME,
)

#: the term each diagnostic is built like (the same shares, b for l)
BUILT_LIKE = {TOK.name: BTOK.name, CC.name: KAPPA.name}

#: slip -> (the invariant that names it, the mistake)
SLIPS: dict[str, tuple[str, str]] = {
    "total-weights-only": (
        "output-gradients",
        "the backward writes J's token weights times the sum of the upstream gradients, "
        "whatever output is differentiated",
    ),
    "term-gradient-scaled": (
        "output-gradients",
        "R_cc's own upstream gradient counts twice (J's path through w_cc is right)",
    ),
    "first-upstream-only": (
        "mixed-gradient",
        "the backward reads only the first upstream gradient present: each output alone is "
        "right, a mix of them is not",
    ),
    "diagnostics-differentiable": (
        "output-gradients",
        "the diagnostics are not marked non-differentiable, and their upstream gradients are "
        "read with R_tok's and R_cc's token weights (btok and kappa are built like them)",
    ),
    "no-grad-backward": (
        "second-order",
        "the backward runs under torch.no_grad(): right first-order gradients, but under "
        "create_graph=True a gradient detached from its upstream",
    ),
    "create-graph-path-scaled": (
        "second-order",
        "under create_graph=True the backward takes a path of its own that declines the second "
        "derivative (NotImplementedError), and its first-order gradient is 1.5 times the right one",
    ),
}


class _DeclinesSecondOrder(torch.autograd.Function):
    """``gradient`` as it is, a function of the upstream gradients that refuses to be
    differentiated: the create_graph path of the ``create-graph-path-scaled`` slip."""

    @staticmethod
    def forward(ctx: Any, gradient: Tensor, *upstream: Tensor):  # type: ignore[override]
        return gradient.clone()

    @staticmethod
    def backward(ctx: Any, *grads: Tensor):  # type: ignore[override]
        raise NotImplementedError("the fused stack's backward does not support second order")


def _token_weights(
    token_nll: Tensor, zfree: Tensor, mask: Tensor, config: Any
) -> dict[str, Tensor]:
    """G_k = dR_k/dl of each term, by name, from autograd through the textbook (float32 or
    better)."""
    dtype = torch.promote_types(token_nll.dtype, torch.float32)
    with torch.enable_grad():
        leaf = token_nll.detach().to(dtype).requires_grad_()
        values = textbook_losses(leaf, zfree.detach(), mask, config)
        return {
            term.name: torch.autograd.grad(values[term.name], leaf, retain_graph=True)[0]
            for term in TERMS
        }


def _gradient(
    upstream: dict[str, Tensor | None],
    weights: dict[str, Tensor],
    config: Any,
    slip: str | None,
) -> Tensor:
    """sum_k (g_k + w_k g_J) G_k, with ``slip`` in it; None upstream gradients are absent."""
    total = upstream[TOTAL_NAME]
    term_weights = {term.name: getattr(config, term.weight_field) for term in TERMS}
    if slip == "first-upstream-only":
        first = next(name for name in LOSS_NAMES if upstream[name] is not None)
        upstream = {name: (g if name == first else None) for name, g in upstream.items()}
        total = upstream[TOTAL_NAME]
    if slip == "total-weights-only":
        present = [g for g in upstream.values() if g is not None]
        return sum(present) * sum(term_weights[name] * g for name, g in weights.items())
    grad = torch.zeros_like(next(iter(weights.values())))
    for term in TERMS:
        weight, token_weights = term_weights[term.name], weights[term.name]
        own = upstream[term.name]
        if slip == "term-gradient-scaled" and term is CC and own is not None:
            own = 2 * own
        extra = upstream[BUILT_LIKE[term.name]] if term.name in BUILT_LIKE else None
        if slip == "diagnostics-differentiable" and extra is not None:
            own = extra if own is None else own + extra
        if own is not None:
            grad = grad + own * token_weights
        if total is not None and weight != 0:
            grad = grad + weight * total * token_weights
    return grad


class _FusedStack(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, token_nll: Tensor, zfree: Tensor, mask: Tensor, config: Any, slip: Any):  # type: ignore[override]
        values = textbook_losses(token_nll.detach(), zfree.detach(), mask, config)
        outputs = tuple(values[name].detach().clone() for name in LOSS_NAMES)
        if slip != "diagnostics-differentiable":
            ctx.mark_non_differentiable(*(outputs[LOSS_NAMES.index(n)] for n in DIAGNOSTIC_NAMES))
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*_token_weights(token_nll, zfree, mask, config).values())
        ctx.config, ctx.slip = config, slip
        return outputs

    @staticmethod
    def backward(ctx: Any, *upstream: Tensor | None):  # type: ignore[override]
        declines = ctx.slip == "create-graph-path-scaled" and torch.is_grad_enabled()
        no_grad = torch.no_grad() if ctx.slip == "no-grad-backward" or declines else None
        with no_grad or contextlib.nullcontext():
            # autograd hands the upstream gradients and the saved tensors back in the order
            # forward returned and saved them: the outputs', the terms'
            given = dict(zip(LOSS_NAMES, upstream, strict=True))
            weights = dict(zip(TERM_NAMES, ctx.saved_tensors, strict=True))
            grad = _gradient(given, weights, ctx.config, ctx.slip)
        if declines:
            present = (g for g in upstream if g is not None)
            grad = _DeclinesSecondOrder.apply(1.5 * grad, *present)
        return grad, None, None, None, None


def fused_losses(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    mask: Tensor,
    config: Any,
    *,
    slip: str | None = None,
) -> dict[str, Tensor]:
    """The outputs of one fused node (no slip: correct, second order included)."""
    if slip is not None and slip not in SLIPS:
        raise ValueError(f"unknown slip {slip!r}")
    outputs = _FusedStack.apply(token_nll, zfree_token_nll, mask, config, slip)
    return dict(zip(LOSS_NAMES, outputs, strict=True))


#: slip -> the smallest input that shows it (``properties.zoo.smallest``)
SMALLEST: dict[str, Smallest] = {
    "total-weights-only": Smallest("output-gradients", ONE_CELL, ANY_INPUT),
    "term-gradient-scaled": Smallest("output-gradients", ONE_CELL, ANY_INPUT),
    "first-upstream-only": Smallest(
        "mixed-gradient",
        MixedGradient(ONE_CELL, ((TERMS[0].name, 1.0), (TOTAL_NAME, 1.0))),
        ANY_INPUT,
    ),
    "diagnostics-differentiable": Smallest("output-gradients", ONE_CELL, ANY_INPUT),
    "no-grad-backward": Smallest(
        "second-order", SecondOrderUse(ONE_CELL, TOTAL_NAME, 1.0), ANY_INPUT
    ),
    "create-graph-path-scaled": Smallest(
        "second-order", SecondOrderUse(ONE_CELL, TOTAL_NAME, 1.0), ANY_INPUT
    ),
}
