r"""The five reconstruction terms, two diagnostics and their weighted total (MATH.md).

For example :math:`i` with valid positions :math:`V_i`, :math:`n_i = |V_i|`, model losses
:math:`l` and z-free losses :math:`b` (a fixed reference: every weight built from
:math:`b` is detached), over the :math:`B'` examples with :math:`n_i > 0`:

.. math::

    \bar l_i = \tfrac{1}{n_i}\textstyle\sum_{t\in V_i} l_{it}, \qquad
    \bar b_i = \tfrac{1}{n_i}\textstyle\sum_{t\in V_i} b_{it}, \qquad
    \pi_{it} = b_{it}^\alpha / \textstyle\sum_{s\in V_i} b_{is}^\alpha \quad (0^0 = 1)

    R_\mathrm{raw} = \operatorname{mean}_i \bar l_i, \quad
    R_\mathrm{dist} = R_\mathrm{raw}/c, \quad
    R_\mathrm{ex} = \operatorname{mean}_i \frac{\bar l_i}{\bar b_i + \varepsilon}, \quad
    R_\mathrm{tok} = \operatorname{mean}_i \textstyle\sum_t \pi_{it} l_{it}, \quad
    R_\mathrm{cc} = \frac{1}{c}\operatorname{mean}_i \frac{\sum_t \pi_{it} l_{it}}{\kappa_i},
    \quad \kappa_i = \frac{\sum_t \pi_{it} b_{it}}{\bar b_i}

Example:
    >>> import torch
    >>> from recon_impl import ReconstructionLossConfig, reconstruction_losses
    >>> l = torch.tensor([[2.0, 4.0, 0.0]], dtype=torch.float64, requires_grad=True)
    >>> b = torch.tensor([[1.0, 3.0, float("nan")]], dtype=torch.float64)
    >>> mask = torch.tensor([[True, True, False]])
    >>> config = ReconstructionLossConfig(token_weighted_weight=1.0)
    >>> losses = reconstruction_losses(l, b, mask, config)
    >>> round(losses.reconstruction_loss.item(), 12)  # mean(2, 4)
    3.0
    >>> round(losses.token_weighted_reconstruction_loss.item(), 12)  # (1*2 + 3*4) / (1 + 3)
    3.5
    >>> losses.total_reconstruction_loss.backward()
    >>> l.grad  # (1/n + pi) per valid token, 0 at the padded one
    tensor([[0.7500, 1.2500, 0.0000]], dtype=torch.float64)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from recon_impl.config import ReconstructionLossConfig
from recon_impl.fused import ReconstructionStack, StackPlan
from recon_impl.validation import check_tensor_metadata, raise_for_invalid_values

RECONSTRUCTION_TERM_NAMES: tuple[str, ...] = (
    "reconstruction_loss",
    "distribution_normalized_reconstruction_loss",
    "example_inverse_surprisal_weighted_reconstruction_loss",
    "token_weighted_reconstruction_loss",
    "normalized_concentration_corrected_token_weighted_reconstruction_loss",
)
DIAGNOSTIC_NAMES: tuple[str, ...] = ("token_weighted_base_loss", "token_concentration_factor")
RECONSTRUCTION_LOSS_NAMES: tuple[str, ...] = (
    *RECONSTRUCTION_TERM_NAMES,
    *DIAGNOSTIC_NAMES,
    "total_reconstruction_loss",
)


@dataclass(frozen=True, eq=False)
class ReconstructionLosses(Mapping[str, Tensor]):
    """The eight scalars of the stack: a read-only mapping, also readable as attributes."""

    reconstruction_loss: Tensor
    distribution_normalized_reconstruction_loss: Tensor
    example_inverse_surprisal_weighted_reconstruction_loss: Tensor
    token_weighted_reconstruction_loss: Tensor
    normalized_concentration_corrected_token_weighted_reconstruction_loss: Tensor
    token_weighted_base_loss: Tensor
    token_concentration_factor: Tensor
    total_reconstruction_loss: Tensor

    def __getitem__(self, name: str) -> Tensor:
        if name not in RECONSTRUCTION_LOSS_NAMES:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(RECONSTRUCTION_LOSS_NAMES)

    def __len__(self) -> int:
        return len(RECONSTRUCTION_LOSS_NAMES)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={float(v.detach()):.6g}" for k, v in self.items())
        return f"ReconstructionLosses({body})"


# compute_dtype of the common floating dtypes, looked up rather than derived on every call
_COMPUTE_DTYPE = {
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.float32: torch.float32,
    torch.float64: torch.float64,
}


def compute_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """float32 or better: the promoted input dtype, raised to float32 when narrower."""
    promoted = dtypes[0]
    for dtype in dtypes[1:]:
        if dtype is not promoted:
            promoted = torch.promote_types(promoted, dtype)
    known = _COMPUTE_DTYPE.get(promoted)
    if known is not None:
        return known
    return promoted if torch.finfo(promoted).bits >= 32 else torch.float32


_ARE_FUNCTORCH_TRANSFORMS_ACTIVE = getattr(torch._C, "_are_functorch_transforms_active", None)


def _functorch_transforms_active() -> bool:
    """Whether a ``torch.func`` transform (grad, vmap, ...) is tracing this call."""
    active = _ARE_FUNCTORCH_TRANSFORMS_ACTIVE
    return bool(active()) if active is not None else False


def reconstruction_losses(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    mask: Tensor,
    config: ReconstructionLossConfig,
    *,
    validate: bool = True,
) -> ReconstructionLosses:
    """Compute the five reconstruction terms, the two diagnostics and their weighted total.

    Args:
        token_nll: ``[B, T]`` per-token NLL of the model with the latent (l).
        zfree_token_nll: ``[B, T]`` per-token NLL of the z-free reference (b), >= 0.
            Used with stop-gradient: no output carries a gradient to it.
        mask: ``[B, T]`` bool (or integer 0/1), True at real target tokens. Values of
            ``token_nll`` and ``zfree_token_nll`` elsewhere are ignored, NaN and inf included.
        config: the weights, alpha, epsilon and the reference scale c.
        validate: check the inputs (MATH.md, "Errors") and raise ``ValueError`` on bad
            ones. Switch off only on a hot path whose inputs are known to be good: the
            checks then cost nothing, and bad inputs give NaN or inf instead of an error.
            The checks read per-example reductions the stack computes anyway, with one host
            sync; only when one trips is the data scanned to name the bad position.

    Returns:
        ``ReconstructionLosses``: eight 0-dim tensors in float32 or better, on the inputs'
        device. ``total_reconstruction_loss`` is differentiable with respect to ``token_nll``,
        and so is each of the five terms on its own.

    Every term is linear in ``token_nll``, so its second derivative is 0; the eager path's
    gradient is written by a fused backward that is not itself differentiable
    (``create_graph=True`` followed by a second backward raises).

    Eagerly, the stack runs as one fused autograd node (``recon_impl.fused``); under
    ``torch.compile`` it is traced from the plain formulation below, which compiles without
    a graph break when ``validate=False``, and so it runs under ``torch.func`` transforms.
    """
    if validate:
        if not isinstance(config, ReconstructionLossConfig):
            raise ValueError(
                f"config must be a ReconstructionLossConfig, got {type(config).__name__}"
            )
        valid = check_tensor_metadata(token_nll, zfree_token_nll, mask)
    else:
        valid = mask if mask.dtype == torch.bool else mask != 0

    dtype = compute_dtype(token_nll.dtype, zfree_token_nll.dtype)
    if torch.compiler.is_compiling() or _functorch_transforms_active():
        values = traceable_reconstruction_losses(
            token_nll, zfree_token_nll, valid, config, dtype=dtype, validate=validate
        )
    else:
        plan = StackPlan.from_config(config, dtype, validate)
        if zfree_token_nll.requires_grad:
            zfree_token_nll = zfree_token_nll.detach()
        values = ReconstructionStack.apply(token_nll, zfree_token_nll, valid, plan)
    return ReconstructionLosses(*values)


def traceable_reconstruction_losses(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    valid: Tensor,
    config: ReconstructionLossConfig,
    *,
    dtype: torch.dtype,
    validate: bool,
) -> tuple[Tensor, ...]:
    """The stack in plain differentiable torch ops, for ``torch.compile`` to trace.

    ``valid`` is the bool mask; returns the eight values in ``RECONSTRUCTION_LOSS_NAMES``
    order. Autograd differentiates it; the eager path's fused backward gives the same
    gradient (MATH.md, "Gradients").
    """
    alpha = config.token_weight_alpha
    epsilon = config.example_inverse_surprisal_epsilon
    scale = config.zfree_reference_scale

    # torch.where, not multiplication by the mask: padded NaN/inf must not leak into
    # values or gradients.
    l_valid = torch.where(valid, token_nll.to(dtype), 0.0)
    b_valid = torch.where(valid, zfree_token_nll.detach().to(dtype), 0.0)

    count = valid.sum(dim=1)
    kept = count > 0
    n = count.clamp(min=1).to(dtype)  # empty rows: sums are 0, so their means are 0
    kept_examples = kept.sum().to(dtype)

    l_sum = l_valid.sum(dim=1)
    b_sum = b_valid.sum(dim=1)
    b_max = b_valid.amax(dim=1, keepdim=True)

    # pi_it = b_it^alpha / sum_s b_is^alpha = softmax(alpha * log b) over valid positions,
    # with the row maximum taken out: (b/b_max)^alpha lies in [0, 1], so no finite alpha
    # and no b overflows. A row of zeros gets ratio 1 everywhere, i.e. uniform shares,
    # which alpha = 0 gives everywhere (0^0 = 1).
    ratio = torch.where(b_max > 0, b_valid / b_max, 1.0)
    # 0^alpha = 0 for every alpha > 0, also for an alpha so small that it rounds to 0 in
    # the compute dtype (where ratio.pow would give 0^0 = 1).
    has_share = valid & (ratio > 0) if alpha > 0 else valid
    share_numerator = torch.where(has_share, ratio.pow(alpha), 0.0)
    # >= 1 on every row with a valid token (its maximum contributes exactly 1^alpha = 1);
    # the clamp only turns 0/0 on empty rows into 0.
    share_denominator = share_numerator.sum(dim=1).clamp(min=1.0)

    token_weighted_l = (share_numerator * l_valid).sum(dim=1) / share_denominator  # ltok_i
    token_weighted_b = (share_numerator * b_valid).sum(dim=1) / share_denominator  # btok_i

    l_mean = l_sum / n  # lbar_i
    b_mean = b_sum / n  # bbar_i
    # kappa_i = btok_i / bbar_i, and 1 where bbar_i = 0 (b is detached: the 0/0 of the
    # unselected branch reaches no gradient).
    kappa = torch.where(b_mean > 0, token_weighted_b / b_mean, 1.0)

    if validate:
        # NaN or inf at a valid position shows in the per-example sums, a negative b in
        # the row minimum.
        b_min = b_valid.amin(dim=1)
        problems = [~torch.isfinite(l_sum).all(), ~torch.isfinite(b_sum).all(), (b_min < 0).any()]
        problems.append(~kept.any())
        if epsilon == 0:
            problems.append((kept & (b_sum == 0)).any())
        if bool(torch.stack(problems).any()):  # the one host sync of validation
            raise_for_invalid_values(token_nll, zfree_token_nll, valid, epsilon=epsilon)

    def batch_mean(per_example: Tensor) -> Tensor:
        return torch.where(kept, per_example, 0.0).sum() / kept_examples

    raw = batch_mean(l_mean)
    distribution_normalized = raw / scale
    # a division, not a product with 1/(bbar+eps), which overflows for a tiny eps
    example_inverse_surprisal = batch_mean(l_mean / torch.where(kept, b_mean + epsilon, 1.0))
    token_weighted = batch_mean(token_weighted_l)
    concentration_corrected = batch_mean(token_weighted_l / kappa) / scale

    total = (
        config.raw_weight * raw
        + config.distribution_normalized_weight * distribution_normalized
        + config.example_inverse_surprisal_weight * example_inverse_surprisal
        + config.token_weighted_weight * token_weighted
        + config.normalized_concentration_corrected_token_weighted_weight * concentration_corrected
    )
    return (
        raw,
        distribution_normalized,
        example_inverse_surprisal,
        token_weighted,
        concentration_corrected,
        batch_mean(token_weighted_b).detach(),
        batch_mean(kappa).detach(),
        total,
    )
