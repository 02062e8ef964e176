"""Realistic wrong implementations: each is the textbook stack with one mistake, or the
fused stack with one slip in its backward (``properties.zoo.fused``).

``recon-spec check`` must reject every one of them (``tests/properties/test_zoo.py``); each
fused slip is rejected by the invariant that names it (``NAMED_BY``).
"""

from __future__ import annotations

from functools import partial

from properties.zoo.fused import SLIPS, fused_losses
from properties.zoo.textbook import MISTAKES, textbook_losses

WRONG_IMPLEMENTATIONS: dict[str, str] = {}
#: wrong implementation -> the invariant that names its mistake (beyond the witnesses)
NAMED_BY: dict[str, str] = {
    "terms_detached": "output-gradients",
    "alpha_in_result": "outputs-contract",
}


def _wrong(mistake: str):
    implementation = partial(textbook_losses, mistake=mistake)
    name = mistake.replace("-", "_")
    WRONG_IMPLEMENTATIONS[name] = MISTAKES[mistake]
    return implementation


def _fused(slip: str):
    implementation = partial(fused_losses, slip=slip)
    name = "fused_" + slip.replace("-", "_")
    NAMED_BY[name], WRONG_IMPLEMENTATIONS[name] = SLIPS[slip]
    return implementation


global_token_mean = _wrong("global-token-mean")
padding_counted = _wrong("padding-counted")
empty_rows_counted = _wrong("empty-rows-counted")
mask_multiplication = _wrong("mask-multiplication")
zfree_not_detached = _wrong("zfree-not-detached")
alpha_ignored = _wrong("alpha-ignored")
exp_log_shares = _wrong("exp-log-shares")
no_max_subtraction = _wrong("no-max-subtraction")
no_zero_row_fallback = _wrong("no-zero-row-fallback")
kappa_from_token_nll = _wrong("kappa-from-token-nll")
epsilon_as_floor = _wrong("epsilon-as-floor")
cc_scale_missing = _wrong("cc-scale-missing")
shares_over_padding = _wrong("shares-over-padding")
total_missing_cc = _wrong("total-missing-cc")
low_precision_compute = _wrong("low-precision-compute")
mutates_input = _wrong("mutates-input")
float64_outputs = _wrong("float64-outputs")
diagnostics_empty_rows_counted = _wrong("diagnostics-empty-rows-counted")
batch_normalized_shares = _wrong("batch-normalized-shares")
token_term_detached = _wrong("token-term-detached")
unnormalized_shares = _wrong("unnormalized-shares")
kappa_ratio_of_means = _wrong("kappa-ratio-of-means")
shares_from_token_nll = _wrong("shares-from-token-nll")
nondeterministic_order = _wrong("nondeterministic-order")
lengths_from_first_row = _wrong("lengths-from-first-row")
right_padding_assumed = _wrong("right-padding-assumed")
kappa_with_epsilon = _wrong("kappa-with-epsilon")
terms_detached = _wrong("terms-detached")
alpha_in_result = _wrong("alpha-in-result")

fused_total_weights_only = _fused("total-weights-only")
fused_term_gradient_scaled = _fused("term-gradient-scaled")
fused_first_upstream_only = _fused("first-upstream-only")
fused_diagnostics_differentiable = _fused("diagnostics-differentiable")
fused_no_grad_backward = _fused("no-grad-backward")
