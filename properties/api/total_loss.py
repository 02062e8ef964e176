"""``compute_total_loss`` (seed 001, "Returned scalar losses and diagnostics"; API.md,
"compute_total_loss"): the bundle, its reconstruction values, the weighted total, and the
terms that must be given."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from properties.api.invariant import ApiInvariant
from properties.api.probe import ApiProbe, literal, short
from properties.api.strategies import (
    MissingTerm,
    TotalLossCase,
    missing_terms,
    total_loss_cases,
)
from properties.assertions import assert_values_close
from properties.cases import DTYPE_NAMES, LossCase
from properties.invariant import InvariantViolation, NamedInput
from properties.invariants.edge_cases import EDGE_CASES
from properties.oracle import expected
from properties.tolerances import case_tolerance, weighted_sum_tolerance
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
from spec.terms import LOSS_NAMES, TOTAL_NAME, WEIGHT_FIELDS

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
            f"{COMPUTE_TOTAL_LOSS} returns the eight names, every given auxiliary term and "
            f"{TOTAL_LOSS} as 0-dim tensors, and nothing else: " + "; ".join(problems),
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
        named = [n for n in left_out if n in str(error)] or left_out
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
        if drawn.missing not in str(error):
            raise _violation(
                f"leaving out {drawn.missing} (effective weight {weight:g}) raised a ValueError "
                f"that does not name it: {short(str(error))}",
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
        statement="returns the eight names and total_loss as 0-dim tensors whatever the "
        "weights, every given auxiliary term, no token_weight_alpha, nothing else",
        spec_refs=TOTAL_REFS,
        strategy=lambda domain: total_loss_cases(domain),
        check=check_bundle,
        needs=NEEDS,
        examples=EXAMPLES,
    ),
    ApiInvariant(
        id="total-loss-reconstruction",
        group="total-loss",
        statement="the eight reconstruction entries equal the spec's oracle for "
        "config.reconstruction, within the dtype's tolerance",
        spec_refs=("MATH.md#the-five-terms-the-two-diagnostics-and-the-total", *TOTAL_REFS),
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
