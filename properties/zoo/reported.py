"""How a report must name each mistake of the zoo: the words its summary holds.

Every wrong implementation (``properties.zoo.wrong``) and wrong API
(``properties.zoo.api.wrong``) has one mistake. A report *names* it when the summary at its
top (the causes, before any section) says one of the phrases below: the known variant it
matches, the input feature that triggers it, the state it keeps, the output or field it
gets wrong. ``tests/properties/test_report_sizes.py`` runs a report on each and checks it;
``benchmarks/report_sizes.py`` measures them all.
"""

from __future__ import annotations

#: zoo name -> phrases, one of which the summary of its report says
NAMED_AS: dict[str, tuple[str, ...]] = {
    # the textbook stack, one mistake each
    "global_token_mean": ("global-token-mean",),
    "padding_counted": ("padding-counted",),
    "empty_rows_counted": ("empty-rows-counted",),
    "mask_multiplication": ("at padded positions",),
    "zfree_not_detached": ("zfree_token_nll",),
    "alpha_ignored": ("alpha-ignored",),
    "exp_log_shares": ("valid b are all 0", "b = 0 at a valid position"),
    "no_max_subtraction": ("large losses", "alpha = "),
    "no_zero_row_fallback": ("valid b are all 0",),
    "kappa_from_token_nll": ("kappa-from-token_nll",),
    "epsilon_as_floor": ("epsilon-as-floor",),
    "cc_scale_missing": ("scale-missing",),
    "shares_over_padding": ("at padded positions", "shares-over-padding"),
    "total_missing_cc": ("total without the normalized_concentration_corrected",),
    "low_precision_compute": ("low-precision inputs",),
    "mutates_input": ("was modified by the call",),
    "float64_outputs": ("is torch.float64",),
    "diagnostics_empty_rows_counted": ("empty-rows-counted",),
    "batch_normalized_shares": ("batch-normalized-shares",),
    "token_term_detached": ("detached",),
    "unnormalized_shares": ("unnormalized-shares",),
    "kappa_ratio_of_means": ("ratio-of-means",),
    "shares_from_token_nll": ("shares-from-token_nll",),
    "nondeterministic_order": ("calls on the same inputs disagree",),
    "lengths_from_first_row": ("lengths-from-first-row",),
    "right_padding_assumed": ("right-padding-assumed",),
    "kappa_with_epsilon": ("kappa-with-epsilon",),
    "alpha_in_result": ("keys beyond the outputs",),
    "terms_detached": ("detached",),
    "zfree_cached_by_shape": ("keeps state between calls",),
    # the fused stack, one slip in its backward each
    "fused_total_weights_only": ("d reconstruction_loss/d l", "differentiated alone"),
    "fused_term_gradient_scaled": ("differentiated alone",),
    "fused_first_upstream_only": ("one backward of",),
    "fused_diagnostics_differentiable": ("carries a gradient",),
    "fused_no_grad_backward": ("create_graph",),
}


def names_mistake(name: str, summary: str) -> bool:
    """Whether ``summary`` says one of the phrases of zoo entry ``name``."""
    return any(phrase in summary for phrase in NAMED_AS.get(name, ()))
