r"""The one table of the stack's vocabulary: its terms, parameters, diagnostics and total.

Everything else derives from it: the ``ReconstructionLossConfig`` fields, their defaults
and validation, the trainer flags and their help, the output names and
``ReconstructionLosses``, the stack's weights, values and gradient (``recon_impl.stack``).

A term is linear in l for fixed b. Its value is :math:`R = \frac{1}{C} \operatorname{mean}_i
x_i / d_i` over the kept examples, where :math:`x_i` is the per-example statistic its
gradient ``kind`` names, :math:`d_i` its optional per-example divisor and :math:`C` its
scalar divisor (a parameter such as c, or 1):

* ``"per-example"``: :math:`x_i = \bar l_i`, so :math:`\partial R/\partial l_{it} =
  1/(C d_i B' n_i)` (raw, dist, ex);
* ``"share-weighted"``: :math:`x_i = \ell^\mathrm{tok}_i = \sum_t \pi_{it} l_{it}`, so
  :math:`\partial R/\partial l_{it} = \pi_{it}/(C d_i B')` (tok, cc);
* ``"per-token"``: :math:`x_i = \sum_t k_{it} l_{it}` with a ``[B, T]`` coefficient
  :math:`k` built from b (``token_coefficient``), so :math:`\partial R/\partial l_{it} =
  k_{it}/(C d_i B')` (an l/(b + eps) weighting, say; no term of the design uses it).

The divisor :math:`d_i` is an ``ExampleDivisor``: computed from the per-example statistics
(``compute``: bbar + eps, kappa) or, for a statistic of b they do not hold, from the masked
b itself (``from_tokens``). A term is its record here, with any ``Parameter`` it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple

import torch
from torch import Tensor

if TYPE_CHECKING:  # the stack's records; imported for the type hints only (no cycle)
    from recon_impl.stack import Plan
    from recon_impl.statistics import Statistics

GradientKind = Literal["per-example", "share-weighted", "per-token"]
Rule = Literal["non-negative", "positive"]


@dataclass(frozen=True)
class ExampleDivisor:
    """A per-example divisor :math:`d_i` of a term, finite and non-zero on every row (a
    dropped row's included, so that the gradient's coefficients stay finite there)."""

    name: str
    #: d_i from the statistics stage's per-example vectors (``Statistics``) and the plan
    compute: Callable[[Statistics, Plan], Tensor] | None = None
    #: or from the masked b (0 at padded positions), the bool mask, max(n_i, 1) and the
    #: plan: a statistic of b that ``Statistics`` does not hold (its maximum, say)
    from_tokens: Callable[[Tensor, Tensor, Tensor, Plan], Tensor] | None = None


@dataclass(frozen=True)
class Term:
    """One weighted term of the stack: its output, its weight, how it is computed."""

    name: str
    #: the LaTeX subscript of its weight and value (``w_raw``, ``R_raw``)
    symbol: str
    weight_field: str
    flag: str
    #: the flag's help, what the weight weighs
    help: str
    default: float
    kind: GradientKind
    #: the field of the parameter C the mean is divided by; None for C = 1
    scale_field: str | None = None
    divisor: ExampleDivisor | None = None
    #: the ``[B, T]`` coefficient k of a "per-token" term, from the masked b (0 at padded
    #: positions, in the compute dtype), the bool mask, the per-example counts max(n_i, 1)
    #: and the plan; finite everywhere (padded positions included); None for other kinds
    token_coefficient: Callable[[Tensor, Tensor, Tensor, Plan], Tensor] | None = None


@dataclass(frozen=True)
class Parameter:
    """One parameter of the stack (a config field that is not a weight)."""

    field: str
    #: its trainer flag among ``RECONSTRUCTION_FLAGS``; None where the design gives none
    flag: str | None
    default: float
    rule: Rule
    #: the flag's help (None without a flag) and the config docstring's line
    help: str | None
    doc: str


@dataclass(frozen=True)
class Diagnostic:
    """An approved diagnostic: the mean over kept examples of a per-example statistic
    (an attribute of ``recon_impl.statistics.Statistics``); it carries no gradient."""

    name: str
    statistic: str


def _inverse_surprisal(stats: Statistics, plan: Plan) -> Tensor:
    epsilon = plan.parameters["example_inverse_surprisal_epsilon"]
    return torch.where(stats.kept, stats.b_mean + epsilon, 1.0)  # 1 on a dropped row


INVERSE_SURPRISAL = ExampleDivisor("bbar + epsilon", _inverse_surprisal)
CONCENTRATION = ExampleDivisor("kappa", lambda stats, plan: stats.kappa)

TERMS: tuple[Term, ...] = (
    Term(
        "reconstruction_loss",
        "raw",
        "raw_weight",
        "--raw-reconstruction-weight",
        "weight on reconstruction_loss, the raw per-example-mean token NLL",
        1.0,
        "per-example",
    ),
    Term(
        "distribution_normalized_reconstruction_loss",
        "dist",
        "distribution_normalized_weight",
        "--distribution-normalized-reconstruction-weight",
        "weight on distribution_normalized_reconstruction_loss, the raw loss divided by "
        "the dataset-level z-free reference scale",
        0.0,
        "per-example",
        scale_field="zfree_reference_scale",
    ),
    Term(
        "example_inverse_surprisal_weighted_reconstruction_loss",
        "ex",
        "example_inverse_surprisal_weight",
        "--example-inverse-surprisal-reconstruction-weight",
        "weight on example_inverse_surprisal_weighted_reconstruction_loss, each example's "
        "loss divided by its mean z-free loss plus epsilon",
        0.0,
        "per-example",
        divisor=INVERSE_SURPRISAL,
    ),
    Term(
        "token_weighted_reconstruction_loss",
        "tok",
        "token_weighted_weight",
        "--token-weighted-reconstruction-weight",
        "weight on token_weighted_reconstruction_loss, the token NLL weighted by tempered "
        "z-free surprisal shares",
        0.0,
        "share-weighted",
    ),
    Term(
        "normalized_concentration_corrected_token_weighted_reconstruction_loss",
        "cc",
        "normalized_concentration_corrected_token_weighted_weight",
        "--normalized-concentration-corrected-token-weighted-reconstruction-weight",
        "weight on normalized_concentration_corrected_token_weighted_reconstruction_loss, "
        "the token-weighted loss divided by its concentration factor and the reference scale",
        0.0,
        "share-weighted",
        scale_field="zfree_reference_scale",
        divisor=CONCENTRATION,
    ),
)

PARAMETERS: tuple[Parameter, ...] = (
    Parameter(
        "token_weight_alpha",
        "--token-weighted-reconstruction-alpha",
        1.0,
        "non-negative",
        "tempering exponent alpha >= 0 of both token-weighted terms (0: uniform shares, "
        "1: linear surprisal shares)",
        "alpha >= 0, the tempering exponent of both token-level terms "
        "(0: uniform shares, 1: linear surprisal shares).",
    ),
    Parameter(
        "example_inverse_surprisal_epsilon",
        "--example-inverse-surprisal-epsilon",
        1e-8,
        "non-negative",
        "stabilizer epsilon >= 0 added to each example's mean z-free loss in the "
        "inverse-surprisal term",
        "epsilon >= 0, the stabilizer in ``lbar_i / (bbar_i + epsilon)``.",
    ),
    Parameter(
        "zfree_reference_scale",
        None,
        1.0,
        "positive",
        None,
        "c > 0, the fixed dataset-level z-free reference scale.",
    ),
)

DIAGNOSTICS: tuple[Diagnostic, ...] = (
    Diagnostic("token_weighted_base_loss", "b_tok"),
    Diagnostic("token_concentration_factor", "kappa"),
)
TOTAL_NAME = "total_reconstruction_loss"

TERM_NAMES: tuple[str, ...] = tuple(term.name for term in TERMS)
DIAGNOSTIC_NAMES: tuple[str, ...] = tuple(d.name for d in DIAGNOSTICS)
PARAMETER_FIELDS: tuple[str, ...] = tuple(p.field for p in PARAMETERS)
#: every config field, in order: the weights, then the parameters
CONFIG_FIELDS: tuple[str, ...] = (*(t.weight_field for t in TERMS), *PARAMETER_FIELDS)
#: each config field -> its rule
RULES: dict[str, Rule] = {
    **{t.weight_field: "non-negative" for t in TERMS},
    **{p.field: p.rule for p in PARAMETERS},
}
DEFAULTS: dict[str, float] = {
    **{t.weight_field: t.default for t in TERMS},
    **{p.field: p.default for p in PARAMETERS},
}
#: flag -> (config field, its help): the terms' weights, then the parameters with a flag
FLAGS: dict[str, tuple[str, str]] = {
    **{t.flag: (t.weight_field, t.help) for t in TERMS},
    **{p.flag: (p.field, p.help) for p in PARAMETERS if p.flag and p.help},
}


def output_names(terms: Iterable[Term] = TERMS) -> tuple[str, ...]:
    """The stack's outputs for ``terms``, in order: the terms, the diagnostics, the total."""
    return (*(t.name for t in terms), *DIAGNOSTIC_NAMES, TOTAL_NAME)


