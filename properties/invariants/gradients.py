"""Gradients: the closed form of dJ/dl and the stop-gradient on the z-free losses."""

from __future__ import annotations

import torch

from properties.assertions import assert_tensor_close
from properties.cases import LossCase
from properties.invariant import Invariant, InvariantViolation
from properties.invariants.common import TOTAL, assume_gradient_representable
from properties.invariants.edge_cases import named
from properties.oracle import expected
from properties.strategies import loss_cases
from properties.target import Probe
from properties.tolerances import gradient_tolerance


def check_gradient_closed_form(probe: Probe, case: LossCase) -> None:
    assume_gradient_representable(case)
    _, grad, _ = probe.gradients(case, of=TOTAL)
    reference = torch.tensor(expected(case).token_gradient, dtype=torch.float64)
    assert_tensor_close(
        grad,
        reference,
        gradient_tolerance(case.dtype, length=case.shape[1], alpha=case.config.token_weight_alpha),
        what="dJ/dl_it = (1/B') [ (w_raw + w_dist/c + w_ex/(bbar_i+eps))/n_i + "
        "(w_tok + w_cc/(c kappa_i)) pi_it ] (the token weights, read off autograd)",
        case=case,
    )


def check_stop_gradient(probe: Probe, case: LossCase) -> None:
    leaking = [
        f"{name} (d/db = {grad.tolist()})"
        for name, grad in probe.zfree_gradients(case).items()
        if grad is not None and bool((grad != 0).any())
    ]
    if leaking:
        raise InvariantViolation(
            "no output may carry a gradient to zfree_token_nll (every weight built from b is "
            "detached), but these do: " + "; ".join(leaking),
            case=case,
            failing=("zfree gradient",),
        )


INVARIANTS = (
    Invariant(
        id="gradient-closed-form",
        group="gradients",
        statement="the gradient of J with respect to l is the closed form of MATH.md "
        "(uniform 1/n_i part plus share part), 0 at padded positions",
        spec_refs=("gradient-closed-form",),
        strategy=lambda domain: loss_cases(domain),
        check=check_gradient_closed_form,
        examples=(
            named("nan-padding"),
            named("all-zero-surprisal-row"),
            named("empty-row"),
            named("huge-alpha-float32"),
            named("subnormal-float16-gradient"),
        ),
        witness="token_term_detached",
    ),
    Invariant(
        id="stop-gradient",
        group="gradients",
        statement="no output carries a gradient to zfree_token_nll",
        spec_refs=("MATH.md#gradients",),
        strategy=lambda domain: loss_cases(domain),
        check=check_stop_gradient,
        examples=(named("nan-padding"),),
        witness="zfree_not_detached",
    ),
)
