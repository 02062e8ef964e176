"""Gradients (MATH.md, "Gradients"): the closed form of dJ/dl, of each term on its own and of
any mix of the outputs, none from the diagnostics, none to the z-free losses, and second
order under ``create_graph=True``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import assume
from hypothesis import strategies as st

from properties.assertions import assert_tensor_close
from properties.cases import DTYPE_NAMES, LossCase, format_mix
from properties.gradient_calls import second_order_weights
from properties.invariant import Invariant, InvariantViolation
from properties.invariants.common import (
    DIAGNOSTICS,
    TERMS,
    TOTAL,
    assume_gradient_representable,
    representable,
)
from properties.invariants.edge_cases import named
from properties.oracle import expected, expected_mix_gradient
from properties.scale import ScaleCase
from properties.strategies import Domain, loss_cases, mix_coefficients
from properties.target import Probe
from properties.tolerances import (
    gradient_tolerance,
    mixed_gradient_tolerance,
    second_order_tolerance,
)
from spec.definitions import term_gradient
from spec.notation import NamedExample, plain
from spec.symbols import kept_count
from spec.terms import BY_NAME
from spec.terms import TERMS as TERM_RECORDS

#: the outputs a mix may differentiate: the terms and J
DIFFERENTIABLE: tuple[str, ...] = (*TERMS, TOTAL)
#: a term's dR/dl_it in MATH.md's plain text, from the spec's closed form
CLOSED_FORMS: dict[str, str] = {
    name: plain(term_gradient(BY_NAME[name], NamedExample(), None, kept_count)) for name in TERMS
}
#: how second-order use may be declined: torch's once_differentiable says "twice"
DECLINES_SECOND_ORDER = (
    "twice",
    "create_graph",
    "double backward",
    "second order",
    "second-order",
    "higher order",
    "higher-order",
    "not implemented",
)


def _tolerance(case: LossCase):
    return gradient_tolerance(
        case.dtype, length=case.shape[1], alpha=case.config.token_weight_alpha
    )


def _reference(gradient) -> torch.Tensor:
    return torch.tensor(gradient, dtype=torch.float64)


def implicated(name: str, case: LossCase) -> tuple[str, ...]:
    """What a wrong gradient of ``name`` implicates: the output, and for J each term its
    weight puts in it (any of them may be the one that is off)."""
    if name != TOTAL:
        return (name,)
    return (TOTAL, *(t.name for t in TERM_RECORDS if getattr(case.config, t.weight_field)))


def detached_terms(names: list[str], case: LossCase | ScaleCase) -> InvariantViolation:
    return InvariantViolation(
        f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} detached: no grad_fn although "
        "token_nll requires grad. Each term is differentiable on its own (MATH.md, "
        "Gradients): compute_total_loss may build the weighted sum from the terms, and an "
        "ablation trains on one of them",
        case=case,
        failing=tuple(names),
    )


# --- gradient-closed-form ----------------------------------------------------------------


def check_gradient_closed_form(probe: Probe, case: LossCase) -> None:
    assume_gradient_representable(case)
    _, grad, _ = probe.gradients(case, of=TOTAL)
    assert_tensor_close(
        grad,
        _reference(expected(case).token_gradient),
        _tolerance(case),
        what="dJ/dl_it = (1/B') [ (w_raw + w_dist/c + w_ex/(bbar_i+eps))/n_i + "
        "(w_tok + w_cc/(c kappa_i)) pi_it ] (the token weights, read off autograd)",
        case=case,
        failing=implicated(TOTAL, case),
    )


# --- output-gradients --------------------------------------------------------------------


def check_output_gradients(probe: Probe, case: LossCase) -> None:
    oracle = expected(case)
    checked = tuple(n for n in TERMS if representable(case, oracle.term_gradients[n]))
    gradients = probe.output_gradients(case, (*checked, *DIAGNOSTICS))
    detached = [name for name in checked if gradients[name] is None]
    if detached:
        raise detached_terms(detached, case)
    problems: list[str] = []
    failing: list[str] = []
    for name in checked:
        grad = gradients[name]
        assert grad is not None
        if grad.dtype != case.dtype:
            problems.append(
                f"d {name}/d token_nll is {DTYPE_NAMES.get(grad.dtype, grad.dtype)}, not "
                f"{DTYPE_NAMES[case.dtype]} as token_nll"
            )
            failing.append(name)
            continue
        try:
            assert_tensor_close(
                grad,
                _reference(oracle.term_gradients[name]),
                _tolerance(case),
                what=f"d {name}/d l_it = {CLOSED_FORMS[name]} (differentiated alone)",
                case=case,
                failing=(name,),
            )
        except InvariantViolation as violation:
            problems.append(str(violation))
            failing.append(name)
    for name in DIAGNOSTICS:
        grad = gradients[name]
        if grad is not None and not bool((grad == 0).all()):
            problems.append(
                f"the diagnostic {name} carries a gradient to token_nll; it is built from b "
                f"alone and carries none (MATH.md, Gradients):\n  observed {grad.tolist()}"
            )
            failing.append(name)
    if problems:
        raise InvariantViolation("\n".join(problems), case=case, failing=tuple(failing))


# --- mixed-gradient ----------------------------------------------------------------------


@dataclass(frozen=True)
class MixedGradient:
    """A case and the coefficient a_k of each term and J in one mix."""

    case: LossCase
    coefficients: tuple[tuple[str, float], ...]

    def __repr__(self) -> str:
        return f"MixedGradient(case={self.case!r}, mix={format_mix(self.coefficients)})"


@st.composite
def mixed_gradients(draw: st.DrawFn, domain: Domain) -> MixedGradient:
    case = draw(loss_cases(domain))
    return MixedGradient(case, tuple((name, draw(mix_coefficients())) for name in DIFFERENTIABLE))


def check_mixed_gradient(probe: Probe, drawn: MixedGradient) -> None:
    case = drawn.case
    reference, scale = expected_mix_gradient(case, dict(drawn.coefficients))
    assume(representable(case, reference.numpy()) and scale < torch.finfo(case.dtype).max / 4)
    grad, detached = probe.mixed_gradient(case, drawn.coefficients)
    if detached:
        raise detached_terms(list(detached), case)
    assert_tensor_close(
        grad,
        reference,
        mixed_gradient_tolerance(
            case.dtype,
            length=case.shape[1],
            alpha=case.config.token_weight_alpha,
            outputs=len(drawn.coefficients),
        ),
        what=f"one backward of {format_mix(drawn.coefficients)}: d/dl_it = sum_k (a_k + a_J w_k) "
        "dR_k/dl_it (MATH.md, Gradients: the gradient of any mix is the same mix of the closed "
        "forms)",
        case=case,
        scale=scale,
        failing=tuple(name for name, a in drawn.coefficients if a != 0) or (TOTAL,),
    )


# --- second-order ------------------------------------------------------------------------


@dataclass(frozen=True)
class SecondOrderUse:
    """A case, the output differentiated with ``create_graph=True`` and its upstream v."""

    case: LossCase
    output: str
    upstream: float


@st.composite
def second_order_uses(draw: st.DrawFn, domain: Domain) -> SecondOrderUse:
    case = draw(loss_cases(domain))
    return SecondOrderUse(case, draw(st.sampled_from(DIFFERENTIABLE)), draw(mix_coefficients()))


def _closed_form(case: LossCase, name: str) -> torch.Tensor:
    oracle = expected(case)
    if name == TOTAL:
        return _reference(oracle.token_gradient)
    return _reference(oracle.term_gradients[name])


def _declines(error: Exception) -> bool:
    """Whether an error says that second-order use is not supported (as torch's
    ``once_differentiable`` does), rather than being a crash of the backward."""
    text = str(error).lower()
    return isinstance(error, NotImplementedError) or any(w in text for w in DECLINES_SECOND_ORDER)


def check_second_order(probe: Probe, drawn: SecondOrderUse) -> None:
    case, name, v = drawn.case, drawn.output, drawn.upstream
    closed = _closed_form(case, name)
    assume(representable(case, (closed * max(abs(v), 1.0)).numpy()))
    seen = probe.second_order(case, name, v)
    if seen.detached:
        raise detached_terms([name], case)
    where = f"{name} differentiated with create_graph=True (upstream gradient v = {v!r})"
    if seen.error is not None and not _declines(seen.error):
        raise InvariantViolation(
            f"{where}: {'the first' if seen.gradient is None else 'the second'} "
            f"differentiation raised {type(seen.error).__name__}: {seen.error}. An "
            "implementation without second-order support says so (NotImplementedError, or "
            "torch.autograd.function.once_differentiable); docs/API.md, 'Second order'",
            case=case,
            failing=implicated(name, case),
        )
    if seen.gradient is None:
        return  # declined at the first differentiation: no gradient under create_graph
    # the first-order gradient a create_graph=True backward gives is right whether or not
    # the second order is then declined (API.md, "Second order")
    tolerance = _tolerance(case)
    assert_tensor_close(
        seen.gradient,
        v * closed,
        tolerance,
        what=f"{where}: g = v d {name}/dl (the first-order gradient under create_graph=True)",
        case=case,
        scale=abs(v) * float(closed.abs().max()),
        failing=implicated(name, case),
    )
    if seen.error is not None:
        return  # the second order declined clearly: it is not claimed
    weights = second_order_weights(closed)
    want = math.fsum((weights * closed).flatten().tolist())
    # a g with no grad_fn is constant in v: right only where the closed form is 0 (J with
    # every weight 0)
    got = 0.0 if seen.by_upstream is None else float(seen.by_upstream)
    positions = case.shape[0] * case.shape[1]
    bound = second_order_tolerance(
        case.dtype, length=case.shape[1], alpha=case.config.token_weight_alpha, positions=positions
    )
    allowed = bound.rtol * float(closed.abs().max()) * float(weights.sum()) + bound.atol
    problems = []
    if not seen.gradient.requires_grad and not abs(got - want) <= allowed:
        problems.append(
            "g is detached from v (no grad_fn), so differentiating it gives 0, but g = v "
            f"d {name}/dl is linear in v: d(sum_t u_t g_t)/dv = sum_t u_t d {name}/dl_t = "
            f"{want!r} (u = 1/4, 1/2, 3/4, 1, ... row by row). A backward computed under "
            "torch.no_grad() does this; mark it once_differentiable if second order is not "
            "supported"
        )
    elif not abs(got - want) <= allowed:
        problems.append(
            f"d(sum_t u_t g_t)/dv = {got!r}, expected sum_t u_t d {name}/dl_t = {want!r} "
            f"(allowed |diff| {allowed:.3g}; u = 1/4, 1/2, 3/4, 1, ... row by row)"
        )
    by_l = seen.by_token_nll
    if by_l is not None and not bool((by_l == 0).all()):
        problems.append(
            f"d(sum_t u_t g_t)/dl = {by_l.tolist()}, expected 0 (g does not depend on l: every "
            "term is linear in l)"
        )
    if problems:
        message = f"{where}: " + "; ".join(problems)
        raise InvariantViolation(message, case=case, failing=implicated(name, case))


# --- stop-gradient -----------------------------------------------------------------------


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


def alternating_coefficients(names: tuple[str, ...]) -> tuple[tuple[str, float], ...]:
    """A coefficient of its own for each of ``names``, signs mixed, every third one 0."""
    return tuple((name, (k % 3 - 1) * (k + 1) / 2) for k, name in enumerate(names))


_EVERY_COEFFICIENT = alternating_coefficients(DIFFERENTIABLE)

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
        id="output-gradients",
        group="gradients",
        statement="each term differentiated alone has its closed-form gradient "
        "(0 at padding, token_nll's dtype); the diagnostics carry none",
        spec_refs=("term-gradient-closed-form", "MATH.md#contract-of-an-implementation"),
        strategy=lambda domain: loss_cases(domain),
        check=check_output_gradients,
        examples=(
            named("nan-padding"),
            named("all-zero-surprisal-row"),
            named("empty-row"),
            named("huge-alpha-float32"),
        ),
        witness="fused_diagnostics_differentiable",
    ),
    Invariant(
        id="mixed-gradient",
        group="gradients",
        statement="one backward of sum_k a_k output_k over the terms and J (any real a_k) "
        "gives the same mix of their closed-form gradients",
        spec_refs=("mixed-gradient",),
        strategy=lambda domain: mixed_gradients(domain),
        check=check_mixed_gradient,
        examples=(
            named("nan-padding", lambda case: MixedGradient(case, _EVERY_COEFFICIENT)),
            named("empty-row", lambda case: MixedGradient(case, _EVERY_COEFFICIENT)),
        ),
        witness="fused_first_upstream_only",
    ),
    Invariant(
        id="second-order",
        group="gradients",
        statement="create_graph=True gives the closed form, differentiable again (0 in l, the "
        "closed form in the upstream), or an error saying it is unsupported",
        spec_refs=("MATH.md#gradients", "API.md#second-order"),
        strategy=lambda domain: second_order_uses(domain),
        check=check_second_order,
        examples=(
            named("empty-row", lambda case: SecondOrderUse(case, TOTAL, 1.0)),
            named("all-zero-surprisal-row", lambda case: SecondOrderUse(case, TOTAL, -2.0)),
        ),
        witness="fused_no_grad_backward",
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