class Row(NamedTuple):
    """A per-example vector of the reduction, x_i / d_i."""

    statistic: str  # the attribute of ``Statistics`` that holds x_i
    token: str | None  # the "per-token" term whose x_i it is (in ``token_sums``)
    divisor: str | None  # d_i's name, None for 1
    owner: str | None  # the output it is private to (one that is the mean itself), or None


class Output(NamedTuple):
    """A term or diagnostic of the reduction: the mean of ``row``, divided by C."""

    name: str
    row: Row
    scale_field: str | None  # the parameter C, None for 1


#: a part of the gradient: (kind, divisor or None, per-token term or None)
Group = tuple[GradientKind, str | None, str | None]


@dataclass(frozen=True)
class Layout:
    """What the stack derives from a term table, once per table (not per call)."""

    terms: tuple[Term, ...]
    names: tuple[str, ...]  # the outputs, in order
    divisors: tuple[ExampleDivisor, ...]  # the distinct d_i, in the terms' order
    state_rows: tuple[str, ...]  # the per-example vectors the backward keeps
    rows: tuple[Row, ...]  # the distinct x_i / d_i, stacked once
    outputs: tuple[Output, ...]  # each term and diagnostic
    #: the terms whose gradients add up before one division by a d_i: (name, C's field)
    groups: dict[Group, tuple[tuple[str, str | None], ...]]
    token_terms: tuple[Term, ...]  # the "per-token" terms, whose k the statistics stage builds
    token_divisors: tuple[ExampleDivisor, ...]  # the d_i the statistics stage builds from b


