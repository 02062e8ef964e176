"""Configurations shared by the implementation tests."""

from __future__ import annotations

from recon_impl import ReconstructionLossConfig

# Every term weighted, each weight different, alpha off the special values 0, 0.5, 1, 2.
EVERY_TERM_CONFIG = ReconstructionLossConfig(
    raw_weight=0.5,
    distribution_normalized_weight=0.25,
    example_inverse_surprisal_weight=0.75,
    token_weighted_weight=1.5,
    normalized_concentration_corrected_token_weighted_weight=2.0,
    token_weight_alpha=1.3,
    example_inverse_surprisal_epsilon=0.1,
    zfree_reference_scale=3.0,
)
