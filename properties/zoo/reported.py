"""How a report must name each mistake of the zoo: the words its summary holds.

Every wrong implementation (``properties.zoo.wrong``) and wrong API
(``properties.zoo.api.wrong``) has one mistake. A report *names* it when the summary at its
top (the causes, before any section) says one of its phrases: the known variant it matches
(``properties.zoo.textbook.DIAGNOSED_AS``, for a mistake of the textbook stack that has
one), else one of ``NAMED_AS`` below: the input feature that triggers it, the state it
keeps, the output or field it gets wrong. ``benchmarks/report_sizes.py`` measures it on
every entry; ``tests/properties/test_coverage.py`` checks that every entry has phrases.
"""

from __future__ import annotations

from properties.zoo.textbook import DIAGNOSED_AS

#: zoo name -> phrases, one of which the summary of its report says (beside the known
#: variants of DIAGNOSED_AS)
NAMED_AS: dict[str, tuple[str, ...]] = {
    # the textbook stack, one mistake each
    "mask_multiplication": ("at padded positions",),
    "zfree_not_detached": ("zfree_token_nll",),
    "exp_log_shares": ("valid b are all 0", "b = 0 at a valid position"),
    # its b^alpha / sum b^alpha is 0/0 on a row of zeros too, the smallest input that shows it
    "no_max_subtraction": ("valid b are all 0", "large losses", "alpha = "),
    "no_zero_row_fallback": ("valid b are all 0",),
    "low_precision_compute": ("low-precision inputs",),
    "mutates_input": ("was modified by the call",),
    "float64_outputs": ("is torch.float64",),
    "token_term_detached": ("detached", "dJ/dl_it"),
    "nondeterministic_order": ("calls on the same inputs disagree",),
    "right_padding_assumed": ("padded position before a valid one",),
    "alpha_in_result": ("keys beyond the outputs",),
    "terms_detached": ("detached", "no grad_fn"),
    "zfree_cached_by_shape": ("keeps state between calls",),
    "zfree_running_buffer": ("modified by a later call",),
    "lazy_first_call": ("the first call of a fresh process",),
    "contiguous_assumed": ("contiguous copy of the same values passes",),
    "writes_noncontiguous_input": ("was modified by the call",),
    # the tiled kernels' mistakes: the size they start at ("fails at 1 x 65, passes at 1 x 64")
    **{
        name: ("passes at",)
        for name in (
            "tail_tile_dropped",
            "shares_per_tile",
            "running_max_restarts",
            "int16_counts",
            "half_precision_counts",
            "fast_path_counts_padding",
            "backward_drops_tail_tile",
        )
    },
    "fast_path_counts_dropped_rows": ("when the batch is padded from",),
    # the fused stack, one slip in its backward each
    "fused_total_weights_only": ("d reconstruction_loss/d l", "differentiated alone"),
    "fused_term_gradient_scaled": ("/d l_it",),
    "fused_first_upstream_only": ("one backward of",),
    "fused_diagnostics_differentiable": ("carries a gradient",),
    "fused_no_grad_backward": ("create_graph",),
    "fused_create_graph_path_scaled": ("differentiated with create_graph=True",),
}


#: wrong API (properties.zoo.api.wrong) -> phrases, one of which its summary says
API_NAMED_AS: dict[str, tuple[str, ...]] = {
    "changed-default": ("the default of token_weight_alpha",),
    "reordered-fields": ("declares its fields in the order",),
    "mutable-config": ("not a frozen dataclass",),
    "legacy-field": ("normalize_reconstruction_loss",),
    "sign-only-validation": ("accepted",),
    "float-conversion-validation": ("numpy.True_",),
    "numbers-stored-as-given": ("not as a plain Python int or float",),
    "tensors-stored-as-given": ("stored as torch.tensor(",),
    "numbers-refused-with-type-error": ("refused with TypeError",),
    "error-without-field-name": ("must name",),
    "error-names-longer-field": ("but names",),
    "metadata-without-alpha": ("lacks token_weight_alpha",),
    "misspelt-flag": ("the parser lacks",),
    "flag-default-differs": ("not its default",),
    "crossed-flags": ("each flag must set its own field",),
    "float-flags": ("parsed without a usage error",),
    "removed-flag-accepted": ("was accepted",),
    "removed-flag-deleted": ("must be a usage error naming",),
    "removed-flag-nargs0": ("must be a usage error naming",),
    "removed-flag-in-namespace": ("holds normalize_reconstruction_loss",),
    "alpha-in-bundle": ("returns token_weight_alpha",),
    "per-example-diagnostics": ("has shape",),
    "zero-weight-terms-dropped": ("lacks reconstruction_loss",),
    "default-reconstruction-config": ("config.reconstruction",),
    "router-switch-ignored": ("router_support must be given",),
    "crossed-auxiliary-weights": ("posterior_entropy must be given", "posterior_variance must"),
    "zero-weight-terms-required": ("router_support must be given",),
    "inputs-modified": ("modified",),
    "float64-results": ("float64",),
    "auxiliary-terms-detached": ("effective weight",),
    "terms-detached": ("detached",),
    "terms-on-total-graph": ("one backward of",),
    "logits-wrapped-labels": ("mask is",),
    "logits-half-losses": ("token_nll is bfloat16",),
    "logits-labels-clamped": ("a label outside",),
    "missing-term-as-zero": ("never a silent 0",),
    "missing-kl-misnamed": ("must name kl, but names",),
}


def phrases(command: str, name: str) -> tuple[str, ...]:
    """The phrases that name the mistake of zoo entry ``name`` of ``command`` (check or
    check-api); none where it has none yet."""
    if command == "check-api":
        return API_NAMED_AS.get(name.replace("_", "-"), ())
    variant = DIAGNOSED_AS.get(name.replace("_", "-"))
    return (variant,) if variant is not None else NAMED_AS.get(name, ())


def names_mistake(command: str, name: str, summary: str) -> bool:
    """Whether ``summary`` says one of the phrases of zoo entry ``name`` of ``command``
    (the lines that name the target, such as its header and rerun command, say nothing)."""
    target = f"properties.zoo.{'api.' if command == 'check-api' else ''}wrong"
    said = "\n".join(line for line in summary.splitlines() if target not in line)
    return any(phrase in said for phrase in phrases(command, name))