def layout_of(terms: tuple[Term, ...]) -> Layout:
    """The layout of ``terms`` (``LAYOUT``, computed at import, for the design's table)."""
    if terms is TERMS and "LAYOUT" in globals():
        return LAYOUT
    divisors = tuple({t.divisor.name: t.divisor for t in terms if t.divisor}.values())
    outputs: list[Output] = []
    groups: dict[Group, list[tuple[str, str | None]]] = {}
    for t in terms:
        if (t.kind == "per-token") != (t.token_coefficient is not None):
            raise ValueError(f"term {t.name}: a token_coefficient exactly for kind 'per-token'")
        if t.divisor and (t.divisor.compute is None) == (t.divisor.from_tokens is None):
            raise ValueError(f"term {t.name}: its divisor needs one of compute, from_tokens")
        statistic = {"per-example": "l_mean", "share-weighted": "l_tok"}.get(t.kind)
        token = t.name if statistic is None else None
        row = Row(statistic or "token_sums", token, t.divisor and t.divisor.name, None)
        if t.scale_field is None and any(o.row == row and not o.scale_field for o in outputs):
            row = row._replace(owner=t.name)  # an output that is the mean itself: not another's
        outputs.append(Output(t.name, row, t.scale_field))
        groups.setdefault((t.kind, row.divisor, token), []).append((t.name, t.scale_field))
    outputs += [Output(d.name, Row(d.statistic, None, None, None), None) for d in DIAGNOSTICS]
    return Layout(
        terms,
        output_names(terms),
        divisors,
        ("count", "share_sum", *(d.name for d in divisors)),
        tuple(dict.fromkeys(o.row for o in outputs)),
        tuple(outputs),
        {group: tuple(members) for group, members in groups.items()},
        tuple(t for t in terms if t.kind == "per-token"),
        tuple(d for d in divisors if d.from_tokens is not None),
    )


LOSS_NAMES: tuple[str, ...] = output_names(TERMS)
LAYOUT: Layout = layout_of(TERMS)
