"""Configurations shared by the implementation tests, their weights by the term registry."""

from __future__ import annotations

from recon_impl import ReconstructionLossConfig
from spec.terms import TERMS, distinct_weights

#: each term's name -> its weight's config field
TERM_WEIGHT_FIELDS: dict[str, str] = {term.name: term.weight_field for term in TERMS}  # type: ignore[misc]
WEIGHT_FIELDS: tuple[str, ...] = tuple(TERM_WEIGHT_FIELDS.values())
#: every term weighted, each weight different
EVERY_WEIGHT: dict[str, float] = distinct_weights((0.5, 0.25, 0.75, 1.5, 2.0, 1.25, 3.0, 0.125))

# Every term weighted, each weight different, alpha off the special values 0, 0.5, 1, 2.
EVERY_TERM_CONFIG = ReconstructionLossConfig(
    **EVERY_WEIGHT,
    token_weight_alpha=1.3,
    example_inverse_surprisal_epsilon=0.1,
    zfree_reference_scale=3.0,
)
