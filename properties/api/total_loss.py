"""``compute_total_loss`` (seed 001, "Returned scalar losses and diagnostics"; API.md,
"compute_total_loss"): the bundle, its reconstruction values, the weighted total, and the
terms that must be given."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from hypothesis import assume

from properties.api.invariant import ApiInvariant
from properties.api.probe import ApiProbe, literal, short
from properties.api.strategies import (
    MIXED_ENTRIES,
    MissingTerm,
    TotalLossCase,
    TotalLossMix,
    missing_terms,
    total_loss_cases,
    total_loss_mixes,
)
from properties.assertions import assert_tensor_close, assert_values_close
from properties.cases import DTYPE_NAMES, LossCase, format_mix
from properties.gradient_calls import mixed_gradient_lines
from properties.invariant import InvariantViolation, NamedInput
from properties.invariants.common import assume_gradient_representable, representable
from properties.invariants.edge_cases import EDGE_CASES
from properties.invariants.gradients import alternating_coefficients, implicated
from properties.messages import names_word, naming
from properties.oracle import expected, expected_mix_gradient
from properties.reproduction import inputs_after_lines
from properties.tolerances import (
    case_tolerance,
    computation_dtype,
    gradient_tolerance,
    mixed_gradient_tolerance,
    weight_gradient_tolerance,
    weighted_sum_tolerance,
)
from spec.api import (
    AUXILIARY_NAMES,
    AUXILIARY_TERMS,
    BUNDLE_NAMES,
    COMPUTE_TOTAL_LOSS,
    DISENTANGLEMENT_CONFIG,
    METADATA_ONLY,
    RECONSTRUCTION_CONFIG,
    ROUTER_SUPPORT_SWITCH,
    TOTAL_LOSS,
)
from spec.terms import LOSS_NAMES, OUTPUTS_SECTION, TOTAL_NAME, WEIGHT_FIELDS

TOTAL_REFS = ("API.md#compute_total_loss",)
NEEDS = (RECONSTRUCTION_CONFIG, DISENTANGLEMENT_CONFIG, COMPUTE_TOTAL_LOSS)


def _violation(message: str, case: Any, *failing: str) -> InvariantViolation:
    return InvariantViolation(message, case=case, failing=failing)


def _outputs(probe: ApiProbe, drawn: TotalLossCase, **options: Any) -> Mapping[str, Any]:
    outputs = probe.total_loss(drawn, **options)
    if not isinstance(outputs, Mapping):
        raise _violation(
            f"{COMPUTE_TOTAL_LOSS} must return a mapping of names to 0-dim tensors, got a "
            f"{type(outputs).__name__}",
            drawn.case,
            "bundle",
        )
    return outputs


def _scalars(outputs: Mapping[str, Any], names: tuple[str, ...], drawn: TotalLossCase):
    """The named entries as floats, or a violation saying why they cannot be read."""
    values = {}
    for name in names:
        value = outputs.get(name)
        if not isinstance(value, torch.Tensor) or value.dim() != 0:
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else value
            raise _violation(
                f"cannot compare: {name} is {shape!r}, not a 0-dim tensor (total-loss-bundle "
                "says more)",
                drawn.case,
                name,
            )
        if value.device.type != torch.device(drawn.case.device).type:  # meta holds no value
            raise _violation(
                f"cannot compare: {name} is on {value.device}, the inputs on "
                f"{drawn.case.device} (total-loss-contract says more)",
                drawn.case,
                name,
            )
        values[name] = float(value.detach())
    return values


# --- total-loss-bundle ---------------------------------------------------------------------


def check_bundle(probe: ApiProbe, drawn: TotalLossCase) -> None:
    outputs = _outputs(probe, drawn, token_nll_requires_grad=True)
    given = tuple(name for name, _ in drawn.auxiliary)
    required = (*LOSS_NAMES, *given, TOTAL_LOSS)
    problems = []
    missing = [name for name in required if name not in outputs]
    if missing:
        problems.append(f"lacks {', '.join(missing)}")
    for name in outputs:
        if name in METADATA_ONLY:
            problems.append(f"returns {name}, which is run metadata (the config's), never an entry")
        elif name in AUXILIARY_NAMES and name not in given:
            problems.append(f"returns {name}, which was not given")
        elif name not in BUNDLE_NAMES:
            problems.append(f"returns {name!r}, which is not an entry the seed approves")
    batch = drawn.case.shape[0]
    for name, value in outputs.items():
        if not isinstance(value, torch.Tensor):
            problems.append(f"{name} is a {type(value).__name__}, not a 0-dim tensor")
        elif value.dim() != 0:
            what = "per-example [B]" if tuple(value.shape) == (batch,) else "not 0-dim"
            problems.append(
                f"{name} has shape {list(value.shape)} ({what}; B = {batch}): the bundle holds "
                "batch scalars"
            )
    total = outputs.get(TOTAL_LOSS)
    if isinstance(total, torch.Tensor) and not total.requires_grad:
        problems.append(f"{TOTAL_LOSS} does not require grad although token_nll does")
    if problems:
        raise _violation(
            f"{COMPUTE_TOTAL_LOSS} returns every reconstruction output, every given auxiliary "
            f"term and {TOTAL_LOSS} as 0-dim tensors, and nothing else: " + "; ".join(problems),
            drawn.case,
            "bundle",
        )


# --- total-loss-reconstruction -------------------------------------------------------------


def check_reconstruction(probe: ApiProbe, drawn: TotalLossCase) -> None:
    case = drawn.case
    observed = _scalars(_outputs(probe, drawn), LOSS_NAMES, drawn)
    assert_values_close(
        observed,
        expected(case).values,
        case_tolerance(case),
        names=LOSS_NAMES,
        what=f"{DTYPE_NAMES[case.dtype]} inputs: {COMPUTE_TOTAL_LOSS}'s reconstruction entries "
        f"against the spec's oracle for config.reconstruction",
        case=case,
    )


# --- total-loss-weighted-sum ---------------------------------------------------------------


def expected_total(drawn: TotalLossCase, reconstruction_total: float) -> tuple[float, float]:
    """``J + sum_k w_k a_k`` over the given terms with their effective weights, and the sum
    of the magnitudes of its parts (the scale of its rounding)."""
    weights = drawn.effective()
    parts = [reconstruction_total] + [weights[n] * v for n, v in drawn.auxiliary]
    return math.fsum(parts), math.fsum(abs(p) for p in parts)


def _weights_of(drawn: TotalLossCase, names: list[str]) -> str:
    """The config fields behind the effective weights of ``names``."""
    values = drawn.outer_values()
    shown = []
    for term in AUXILIARY_TERMS:
        if term.name in names:
            shown.append(f"{term.weight_field}={values[term.weight_field]!r}")
            if term.switch is not None:
                shown.append(f"{term.switch}={values[term.switch]!r}")
    return ", ".join(shown)


def check_weighted_sum(probe: ApiProbe, drawn: TotalLossCase) -> None:
    case = drawn.case
    try:
        outputs = _outputs(probe, drawn)
    except ValueError as error:
        weights = drawn.effective()
        left_out = [n for n in AUXILIARY_NAMES if n not in dict(drawn.auxiliary)]
        named = [n for n in left_out if names_word(str(error), n)] or left_out
        raise _violation(
            f"{COMPUTE_TOTAL_LOSS} raised ValueError: {short(str(error))}; but every term left "
            "out has effective weight 0 ("
            + ", ".join(f"{n}: {weights[n]:g}" for n in named)
            + f" with {_weights_of(drawn, named)}), and such a term may be left out",
            case,
            TOTAL_LOSS,
        ) from error
    observed = _scalars(outputs, (TOTAL_NAME, TOTAL_LOSS), drawn)
    want, scale = expected_total(drawn, observed[TOTAL_NAME])
    total_tolerance = weighted_sum_tolerance(case.dtype, terms=len(drawn.auxiliary))
    own = case_tolerance(case)
    allowed = total_tolerance.rtol * scale + own.rtol * abs(observed[TOTAL_NAME]) + own.atol
    got = observed[TOTAL_LOSS]
    if math.isfinite(got) and abs(got - want) <= allowed:
        return
    weights = drawn.effective()
    parts = [f"{TOTAL_NAME} {observed[TOTAL_NAME]:.9g}"] + [
        f"{weights[n]:g} * {n} {v:.9g}" for n, v in drawn.auxiliary
    ]
    hints = [
        f"it matches the total without {name}"
        for name, value in drawn.auxiliary
        if weights[name] * value != 0 and abs(got - (want - weights[name] * value)) <= allowed
    ]
    switch = dict(drawn.outer).get(ROUTER_SUPPORT_SWITCH, True)
    if not switch and "router_support" in dict(drawn.auxiliary):
        value = dict(drawn.auxiliary)["router_support"]
        weight = drawn.outer_values()["router_support_weight"]
        if weight * value != 0 and abs(got - (want + weight * value)) <= allowed:
            hints.append(
                f"it matches the total with router_support counted although "
                f"{ROUTER_SUPPORT_SWITCH}=False"
            )
    raise _violation(
        f"{TOTAL_LOSS} is {got:.9g}; J + the weighted auxiliary terms = {' + '.join(parts)} = "
        f"{want:.9g} (|diff| {abs(got - want):.3g}, allowed {allowed:.3g})"
        + (f": {'; '.join(hints)}" if hints else ""),
        case,
        TOTAL_LOSS,
    )


# --- total-loss-missing-term ----------------------------------------------------


def check_requires_weighted_terms(probe: ApiProbe, drawn: MissingTerm) -> None:
    weight = drawn.total.effective()[drawn.missing]
    try:
        outputs = _outputs(probe, drawn.total, omit=(drawn.missing,))
    except ValueError as error:
        # the term as a whole word (kl is not named by router_marginal_kl_to_prior), and no
        # other auxiliary term (API.md, "What an error names")
        others = [(name,) for name in AUXILIARY_NAMES if name != drawn.missing]
        problem = naming(str(error), (drawn.missing,), others).problem
        if problem is not None:
            raise _violation(
                f"leaving out {drawn.missing} (effective weight {weight:g}) raised a ValueError "
                f"that {problem}; it says: {short(str(error))}",
                drawn.case,
                drawn.missing,
            ) from error
        return
    except Exception as error:
        raise _violation(
            f"leaving out {drawn.missing} (effective weight {weight:g}) must be a ValueError "
            f"naming it, got {type(error).__name__}: {short(str(error))}",
            drawn.case,
            drawn.missing,
        ) from error
    probe.note("returns normally")
    total = outputs.get(TOTAL_LOSS)
    value = (
        f" ({TOTAL_LOSS} = {float(total.detach()):.9g})"
        if isinstance(total, torch.Tensor) and total.dim() == 0
        else ""
    )
    raise _violation(
        f"{drawn.missing} has effective weight {weight:g} and was not given, yet "
        f"{COMPUTE_TOTAL_LOSS} returned{value}: a missing term is a ValueError naming it, "
        "never a silent 0",
        drawn.case,
        drawn.missing,
    )


# --- total-loss-contract -------------------------------------------------------------------


def _unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    """The same dtype, shape and values (NaN where there was NaN)."""
    if before.dtype != after.dtype or before.shape != after.shape:
        return False
    before, after = before.detach().cpu(), after.detach().cpu()
    same = before == after
    if before.is_floating_point():
        same |= before.isnan() & after.isnan()
    return bool(same.all())


def check_contract(probe: ApiProbe, drawn: TotalLossCase) -> None:
    case = drawn.case
    names = ("token_nll", "zfree_token_nll", "mask")
    then = inputs_after_lines((*names, *(n for n, _ in drawn.auxiliary)))
    outputs, given = probe.total_loss_call(drawn, then=then)
    originals = dict(zip(names, case.tensors(), strict=True))
    originals.update(
        (n, torch.tensor(v, dtype=drawn.auxiliary_dtype, device=case.device))
        for n, v in drawn.auxiliary
    )
    problems = [
        f"modified the caller's {name}: {given[name].tolist()}, was {originals[name].tolist()}"
        for name in originals
        if not _unchanged(originals[name], given[name])
    ]
    result_dtype = computation_dtype(case.dtype)
    for name, value in outputs.items() if isinstance(outputs, Mapping) else ():
        if not isinstance(value, torch.Tensor):
            continue  # total-loss-bundle says so
        if value.device.type != torch.device(case.device).type:
            problems.append(f"returned {name} on {value.device}, the inputs on {case.device}")
        if name in LOSS_NAMES and value.dtype != result_dtype:
            problems.append(
                f"returned {name} in {DTYPE_NAMES.get(value.dtype, value.dtype)}, expected "
                f"{DTYPE_NAMES[result_dtype]} for {DTYPE_NAMES[case.dtype]} inputs"
            )
    if problems:
        # what went wrong leads, so that a cause's line, which keeps its start, names it
        raise _violation(
            f"{COMPUTE_TOTAL_LOSS} " + "; ".join(problems) + " (it must leave its inputs as "
            "they were and return the reconstruction entries in float32 or better, the "
            "inputs' dtype from float32 up, on the inputs' device)",
            case,
            "contract",
        )


# --- total-loss-gradient -------------------------------------------------------------------


def check_gradient(probe: ApiProbe, drawn: TotalLossCase) -> None:
    case = drawn.case
    assume_gradient_representable(case)
    outputs, given = probe.total_loss_call(drawn, gradients=True)
    total = outputs.get(TOTAL_LOSS) if isinstance(outputs, Mapping) else None
    if not isinstance(total, torch.Tensor) or total.dim() != 0:
        raise _violation(
            f"cannot differentiate: {TOTAL_LOSS} is not a 0-dim tensor (total-loss-bundle says "
            "more)",
            case,
            TOTAL_LOSS,
        )
    names = [n for n in given if n != "mask"]
    grads: tuple[torch.Tensor | None, ...] = (None,) * len(names)
    if total.requires_grad:
        grads = torch.autograd.grad(total, [given[n] for n in names], allow_unused=True)
    found = dict(zip(names, grads, strict=True))
    leak = found.pop("zfree_token_nll")
    if leak is not None and bool((leak != 0).any()):
        raise _violation(
            f"{TOTAL_LOSS} carries a gradient to zfree_token_nll ({leak.tolist()}): every "
            "weight built from it is detached",
            case,
            "zfree gradient",
        )
    token = found.pop("token_nll")
    reference = torch.tensor(expected(case).token_gradient, dtype=torch.float64)
    assert_tensor_close(
        torch.zeros_like(reference) if token is None else token,
        reference,
        gradient_tolerance(case.dtype, length=case.shape[1], alpha=case.config.token_weight_alpha),
        what=f"d{TOTAL_LOSS}/dtoken_nll = dJ/dl (MATH.md, Gradients)",
        case=case,
        failing=(TOTAL_LOSS, *implicated(TOTAL_NAME, case)),  # its gradient in l is J's
    )
    weights = drawn.effective()
    tolerance = weight_gradient_tolerance(drawn.auxiliary_dtype)
    wrong = []
    for name, grad in found.items():
        observed = 0.0 if grad is None else float(grad)
        if not tolerance.allows(observed, weights[name], weights[name]):
            wrong.append(
                f"d{TOTAL_LOSS}/d{name} is {observed:.9g}, its effective weight is "
                f"{weights[name]:g}"
            )
    if wrong:
        raise _violation(
            "the gradient of total_loss with respect to each given auxiliary term is its "
            f"effective weight ({_weights_of(drawn, list(found))}): " + "; ".join(wrong),
            case,
            TOTAL_LOSS,
        )


# --- total-loss-term-gradients ------------------------------------------------------------


def check_term_gradients(probe: ApiProbe, drawn: TotalLossMix) -> None:
    case, coefficients = drawn.total.case, dict(drawn.coefficients)
    # total_loss's gradient with respect to token_nll is J's: its coefficient adds to J's
    as_stack = {**coefficients, TOTAL_NAME: coefficients[TOTAL_NAME] + coefficients[TOTAL_LOSS]}
    reference, scale = expected_mix_gradient(case, as_stack)
    assume(representable(case, reference.numpy()) and scale < torch.finfo(case.dtype).max / 4)
    outputs, given = probe.total_loss_call(
        drawn.total, token_nll_requires_grad=True, then=mixed_gradient_lines(drawn.coefficients)
    )
    if not isinstance(outputs, Mapping):
        raise _violation(
            "cannot differentiate: no mapping returned (total-loss-bundle says more)",
            case,
            "bundle",
        )
    values = {name: outputs.get(name) for name in coefficients}
    unusable = [n for n, v in values.items() if not isinstance(v, torch.Tensor) or v.dim() != 0]
    if unusable:
        raise _violation(
            f"cannot differentiate {', '.join(unusable)}: not 0-dim tensors (total-loss-bundle "
            "says more)",
            case,
            *unusable,
        )
    detached = [name for name, value in values.items() if not value.requires_grad]
    if detached:
        raise _violation(
            f"{COMPUTE_TOTAL_LOSS} returns {', '.join(detached)} detached (no grad_fn although "
            "token_nll requires grad): each term, J and total_loss is "
            "differentiable (MATH.md, Gradients), since a trainer may build its loss from the "
            "terms and an ablation trains on one of them",
            case,
            *detached,
        )
    mix = sum(a * values[name] for name, a in drawn.coefficients)
    (grad,) = torch.autograd.grad(mix, given["token_nll"], allow_unused=True)
    assert_tensor_close(
        torch.zeros_like(reference) if grad is None else grad,
        reference,
        mixed_gradient_tolerance(
            case.dtype,
            length=case.shape[1],
            alpha=case.config.token_weight_alpha,
            outputs=len(coefficients),
        ),
        what=f"one backward of {COMPUTE_TOTAL_LOSS}'s {format_mix(drawn.coefficients)}: d/dl = "
        f"sum_k (a_k + (a_J + a_{TOTAL_LOSS}) w_k) dR_k/dl (MATH.md, Gradients; {TOTAL_LOSS}'s "
        "gradient in token_nll is J's)",
        case=case,
        scale=scale,
        failing=tuple(name for name, a in drawn.coefficients if a != 0) or (TOTAL_LOSS,),
    )


# --- named inputs --------------------------------------------------------------------------


def _named(name: str, why: str, case: LossCase, outer: dict, auxiliary: dict) -> NamedInput:
    return NamedInput(
        name, why, TotalLossCase(case, tuple(outer.items()), tuple(auxiliary.items()))
    )


_PLAIN = EDGE_CASES["single-token-rows"].case
_EVERY_TERM = {name: 0.5 + i for i, name in enumerate(AUXILIARY_NAMES)}
_EVERY_WEIGHT = {
    "beta": 0.5,
    "router_support_weight": 2.0,
    "posterior_entropy_weight": 3.0,
    "posterior_variance_weight": 0.25,
    "router_marginal_kl_to_prior_weight": 1.5,
    "router_supervision_weight": 4.0,
    "inter_latent_divergence_weight": 0.125,
}
EXAMPLES = (
    _named(
        "every-term",
        "every auxiliary term given, each with a weight of its own: a crossed weight shows",
        EDGE_CASES["nan-padding"].case,
        _EVERY_WEIGHT,
        _EVERY_TERM,
    ),
    _named(
        "router-support-switched-off",
        "router_support given with a non-zero weight but the switch off: it must not count",
        _PLAIN,
        {ROUTER_SUPPORT_SWITCH: False},
        {"kl": 1.0, "router_support": 1.0},
    ),
    _named(
        "plain-vae",
        "a model without a router leaves router_support out with the switch off",
        _PLAIN,
        {ROUTER_SUPPORT_SWITCH: False, "beta": 0.5},
        {"kl": 0.25},
    ),
    _named(
        "zero-weights",
        "every weight 0: every term is still returned, and nothing need be given",
        EDGE_CASES["empty-row"].case.with_config(**dict.fromkeys(WEIGHT_FIELDS, 0.0)),
        {"beta": 0.0, "router_support_weight": 0.0},
        {},
    ),
)

INVARIANTS = (
    ApiInvariant(
        id="total-loss-bundle",
        group="total-loss",
        statement="returns every reconstruction output and total_loss as 0-dim tensors whatever "
        "the weights, every given auxiliary term, no token_weight_alpha, nothing else",
        spec_refs=TOTAL_REFS,
        strategy=lambda domain: total_loss_cases(domain),
        check=check_bundle,
        needs=NEEDS,
        examples=EXAMPLES,
    ),
    ApiInvariant(
        id="total-loss-reconstruction",
        group="total-loss",
        statement="the reconstruction entries equal the spec's oracle for "
        "config.reconstruction, within the dtype's tolerance",
        spec_refs=(OUTPUTS_SECTION, *TOTAL_REFS),
        strategy=lambda domain: total_loss_cases(domain),
        check=check_reconstruction,
        needs=NEEDS,
        examples=EXAMPLES[:1],
    ),
    ApiInvariant(
        id="total-loss-weighted-sum",
        group="total-loss",
        statement="total_loss = J + beta*kl + [enable_router_support_loss]*w_rs*router_support "
        "+ ... over the given terms; terms of effective weight 0 may be left out",
        spec_refs=TOTAL_REFS,
        strategy=lambda domain: total_loss_cases(domain),
        check=check_weighted_sum,
        needs=NEEDS,
        examples=EXAMPLES,
    ),
    ApiInvariant(
        id="total-loss-contract",
        group="total-loss",
        statement="the caller's tensors are left unchanged; the reconstruction entries are "
        "float32 or better (the inputs' dtype from float32 up), on the inputs' device",
        spec_refs=("MATH.md#contract-of-an-implementation", *TOTAL_REFS),
        strategy=lambda domain: total_loss_cases(domain),
        check=check_contract,
        needs=NEEDS,
        examples=EXAMPLES[:1],
    ),
    ApiInvariant(
        id="total-loss-gradient",
        group="total-loss",
        statement="d total_loss/d token_nll is J's closed form, d total_loss/d a_k each given "
        "term's effective weight; nothing flows to zfree_token_nll",
        spec_refs=("MATH.md#gradients", *TOTAL_REFS),
        strategy=lambda domain: total_loss_cases(domain),
        check=check_gradient,
        needs=NEEDS,
        examples=EXAMPLES,
    ),
    ApiInvariant(
        id="total-loss-term-gradients",
        group="total-loss",
        statement="each returned term, J and total_loss is differentiable in token_nll, and "
        "one backward of any mix of them gives the same mix of the closed forms",
        spec_refs=("MATH.md#gradients", *TOTAL_REFS),
        strategy=lambda domain: total_loss_mixes(domain),
        check=check_term_gradients,
        needs=NEEDS,
        examples=tuple(
            NamedInput(
                named.name,
                named.why,
                TotalLossMix(named.value, alternating_coefficients(MIXED_ENTRIES)),
            )
            for named in EXAMPLES[:1]
        ),
    ),
    ApiInvariant(
        id="total-loss-missing-term",
        group="total-loss",
        statement="a term whose effective weight is not 0 and that is not given is a "
        "ValueError naming it, never a silent 0",
        spec_refs=TOTAL_REFS,
        strategy=lambda domain: missing_terms(domain),
        check=check_requires_weighted_terms,
        needs=NEEDS,
        examples=(
            NamedInput(
                "default-config-without-router",
                f"the default {DISENTANGLEMENT_CONFIG} weighs router_support by 1: a plain VAE "
                "that passes only kl must hear about it",
                MissingTerm(TotalLossCase(_PLAIN, (), (("kl", 1.0),)), "router_support"),
            ),
        ),
    ),
)

__all__ = ["INVARIANTS", "expected_total", "literal"]
