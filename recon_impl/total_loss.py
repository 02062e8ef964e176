"""The total disentanglement loss: the reconstruction stack plus the auxiliary terms."""

from __future__ import annotations

import torch
from torch import Tensor

from recon_impl.batch_decomposition import kept_example_count, weighted_shard_losses
from recon_impl.config import DisentanglementLossConfig, check_config_type, finite_float
from recon_impl.reconstruction import RECONSTRUCTION_LOSS_NAMES, reconstruction_losses

__all__ = [
    "AUXILIARY_TERM_NAMES",
    "TOTAL_LOSS_NAMES",
    "auxiliary_term_weights",
    "compute_total_loss",
]

# The auxiliary terms, in the order of their weights in DisentanglementLossConfig.
AUXILIARY_TERM_NAMES: tuple[str, ...] = (
    "kl",
    "router_support",
    "posterior_entropy",
    "posterior_variance",
    "router_marginal_kl_to_prior",
    "router_supervision",
    "inter_latent_divergence",
)
# Everything compute_total_loss can return: the stack's, the auxiliary terms, the total.
TOTAL_LOSS_NAMES: tuple[str, ...] = (
    *RECONSTRUCTION_LOSS_NAMES,
    *AUXILIARY_TERM_NAMES,
    "total_loss",
)


def auxiliary_term_weights(config: DisentanglementLossConfig) -> dict[str, float]:
    """The weight each auxiliary term enters ``total_loss`` with (``router_support``'s is 0
    unless ``enable_router_support_loss``)."""
    return {
        "kl": config.beta,
        "router_support": (
            config.router_support_weight if config.enable_router_support_loss else 0.0
        ),
        "posterior_entropy": config.posterior_entropy_weight,
        "posterior_variance": config.posterior_variance_weight,
        "router_marginal_kl_to_prior": config.router_marginal_kl_to_prior_weight,
        "router_supervision": config.router_supervision_weight,
        "inter_latent_divergence": config.inter_latent_divergence_weight,
    }


