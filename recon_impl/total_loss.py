"""The total disentanglement loss: the reconstruction stack plus the auxiliary terms."""

from __future__ import annotations

from torch import Tensor

from recon_impl.config import DisentanglementLossConfig
from recon_impl.reconstruction import reconstruction_losses


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

    Returns:
        a dict with the eight reconstruction entries, every auxiliary term given, and
        ``total_loss``.

    Example:
        >>> import torch
        >>> from recon_impl import DisentanglementLossConfig
        >>> l = torch.tensor([[1.0, 2.0]]); b = torch.tensor([[1.0, 1.0]])
        >>> out = compute_total_loss(l, b, torch.ones(1, 2, dtype=torch.bool),
        ...     DisentanglementLossConfig(enable_router_support_loss=False),
        ...     kl=torch.tensor(0.25))
        >>> float(out["total_loss"])
        1.75
    """
    if not isinstance(config, DisentanglementLossConfig):
        raise ValueError(f"config must be a DisentanglementLossConfig, got {type(config).__name__}")
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

    def weighted(weight: float, name: str) -> Tensor | float:
        if weight == 0:
            return 0.0
        term = auxiliary_terms[name]
        if term is None:
            raise ValueError(
                f"{name} must be given: its weight is {weight} (set the weight to 0 to "
                "leave the term out)"
            )
        return weight * term

    reconstruction = reconstruction_losses(
        token_nll, zfree_token_nll, mask, config.reconstruction, validate=validate
    )
    router_support_weight = (
        config.router_support_weight if config.enable_router_support_loss else 0.0
    )
    total_loss = (
        reconstruction.total_reconstruction_loss
        + weighted(config.beta, "kl")
        + weighted(router_support_weight, "router_support")
        + weighted(config.posterior_entropy_weight, "posterior_entropy")
        + weighted(config.posterior_variance_weight, "posterior_variance")
        + weighted(config.router_marginal_kl_to_prior_weight, "router_marginal_kl_to_prior")
        + weighted(config.router_supervision_weight, "router_supervision")
        + weighted(config.inter_latent_divergence_weight, "inter_latent_divergence")
    )
    given = {name: term for name, term in auxiliary_terms.items() if term is not None}
    return {**reconstruction, **given, "total_loss": total_loss}
