"""Configurations shared by the implementation tests, their fields from recon_impl's term
table (``recon_impl.terms``, checked equal to the spec's registries in test_term_table)."""

from __future__ import annotations

import itertools

from recon_impl import ReconstructionLossConfig
from recon_impl.terms import PARAMETERS, TERMS

#: each term's name -> its weight's config field
TERM_WEIGHT_FIELDS: dict[str, str] = {term.name: term.weight_field for term in TERMS}
WEIGHT_FIELDS: tuple[str, ...] = tuple(TERM_WEIGHT_FIELDS.values())
#: the parameters' fields by rule: "non-negative" (alpha, epsilon) and "positive" (c)
NON_NEGATIVE_PARAMETERS: tuple[str, ...] = tuple(
    p.field for p in PARAMETERS if p.rule == "non-negative"
)
POSITIVE_PARAMETERS: tuple[str, ...] = tuple(p.field for p in PARAMETERS if p.rule == "positive")


#: every parameter off its default (and off alpha's special values 0, 0.5, 1, 2): a config
#: built on these exercises each parameter, one added later included, not its default alone
OFF_DEFAULT_PARAMETERS: dict[str, float] = {p.field: p.default * 1.7 + 0.05 for p in PARAMETERS}


def with_parameters(**values: float) -> dict[str, float]:
    """``OFF_DEFAULT_PARAMETERS`` with the parameters a test sets: a config's keywords."""
    return {**OFF_DEFAULT_PARAMETERS, **values}


def distinct_weights(values: tuple[float, ...]) -> dict[str, float]:
    """Each weight field of the table, in the terms' order, the next of ``values``: every
    term weighted, each by a weight of its own, so that a crossed weight shows. ``values``
    are distinct and non-zero, at least one per term (a ValueError says so otherwise)."""
    if len(set(values)) != len(values) or 0 in values or len(values) < len(WEIGHT_FIELDS):
        raise ValueError(
            f"values: {len(WEIGHT_FIELDS)} or more distinct non-zero weights, got {values}"
        )
    return dict(zip(WEIGHT_FIELDS, values, strict=False))


def cycled_weights(values: tuple[float, ...]) -> dict[str, float]:
    """Each weight field of the table the next of the non-zero ``values``, cycled: every
    term weighted, whatever the number of terms."""
    if not values or 0 in values:
        raise ValueError(f"values: one or more non-zero weights, got {values}")
    return dict(zip(WEIGHT_FIELDS, itertools.cycle(values), strict=False))


#: every term weighted, each weight different
EVERY_WEIGHT: dict[str, float] = distinct_weights((0.5, 0.25, 0.75, 1.5, 2.0, 1.25, 3.0, 0.125))

# Every term weighted, each weight different, alpha off the special values 0, 0.5, 1, 2.
EVERY_TERM_CONFIG = ReconstructionLossConfig(
    **EVERY_WEIGHT,
    **with_parameters(
        token_weight_alpha=1.3, example_inverse_surprisal_epsilon=0.1, zfree_reference_scale=3.0
    ),
)