def compute_total_loss(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    mask: Tensor,
    config: DisentanglementLossConfig,
    *,
    kl: Tensor | None = None,
    router_support: Tensor | None = None,
    posterior_entropy: Tensor | None = None,
    posterior_variance: Tensor | None = None,
    router_marginal_kl_to_prior: Tensor | None = None,
    router_supervision: Tensor | None = None,
    inter_latent_divergence: Tensor | None = None,
    weight: float | None = None,
    validate: bool = True,
) -> dict[str, Tensor]:
    r"""All loss scalars of one training step, and their weighted sum ``total_loss``.

    .. math::

        \mathrm{total\_loss} = J + \beta\,\mathrm{kl}
            + [\mathrm{enable\_router\_support\_loss}]\, w_\mathrm{rs}\,\mathrm{router\_support}
            + w_\mathrm{pe}\,\mathrm{posterior\_entropy}
            + w_\mathrm{pv}\,\mathrm{posterior\_variance}
            + w_\mathrm{rm}\,\mathrm{router\_marginal\_kl\_to\_prior}
            + w_\mathrm{sup}\,\mathrm{router\_supervision}
            + w_\mathrm{ild}\,\mathrm{inter\_latent\_divergence}

    where :math:`J` is ``total_reconstruction_loss``. An auxiliary term whose effective
    weight is non-zero must be given (0-dim tensor); a zero-weight term may be omitted, and
    when given it is returned for logging but not added.

    **One shard of a batch** (``weight`` given): the call is one micro-batch of gradient
    accumulation or one rank's share of a data-parallel batch, with the shard weight
    :math:`w_k = B'_k / \sum_j B'_j` of ``shard_weights``. Every returned entry, the
    auxiliary terms and ``total_loss`` included, is multiplied by :math:`w_k`, so that
    the entries summed over the shards are the union's values and backpropagating every
    shard's ``total_loss`` gives the union's gradient (MATH.md, "Batch decomposition").
    That holds for an auxiliary term when it is, like the reconstruction terms, a mean
    over the shard's kept examples (see GUIDE.md for terms averaged over other
    populations). A shard without a valid token (weight 0) contributes exactly nothing:
    every entry is 0, the auxiliary terms' values are not read (they may be NaN), and
    ``total_loss`` is a zero still connected to ``token_nll`` and to every auxiliary term
    given (gradient 0), so that a data-parallel rank holding only padding runs the same
    backward pass as its peers. Without ``weight``, such a batch is a ``ValueError``.

    Returns:
        a dict with the reconstruction entries, every auxiliary term given, and
        ``total_loss`` (in ``TOTAL_LOSS_NAMES`` order).

    Example:
        >>> import torch
        >>> from recon_impl import DisentanglementLossConfig
        >>> l = torch.tensor([[1.0, 2.0]]); b = torch.tensor([[1.0, 1.0]])
        >>> config = DisentanglementLossConfig(enable_router_support_loss=False)
        >>> out = compute_total_loss(l, b, torch.ones(1, 2, dtype=torch.bool), config,
        ...     kl=torch.tensor(0.25))
        >>> float(out["total_loss"])
        1.75
        >>> empty = compute_total_loss(l, b, torch.zeros(1, 2, dtype=torch.bool), config,
        ...     kl=torch.tensor(float("nan")), weight=0.0)
        >>> float(empty["total_loss"]), float(empty["kl"])
        (0.0, 0.0)
    """
    check_config_type("config", config, DisentanglementLossConfig)
    auxiliary_terms = {
        "kl": kl,
        "router_support": router_support,
        "posterior_entropy": posterior_entropy,
        "posterior_variance": posterior_variance,
        "router_marginal_kl_to_prior": router_marginal_kl_to_prior,
        "router_supervision": router_supervision,
        "inter_latent_divergence": inter_latent_divergence,
    }
    for name, term in auxiliary_terms.items():
        if term is not None and (not isinstance(term, Tensor) or term.dim() != 0):
            shape = tuple(term.shape) if isinstance(term, Tensor) else type(term).__name__
            raise ValueError(f"{name} must be a 0-dim tensor, got {shape}")
    weights = auxiliary_term_weights(config)
    for name, term_weight in weights.items():
        if term_weight != 0 and auxiliary_terms[name] is None:
            raise ValueError(
                f"{name} must be given: its weight is {term_weight} (set the weight to 0 to "
                "leave the term out)"
            )
    given = {name: term for name, term in auxiliary_terms.items() if term is not None}

    if weight is None:
        reconstruction = dict(
            reconstruction_losses(
                token_nll, zfree_token_nll, mask, config.reconstruction, validate=validate
            )
        )
        total_loss = reconstruction["total_reconstruction_loss"]
        for name, term in given.items():
            if weights[name] != 0:
                total_loss = total_loss + weights[name] * term
        return {**reconstruction, **given, "total_loss": total_loss}

    weight = finite_float("weight", weight)  # 10**400 too: math.isfinite would overflow
    if weight < 0:
        raise ValueError(f"weight must be >= 0, got {weight!r}")
    reconstruction = weighted_shard_losses(
        token_nll, zfree_token_nll, mask, config.reconstruction, weight=weight, validate=validate
    )
    total_loss = reconstruction["total_reconstruction_loss"]
    if kept_example_count(mask) == 0:
        # torch.where, not a product with 0: a NaN term (a mean over no example) stays out,
        # and its gradient is 0, not NaN.
        nothing = torch.zeros((), dtype=torch.bool, device=total_loss.device)
        weighted = {name: torch.where(nothing, term, 0.0) for name, term in given.items()}
        for term in weighted.values():
            total_loss = total_loss + term
        return {**reconstruction, **weighted, "total_loss": total_loss}
    weighted = {name: weight * term for name, term in given.items()}
    for name, term in weighted.items():
        if weights[name] != 0:
            total_loss = total_loss + weights[name] * term
    return {**reconstruction, **weighted, "total_loss": total_loss}
