"""The API surface of seed 001 (``docs/seeds/001_9a4d82d3f13617f7.txt``), as data.

The seed specifies more than the math of the stack: two frozen config dataclasses (their
fields, in its order, with its defaults, ``reconstruction`` nested in the second), the
trainer flags and the removal of the old boolean (a hard migration), and what
``compute_total_loss`` returns. docs/API.md states the rules; this module
holds the facts the conformance suite checks an API module against
(``recon-spec check-api``). The weight fields and flags come from the term registry
(``spec/terms.py``), the three parameter fields from the parameter registry
(``spec/parameters.py``); everything else is written here once.

Example:
    >>> [f.name for f in RECONSTRUCTION_FIELDS][:2]
    ['raw_weight', 'distribution_normalized_weight']
    >>> FLAGS["--token-weighted-reconstruction-alpha"]
    'token_weight_alpha'
    >>> effective_weights({"beta": 0.5, "router_support_weight": 2.0,
    ...                    "enable_router_support_loss": False})["router_support"]
    0.0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from spec.parameters import ALPHA, PARAMETERS, WEIGHT_RULE
from spec.terms import DIST, LOSS_NAMES, RAW, TERMS

#: the five public names an API module exposes (recon_impl's), in the seed's order of topics
RECONSTRUCTION_CONFIG = "ReconstructionLossConfig"
DISENTANGLEMENT_CONFIG = "DisentanglementLossConfig"
ADD_ARGUMENTS = "add_reconstruction_loss_arguments"
CONFIG_FROM_ARGS = "reconstruction_loss_config_from_args"
COMPUTE_TOTAL_LOSS = "compute_total_loss"
PUBLIC_NAMES: tuple[str, ...] = (
    RECONSTRUCTION_CONFIG,
    DISENTANGLEMENT_CONFIG,
    ADD_ARGUMENTS,
    CONFIG_FROM_ARGS,
    COMPUTE_TOTAL_LOSS,
)

#: recon_impl's logits helper, beyond the seed: checked only when asked for (``check-api
#: --with-logits``), as a module that computes token NLL its own way need not have it
TOKEN_NLL_FROM_LOGITS = "token_nll_from_logits"
#: its defaults: Hugging Face's padding label, and no causal-LM shift
DEFAULT_IGNORE_INDEX = -100
DEFAULT_SHIFT = False

#: what a field's value must be (MATH.md, "Errors"): a real number >= 0, a real number > 0,
#: a bool, or the nested ``ReconstructionLossConfig``
Rule = Literal["non-negative", "positive", "bool", "nested"]


@dataclass(frozen=True)
class ConfigField:
    """One field of a config dataclass, as the seed declares it."""

    name: str
    #: the seed's default (None for ``reconstruction``: a default ``ReconstructionLossConfig``)
    default: float | bool | None
    rule: Rule
    #: what it is, in the seed's words ("Meaning of the config fields")
    summary: str
    #: the trainer flag that sets it (seed, "CLI surface"); None where there is none
    flag: str | None = None


#: the weight defaults, in the order of the terms: the seed's raw_weight = 1.0, the rest 0
_WEIGHT_DEFAULTS = {RAW.name: 1.0}

RECONSTRUCTION_FIELDS: tuple[ConfigField, ...] = (
    *(
        ConfigField(
            term.weight_field,  # type: ignore[arg-type]
            _WEIGHT_DEFAULTS.get(term.name, 0.0),
            WEIGHT_RULE,
            f"coefficient on {term.name}",
            term.flag,
        )
        for term in TERMS
    ),
    *(
        ConfigField(p.field, p.default, p.rule, p.summary, p.flag)
        for p in PARAMETERS  # the parameter registry's
    ),
)

#: the nested field of ``DisentanglementLossConfig``
NESTED_FIELD = "reconstruction"
#: the switch of the router-support term
ROUTER_SUPPORT_SWITCH = "enable_router_support_loss"

DISENTANGLEMENT_FIELDS: tuple[ConfigField, ...] = (
    ConfigField(
        NESTED_FIELD,
        None,
        "nested",
        "the nested ReconstructionLossConfig (default: a default instance)",
    ),
    ConfigField("beta", 1.0, "non-negative", "weight on kl"),
    ConfigField(
        "router_support_weight",
        1.0,
        "non-negative",
        "weight on router_support, while enable_router_support_loss",
    ),
    ConfigField("posterior_entropy_weight", 0.0, "non-negative", "weight on posterior_entropy"),
    ConfigField("posterior_variance_weight", 0.0, "non-negative", "weight on posterior_variance"),
    ConfigField(
        "router_marginal_kl_to_prior_weight",
        0.0,
        "non-negative",
        "weight on router_marginal_kl_to_prior",
    ),
    ConfigField("router_supervision_weight", 0.0, "non-negative", "weight on router_supervision"),
    ConfigField(ROUTER_SUPPORT_SWITCH, True, "bool", "the switch of router_support"),
    ConfigField(
        "inter_latent_divergence_weight",
        0.0,
        "non-negative",
        "weight on inter_latent_divergence",
    ),
)

#: class name -> its fields, in the seed's order
CONFIG_CLASSES: dict[str, tuple[ConfigField, ...]] = {
    RECONSTRUCTION_CONFIG: RECONSTRUCTION_FIELDS,
    DISENTANGLEMENT_CONFIG: DISENTANGLEMENT_FIELDS,
}
RECONSTRUCTION_DEFAULTS: dict[str, float] = {f.name: f.default for f in RECONSTRUCTION_FIELDS}  # type: ignore[misc]


@dataclass(frozen=True)
class AuxiliaryTerm:
    """An auxiliary term of ``total_loss``: the model computes it, the API weighs it."""

    name: str
    #: the ``DisentanglementLossConfig`` field of its weight
    weight_field: str
    #: a bool field that must be true for the term to count (None: it always counts)
    switch: str | None = None


#: in the order of their weights in ``DisentanglementLossConfig``
AUXILIARY_TERMS: tuple[AuxiliaryTerm, ...] = (
    AuxiliaryTerm("kl", "beta"),
    AuxiliaryTerm("router_support", "router_support_weight", ROUTER_SUPPORT_SWITCH),
    AuxiliaryTerm("posterior_entropy", "posterior_entropy_weight"),
    AuxiliaryTerm("posterior_variance", "posterior_variance_weight"),
    AuxiliaryTerm("router_marginal_kl_to_prior", "router_marginal_kl_to_prior_weight"),
    AuxiliaryTerm("router_supervision", "router_supervision_weight"),
    AuxiliaryTerm("inter_latent_divergence", "inter_latent_divergence_weight"),
)
AUXILIARY_NAMES: tuple[str, ...] = tuple(term.name for term in AUXILIARY_TERMS)
TOTAL_LOSS = "total_loss"
#: every name compute_total_loss may return: the eight, the auxiliary terms given, the total
BUNDLE_NAMES: tuple[str, ...] = (*LOSS_NAMES, *AUXILIARY_NAMES, TOTAL_LOSS)
#: run metadata (the config's dict), never a bundle entry (seed, "Returned scalar losses")
METADATA_ONLY: tuple[str, ...] = (ALPHA.field,)


def effective_weights(values: Mapping[str, Any]) -> dict[str, float]:
    """The weight each auxiliary term enters ``total_loss`` with, from the
    ``DisentanglementLossConfig`` field values (missing fields take the seed's defaults):
    ``router_support``'s is 0 unless ``enable_router_support_loss``."""
    defaults = {f.name: f.default for f in DISENTANGLEMENT_FIELDS}
    value = {**defaults, **values}
    return {
        term.name: float(value[term.weight_field])
        if term.switch is None or value[term.switch]
        else 0.0
        for term in AUXILIARY_TERMS
    }


#: the trainer flags -> the ReconstructionLossConfig field each sets, in the seed's order
FLAGS: dict[str, str] = {f.flag: f.name for f in RECONSTRUCTION_FIELDS if f.flag is not None}
#: the old boolean the redesign removes (seed, "CLI surface", "Migration stance") ...
REMOVED_FLAG = "--normalize-reconstruction-loss"
#: ... and the flag whose direct scalar weight replaces it
REPLACEMENT_FLAG: str = DIST.flag  # type: ignore[assignment]
#: config fields of the old API that a hard migration leaves no shim for: the boolean, and
#: the old name of the single token-level weight (now token_weighted_weight, the raw term)
LEGACY_FIELDS: tuple[str, ...] = (
    "normalize_reconstruction_loss",
    "token_weighted_reconstruction_weight",
)
#: what the removed flag would leave in a parsed namespace
LEGACY_NAMESPACE_KEYS: tuple[str, ...] = ("normalize_reconstruction_loss",)
