r"""The term registry: one declarative record per output of the stack.

Like an OpInfo entry, each ``Output`` says everything the rest of the project needs to know
about one returned name: its symbol, what it measures, its definition as a per-example
contribution (the output is the mean of it over the kept examples), and, for the five
terms, its weight (symbol, config field, trainer flag) and its place in seed 000's generic
family :math:`L[\pi, \omega, C] = \frac{1}{C}\operatorname{mean}_i \omega_i \sum_t \pi_{it}
l_{it}`, plus the known wrong variants a failure report can name.

Everything derives from ``OUTPUTS``: the definitions of ``spec.definitions`` (``loss_terms``,
``total_loss``, the closed form of the gradient), the generic family, the oracle, the
document (``docs/SPEC.md``), and in the conformance suite the strategies' weight fields, the
diagnosis, the invariants and the reports. ``recon_impl`` keeps its own copy of the names
(training code imports nothing of the spec); a test checks that they agree.

Adding a term is a record here (and, being a new output, its computation in ``recon_impl``
and in the suite's reference implementations).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import sympy as sp

from spec.parameters import PARAMETER_DEFAULTS, PARAMETER_FIELDS
from spec.variants import Variant, VariantBatch, share_variants

#: ``contribution(example, params)``: x_i, with the output equal to mean_i x_i
Contribution = Callable[[Any, Any], sp.Expr]


@dataclass(frozen=True)
class Output:
    """One returned name of the stack (``kind``: a weighted ``term``, an approved
    ``diagnostic``, or the ``total``)."""

    name: str
    symbol: sp.Symbol
    latex: str
    kind: Literal["term", "diagnostic", "total"]
    #: what it measures, in the seed's words
    summary: str
    contribution: Contribution | None = None
    # --- the terms only ---------------------------------------------------------
    weight: sp.Symbol | None = None
    weight_latex: str = ""
    #: the ``ReconstructionLossConfig`` field of the weight
    weight_field: str | None = None
    #: the trainer flag of the weight (seed 001, "CLI surface")
    flag: str | None = None
    #: pi: "uniform" (1/n_i) or "shares" (the tempered surprisal shares)
    policy: str | None = None
    #: omega_i(example, params) and its LaTeX
    omega: Contribution | None = None
    omega_latex: str = ""
    #: C(params) and its LaTeX
    scale: Callable[[Any], sp.Expr] | None = None
    scale_latex: str = ""
    # ---------------------------------------------------------------------------------
    variants: tuple[Variant, ...] = ()


def _one(example: Any, params: Any) -> sp.Expr:
    return sp.Integer(1)


def _unit(params: Any) -> sp.Expr:
    return sp.Integer(1)


def _ratio_of_means_ex(x: VariantBatch) -> float:
    return float(x.lbar.mean() / (x.bbar.mean() + x.epsilon))


def _token_level_ex(x: VariantBatch) -> float:
    per_token = np.where(x.m, x.l / (x.b + x.epsilon + (~x.m)), 0.0)
    return float(x.per_example_mean(per_token).mean())


def _lengths_from_first_row(x: VariantBatch) -> float:
    """Every example's sum over the first row's count of valid tokens (a packed batch)."""
    first = max(int(x.m[0].sum()), 1) if len(x.m) else 1
    return float((x.l.sum(1)[x.kept] / first).mean())


def _kappa_with_epsilon(x: VariantBatch) -> np.ndarray:
    """kappa over bbar + eps (the R_ex denominator) instead of bbar."""
    bbar = x.bbar
    return np.where(bbar > 0, x.btok(x.shares()) / (bbar + x.epsilon), 1.0)


def _global_token_mean(x: VariantBatch) -> float:
    return float(x.l.sum() / x.m.sum())


def _kappa_from_token_nll(x: VariantBatch) -> np.ndarray:
    """kappa built from l instead of b: ltok_i / lbar_i (1 where lbar_i = 0)."""
    ltok, lbar = x.ltok(x.shares()), x.lbar
    return np.where(lbar > 0, ltok / np.where(lbar > 0, lbar, 1.0), 1.0)


def _cc_of(x: VariantBatch, shares: np.ndarray) -> float:
    return float((x.ltok(shares) / x.kappa(shares)).mean() / x.c)


RAW = Output(
    "reconstruction_loss",
    sp.Symbol("R_raw"),
    r"R_{\mathrm{raw}}",
    "term",
    "the ordinary unnormalized reconstruction loss: each kept example's mean token NLL, "
    "averaged over the kept examples",
    contribution=lambda e, p: e.lbar,
    weight=sp.Symbol("w_raw", nonnegative=True),
    weight_latex=r"w_{\mathrm{raw}}",
    weight_field="raw_weight",
    flag="--raw-reconstruction-weight",
    policy="uniform",
    omega=_one,
    omega_latex="1",
    scale=_unit,
    scale_latex="1",
    variants=(
        Variant(
            "global-token-mean",
            "sum of l over all valid tokens / their count",
            _global_token_mean,
        ),
        Variant(
            "padding-counted",
            "each example's sum divided by T, not n_i",
            lambda x: float((x.l.sum(1)[x.kept] / x.m.shape[1]).mean()),
        ),
        Variant(
            "empty-rows-counted",
            "mean over all B examples, not the B' kept",
            lambda x: float(x.lbar.sum() / x.m.shape[0]),
        ),
        Variant(
            "lengths-from-first-row",
            "each example's sum over the first row's n, as if the batch were packed",
            _lengths_from_first_row,
        ),
    ),
)
DIST = Output(
    "distribution_normalized_reconstruction_loss",
    sp.Symbol("R_dist"),
    r"R_{\mathrm{dist}}",
    "term",
    "the distribution-level z-free-relative normalized reconstruction loss: R_raw over the "
    "fixed dataset-level z-free reference scale c",
    contribution=lambda e, p: e.lbar / p.c,
    weight=sp.Symbol("w_dist", nonnegative=True),
    weight_latex=r"w_{\mathrm{dist}}",
    weight_field="distribution_normalized_weight",
    flag="--distribution-normalized-reconstruction-weight",
    policy="uniform",
    omega=_one,
    omega_latex="1",
    scale=lambda p: p.c,
    scale_latex="c",
    variants=(
        Variant("scale-missing", "R_raw, not R_raw / c", lambda x: float(x.lbar.mean())),
        Variant("scale-multiplied", "R_raw * c", lambda x: float(x.lbar.mean() * x.c)),
        Variant("global-token-mean / c", "", lambda x: _global_token_mean(x) / x.c),
        Variant("lengths-from-first-row / c", "", lambda x: _lengths_from_first_row(x) / x.c),
    ),
)
EX = Output(
    "example_inverse_surprisal_weighted_reconstruction_loss",
    sp.Symbol("R_ex"),
    r"R_{\mathrm{ex}}",
    "term",
    "the example-level inverse-surprisal weighted reconstruction loss: each example's mean "
    "token NLL over its mean z-free NLL plus epsilon",
    contribution=lambda e, p: e.lbar / (e.bbar + p.epsilon),
    weight=sp.Symbol("w_ex", nonnegative=True),
    weight_latex=r"w_{\mathrm{ex}}",
    weight_field="example_inverse_surprisal_weight",
    flag="--example-inverse-surprisal-reconstruction-weight",
    policy="uniform",
    omega=lambda e, p: 1 / (e.bbar + p.epsilon),
    omega_latex=r"\frac{1}{\bar{b}_i + \varepsilon}",
    scale=_unit,
    scale_latex="1",
    variants=(
        Variant(
            "epsilon-as-floor",
            "lbar / max(bbar, eps)",
            lambda x: float((x.lbar / np.maximum(x.bbar, x.epsilon)).mean()),
        ),
        Variant("epsilon-missing", "lbar / bbar", lambda x: float((x.lbar / x.bbar).mean())),
        Variant("ratio-of-means", "mean lbar / (mean bbar + eps)", _ratio_of_means_ex),
        Variant("token-level-ratio", "mean_t l_t / (b_t + eps)", _token_level_ex),
    ),
)
TOK = Output(
    "token_weighted_reconstruction_loss",
    sp.Symbol("R_tok"),
    r"R_{\mathrm{tok}}",
    "term",
    "the raw tempered token-level surprisal-share weighted reconstruction loss: the token "
    "NLL weighted by the shares pi of each example",
    contribution=lambda e, p: e.ltok,
    weight=sp.Symbol("w_tok", nonnegative=True),
    weight_latex=r"w_{\mathrm{tok}}",
    weight_field="token_weighted_weight",
    flag="--token-weighted-reconstruction-weight",
    policy="shares",
    omega=_one,
    omega_latex="1",
    scale=_unit,
    scale_latex="1",
    variants=(
        Variant("global-token-mean", "", _global_token_mean),
        *share_variants(lambda x, shares: float(x.ltok(shares).mean())),
    ),
)
CC = Output(
    "normalized_concentration_corrected_token_weighted_reconstruction_loss",
    sp.Symbol("R_cc"),
    r"R_{\mathrm{cc}}",
    "term",
    "the normalized concentration-corrected token-weighted reconstruction loss: R_tok's "
    "per-example values over their concentration factor kappa, over c",
    contribution=lambda e, p: e.ltok / (p.c * e.kappa),
    weight=sp.Symbol("w_cc", nonnegative=True),
    weight_latex=r"w_{\mathrm{cc}}",
    weight_field="normalized_concentration_corrected_token_weighted_weight",
    flag="--normalized-concentration-corrected-token-weighted-reconstruction-weight",
    policy="shares",
    omega=lambda e, p: 1 / e.kappa,
    omega_latex=r"\frac{1}{\kappa_i}",
    scale=lambda p: p.c,
    scale_latex="c",
    variants=(
        Variant(
            "kappa-missing",
            "mean ltok / c",
            lambda x: float(x.ltok(x.shares()).mean() / x.c),
        ),
        Variant(
            "scale-missing",
            "mean ltok / kappa",
            lambda x: float((x.ltok(x.shares()) / x.kappa(x.shares())).mean()),
        ),
        Variant(
            "kappa-multiplied",
            "mean ltok * kappa / c",
            lambda x: float((x.ltok(x.shares()) * x.kappa(x.shares())).mean() / x.c),
        ),
        Variant(
            "ratio-of-means",
            "mean ltok / mean kappa / c",
            lambda x: float(x.ltok(x.shares()).mean() / x.kappa(x.shares()).mean() / x.c),
        ),
        Variant(
            "kappa-with-epsilon",
            "kappa = btok / (bbar + eps)",
            lambda x: float((x.ltok(x.shares()) / _kappa_with_epsilon(x)).mean() / x.c),
        ),
        Variant(
            "kappa-from-token_nll",
            "kappa = ltok / lbar, from l instead of b",
            lambda x: float((x.ltok(x.shares()) / _kappa_from_token_nll(x)).mean() / x.c),
        ),
        *share_variants(_cc_of),
    ),
)
BTOK = Output(
    "token_weighted_base_loss",
    sp.Symbol("Bbase"),
    r"\operatorname{mean}_i b^{\mathrm{tok}}_i",
    "diagnostic",
    "batch mean of the token-weighted z-free baseline value",
    contribution=lambda e, p: e.btok,
    variants=share_variants(lambda x, shares: float(x.btok(shares).mean())),
)
KAPPA = Output(
    "token_concentration_factor",
    sp.Symbol("Kmean"),
    r"\operatorname{mean}_i \kappa_i",
    "diagnostic",
    "batch mean of the token concentration factor kappa",
    contribution=lambda e, p: e.kappa,
    variants=(
        Variant(
            "ratio-of-means",
            "mean btok / mean bbar",
            lambda x: float(x.btok(x.shares()).mean() / x.bbar.mean()),
        ),
        Variant(
            "empty-rows-counted",
            "sum of kappa / B",
            lambda x: float(x.kappa(x.shares()).sum() / x.m.shape[0]),
        ),
        Variant(
            "kappa-with-epsilon",
            "btok / (bbar + eps)",
            lambda x: float(_kappa_with_epsilon(x).mean()),
        ),
        Variant(
            "kappa-from-token_nll",
            "ltok / lbar, from l instead of b",
            lambda x: float(_kappa_from_token_nll(x).mean()),
        ),
        *share_variants(lambda x, shares: float(x.kappa(shares).mean())),
    ),
)
TOTAL = Output(
    "total_reconstruction_loss",
    sp.Symbol("J"),
    "J",
    "total",
    "the weighted sum of the terms, the reconstruction loss to backpropagate; it sums"
    " only the terms whose weight is non-zero, so a zero-weighted term adds nothing to its"
    " value or gradient even where that term overflows (0 · inf counts as 0)",
)

#: the MATH.md section that defines the outputs; its heading counts the terms, so a new term
#: renames it here, and every reference to it follows
OUTPUTS_SECTION = "MATH.md#the-five-terms-the-two-diagnostics-and-the-total"

#: every output, in MATH.md order: the terms, the two diagnostics, the total
OUTPUTS: tuple[Output, ...] = (RAW, DIST, EX, TOK, CC, BTOK, KAPPA, TOTAL)
TERMS: tuple[Output, ...] = tuple(o for o in OUTPUTS if o.kind == "term")
DIAGNOSTICS: tuple[Output, ...] = tuple(o for o in OUTPUTS if o.kind == "diagnostic")
BY_NAME: dict[str, Output] = {o.name: o for o in OUTPUTS}

TERM_NAMES: tuple[str, ...] = tuple(o.name for o in TERMS)
DIAGNOSTIC_NAMES: tuple[str, ...] = tuple(o.name for o in DIAGNOSTICS)
TOTAL_NAME: str = TOTAL.name
LOSS_NAMES: tuple[str, ...] = tuple(o.name for o in OUTPUTS)
#: the config fields of the weights, in the order of the terms
WEIGHT_FIELDS: tuple[str, ...] = tuple(o.weight_field for o in TERMS)  # type: ignore[misc]


def distinct_weights(values: tuple[float, ...]) -> dict[str, float]:
    """Each weight field of the registry, in the terms' order, the next of ``values``: every
    term weighted, each by a weight of its own, so that a crossed weight shows. ``values``
    are distinct and non-zero, at least one per term (a ValueError says so otherwise)."""
    if len(set(values)) != len(values) or 0 in values or len(values) < len(WEIGHT_FIELDS):
        raise ValueError(
            f"values: {len(WEIGHT_FIELDS)} or more distinct non-zero weights, got {values}"
        )
    return dict(zip(WEIGHT_FIELDS, values, strict=False))


def config_mapping(**values: float) -> dict[str, float]:
    """A config for the oracle as a mapping: every weight field of the term registry, 0
    unless given, then every parameter of the parameter registry (``spec.parameters``), its
    default unless given (a ValueError names any key that is neither).

    Example:
        >>> config_mapping(token_weighted_weight=1.0, token_weight_alpha=2.0,
        ...                zfree_reference_scale=1.5)
        ... # doctest: +ELLIPSIS
        {'raw_weight': 0.0, ..., 'token_weighted_weight': 1.0, ..., 'zfree_reference_scale': 1.5...}
    """
    unknown = sorted(set(values) - set(WEIGHT_FIELDS) - set(PARAMETER_FIELDS))
    if unknown:
        raise ValueError(
            f"not weight fields of the term registry nor parameters: {', '.join(unknown)}"
        )
    return {
        **{field: values.get(field, 0.0) for field in WEIGHT_FIELDS},
        **{field: values.get(field, PARAMETER_DEFAULTS[field]) for field in PARAMETER_FIELDS},
    }


#: the LaTeX of every symbol the registry defines (``spec.symbols.latex`` uses it)
LATEX: dict[sp.Symbol, str] = {
    **{o.symbol: o.latex for o in OUTPUTS},
    **{o.weight: o.weight_latex for o in TERMS if o.weight is not None},
}
