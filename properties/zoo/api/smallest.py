"""The smallest input that shows each mistake of the API zoo that a call on tensors shows.

A mistake of ``properties.zoo.api.correct.MISTAKES`` whose invariant calls
``compute_total_loss`` or ``token_nll_from_logits`` (``TENSOR_FUNCTIONS``) has a
``Smallest`` here, as each mistake of the stack has one (``properties.zoo.smallest``): an
input of the fewest cells (B x T of its stack input or of its labels) on which the invariant
rejects the API with that mistake on while the correct API passes, and why none of fewer
cells does. A config or flag mistake is shown without tensors: it has none.
``tests/properties/test_smallest_inputs.py`` checks each witness and that shrinking reaches
its size under several seeds; ``benchmarks/report_sizes.py`` checks each report's input.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from properties.api.logits import CORRUPTIONS, BadLogits, LogitsCase
from properties.api.strategies import (
    MIXED_ENTRIES,
    OUTER_DEFAULTS,
    MissingTerm,
    TotalLossCase,
    TotalLossMix,
)
from properties.cases import LossCase
from properties.zoo.smallest import ANY_INPUT, NAN, ONE_CELL, PADDED, Smallest, loss_case
from spec.api import (
    AUXILIARY_TERMS,
    COMPUTE_TOTAL_LOSS,
    ROUTER_SUPPORT_SWITCH,
    TOKEN_NLL_FROM_LOGITS,
)
from spec.terms import RAW

#: the public functions that take tensors: an invariant that needs one shows a tensor input
TENSOR_FUNCTIONS: tuple[str, ...] = (COMPUTE_TOTAL_LOSS, TOKEN_NLL_FROM_LOGITS)

#: the auxiliary terms by name
AUXILIARY = {term.name: term for term in AUXILIARY_TERMS}
ROUTER = AUXILIARY["router_support"]


def call(case: LossCase = ONE_CELL, *weighted: str, switched_off: bool = False) -> TotalLossCase:
    """``compute_total_loss`` on ``case``: the auxiliary terms ``weighted`` weighted 1 and
    given as 1, every other one weighted 0 (so that none is needed); the router-support
    switch off where ``switched_off``."""
    outer = {term.weight_field: 0.0 for term in AUXILIARY_TERMS}
    outer.update({AUXILIARY[name].weight_field: 1.0 for name in weighted})
    outer[ROUTER_SUPPORT_SWITCH] = not switched_off
    changed = tuple((n, v) for n, v in outer.items() if v != OUTER_DEFAULTS[n])
    return TotalLossCase(case, changed, tuple((name, 1.0) for name in weighted))


def _alone(entry: str) -> tuple[tuple[str, float], ...]:
    return tuple((name, 1.0 if name == entry else 0.0) for name in MIXED_ENTRIES)


def _logits(labels: list[list[int]], **fields: Any) -> LogitsCase:
    values = {"vocab": 2, "seed": 0, "spread": 1.0, "dtype": torch.float64, **fields}
    return LogitsCase(labels=tuple(map(tuple, labels)), **values)


#: mistake -> the smallest input that shows it
SMALLEST: dict[str, Smallest] = {
    "alpha-in-bundle": Smallest("total-loss-bundle", call(), ANY_INPUT),
    "per-example-diagnostics": Smallest("total-loss-bundle", call(), ANY_INPUT),
    "zero-weight-terms-dropped": Smallest(
        "total-loss-bundle",
        call(loss_case([[1.0]], [[0.0]], [[True]], **{RAW.weight_field: 0.0})),
        ANY_INPUT,
    ),
    "default-reconstruction-config": Smallest("total-loss-reconstruction", call(), ANY_INPUT),
    "router-switch-ignored": Smallest(
        "total-loss-weighted-sum",
        call(ONE_CELL, ROUTER.name, switched_off=True),
        ANY_INPUT,
    ),
    "crossed-auxiliary-weights": Smallest(
        "total-loss-weighted-sum",
        call(ONE_CELL, "posterior_variance"),
        ANY_INPUT,
    ),
    "zero-weight-terms-required": Smallest(
        "total-loss-weighted-sum",
        replace(call(ONE_CELL, ROUTER.name, switched_off=True), auxiliary=()),
        ANY_INPUT,
    ),
    "inputs-modified": Smallest(
        "total-loss-contract",
        call(loss_case([[1.0, 0.0]], [[0.0, NAN]], [[True, False]])),
        PADDED,
    ),
    "float64-results": Smallest(
        "total-loss-contract",
        call(loss_case([[1.0]], [[0.0]], [[True]], torch.float32)),
        ANY_INPUT,
    ),
    "auxiliary-terms-detached": Smallest(
        "total-loss-gradient",
        call(ONE_CELL, "inter_latent_divergence"),
        ANY_INPUT,
    ),
    "terms-detached": Smallest(
        "total-loss-term-gradients", TotalLossMix(call(), _alone(RAW.name)), ANY_INPUT
    ),
    "terms-on-total-graph": Smallest(
        "total-loss-term-gradients", TotalLossMix(call(), _alone(RAW.name)), ANY_INPUT
    ),
    "missing-term-as-zero": Smallest(
        "total-loss-missing-term",
        MissingTerm(replace(call(ONE_CELL, "kl"), auxiliary=()), "kl"),
        ANY_INPUT,
    ),
    "missing-kl-misnamed": Smallest(
        "total-loss-missing-term",
        MissingTerm(replace(call(ONE_CELL, "kl"), auxiliary=()), "kl"),
        ANY_INPUT,
    ),
    "logits-wrapped-labels": Smallest(
        "logits-token-nll",
        _logits([[156]], vocab=200, label_dtype=torch.uint8),
        "one label, 156, the class that -100 is in uint8 (a vocabulary past 156)",
    ),
    "logits-half-losses": Smallest(
        "logits-token-nll",
        _logits([[]], dtype=torch.bfloat16),
        "no position at all: the dtype of an empty result shows it",
    ),
    "logits-labels-clamped": Smallest(
        "logits-rejects-invalid",
        BadLogits(next(iter(CORRUPTIONS)), _logits([[0]])),
        "one label, set out of range",
    ),
}

__all__ = ["SMALLEST", "TENSOR_FUNCTIONS"]
