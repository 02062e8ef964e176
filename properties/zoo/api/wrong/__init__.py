"""Wrong API modules, each ``properties.zoo.api.correct`` with one realistic mistake.

``MISTAKES`` says, for each module, which invariant names its mistake (the witness table):
``tests/properties/test_api_zoo.py`` checks that this invariant rejects it on its own, and
that every API invariant rejects at least one of them. Point ``recon-spec check-api`` at any
of them, e.g. ``recon-spec check-api properties.zoo.api.wrong.router_switch_ignored``.
"""

#: module -> (the invariant that names its mistake, the mistake)
MISTAKES: dict[str, tuple[str, str]] = {
    "changed_default": ("config-fields", "token_weight_alpha defaults to 0.0, not 1.0"),
    "reordered_fields": (
        "config-fields",
        "alpha, epsilon and c come before the five weights in ReconstructionLossConfig",
    ),
    "mutable_config": ("config-frozen", "both configs are plain (mutable) dataclasses"),
    "legacy_field": (
        "config-no-legacy",
        "normalize_reconstruction_loss is kept as an ignored field for old run configs",
    ),
    "sign_only_validation": (
        "config-rejects-invalid",
        "validation checks the sign alone: NaN, inf, strings and bools pass",
    ),
    "float_conversion_validation": (
        "config-rejects-invalid",
        "validation refuses Python bools and converts the rest with float(): numpy.True_ "
        "and a 0-dim tensor pass as 1.0",
    ),
    "numbers_stored_as_given": (
        "config-number-types",
        "a valid numpy.float32 is stored as given, not as a Python float",
    ),
    "error_without_field_name": (
        "config-rejects-invalid",
        "every invalid value is rejected with ValueError('invalid config'), naming no field",
    ),
    "metadata_without_alpha": (
        "config-run-metadata",
        "to_dict() logs the weights only: token_weight_alpha is lost from the run metadata",
    ),
    "misspelt_flag": (
        "flags-exist",
        "the concentration-corrected weight's flag lacks '-reconstruction'",
    ),
    "flag_default_differs": (
        "flags-defaults",
        "the epsilon flag defaults to 0.0 instead of the dataclass's 1e-8",
    ),
    "crossed_flags": ("flags-round-trip", "the alpha and epsilon flags set each other's field"),
    "float_flags": ("flags-reject-invalid", "the flags parse with type=float: -1, nan, inf pass"),
    "removed_flag_accepted": (
        "flags-removed",
        "--normalize-reconstruction-loss is kept as a deprecated no-op (store_true)",
    ),
    "removed_flag_deleted": (
        "flags-removed",
        "--normalize-reconstruction-loss is deleted outright: 'unrecognized arguments', no hint",
    ),
    "removed_flag_nargs0": (
        "flags-removed",
        "the removed flag's action takes no value: '=true' gets argparse's own error, no hint",
    ),
    "removed_flag_in_namespace": (
        "flags-namespace-clean",
        "the removed flag errors, but its default False is left in every namespace",
    ),
    "alpha_in_bundle": ("total-loss-bundle", "token_weight_alpha is returned for logging"),
    "per_example_diagnostics": (
        "total-loss-bundle",
        "the two diagnostics are returned per example, [B]",
    ),
    "zero_weight_terms_dropped": (
        "total-loss-bundle",
        "terms weighted 0 are neither computed nor returned",
    ),
    "default_reconstruction_config": (
        "total-loss-reconstruction",
        "the stack runs with ReconstructionLossConfig(), not config.reconstruction",
    ),
    "router_switch_ignored": (
        "total-loss-weighted-sum",
        "router_support counts whatever enable_router_support_loss says",
    ),
    "crossed_auxiliary_weights": (
        "total-loss-weighted-sum",
        "posterior_entropy and posterior_variance are weighted by each other's weight",
    ),
    "zero_weight_terms_required": (
        "total-loss-weighted-sum",
        "router_support must be given whenever its weight is non-zero, even switched off",
    ),
    "inputs_modified": (
        "total-loss-contract",
        "padded positions of the caller's zfree_token_nll are zeroed in place",
    ),
    "float64_results": (
        "total-loss-contract",
        "the stack runs in float64: float32 and half inputs give float64 entries",
    ),
    "auxiliary_terms_detached": (
        "total-loss-gradient",
        "the auxiliary terms enter the total detached: its value is right, no gradient flows",
    ),
    "terms_detached": (
        "total-loss-term-gradients",
        "the five terms are returned detached (logged numbers); only total_loss trains",
    ),
    "terms_on_total_graph": (
        "total-loss-term-gradients",
        "each term is returned with J's graph: its value, the total's gradient",
    ),
    "logits_wrapped_labels": (
        "logits-token-nll",
        "labels are compared with ignore_index in their own dtype: uint8 156 is padding",
    ),
    "logits_half_losses": (
        "logits-token-nll",
        "half-precision logits give half-precision losses",
    ),
    "logits_labels_clamped": (
        "logits-rejects-invalid",
        "labels outside [0, V) are clamped into it instead of raising",
    ),
    "missing_term_as_zero": (
        "total-loss-missing-term",
        "a weighted term that is not given counts as 0",
    ),
}
