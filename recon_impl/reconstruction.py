r"""The reconstruction terms, the two diagnostics and their weighted total (MATH.md).

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

import math
from collections.abc import Iterator, Mapping
from dataclasses import make_dataclass

import torch
from torch import Tensor

from recon_impl.config import ReconstructionLossConfig, check_config_type
from recon_impl.stack import Plan, ReconstructionStack, stack_values
from recon_impl.statistics import example_statistics
from recon_impl.terms import DIAGNOSTIC_NAMES as _DIAGNOSTIC_NAMES
from recon_impl.terms import LOSS_NAMES, TERM_NAMES
from recon_impl.validation import (
    check_tensor_metadata,
    check_values_readable,
    raise_for_invalid_values,
)

RECONSTRUCTION_TERM_NAMES: tuple[str, ...] = TERM_NAMES
DIAGNOSTIC_NAMES: tuple[str, ...] = _DIAGNOSTIC_NAMES
RECONSTRUCTION_LOSS_NAMES: tuple[str, ...] = LOSS_NAMES


class _LossMapping(Mapping[str, Tensor]):
    """The mapping side of ``ReconstructionLosses``: its fields by name, in order."""

    def __getitem__(self, name: str) -> Tensor:
        if name not in RECONSTRUCTION_LOSS_NAMES:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(RECONSTRUCTION_LOSS_NAMES)

    def __len__(self) -> int:
        return len(RECONSTRUCTION_LOSS_NAMES)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={_format(v)}" for k, v in self.items())
        return f"ReconstructionLosses({body})"


# A frozen dataclass with one Tensor field per output of the term table, in order.
ReconstructionLosses = make_dataclass(
    "ReconstructionLosses",
    [(name, "Tensor") for name in RECONSTRUCTION_LOSS_NAMES],
    bases=(_LossMapping,),
    namespace={
        "__doc__": "The scalars of the stack (``RECONSTRUCTION_LOSS_NAMES``): a read-only "
        "mapping, also readable as attributes."
    },
    frozen=True,
    eq=False,
    repr=False,  # the mapping's
)
ReconstructionLosses.__module__ = __name__


def _format(value: Tensor) -> str:
    return f"<{value.dtype} on meta>" if value.is_meta else f"{float(value.detach()):.6g}"


# The dtype the stack computes in, for each input dtype it takes: float32 or better.
_COMPUTE_DTYPE = {
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.float32: torch.float32,
    torch.float64: torch.float64,
}


def compute_dtype(token_nll: Tensor, zfree_token_nll: Tensor) -> torch.dtype:
    """float32 or better: the promoted dtype of the two losses, raised to float32 when narrower.

    Raises ``ValueError`` for a dtype other than float16, bfloat16, float32 and float64
    (float8 holds too few bits for a loss, and most torch arithmetic does not take it).
    """
    for name, value in (("token_nll", token_nll), ("zfree_token_nll", zfree_token_nll)):
        if value.dtype not in _COMPUTE_DTYPE:
            raise ValueError(
                f"{name} must be float16, bfloat16, float32 or float64, got {value.dtype}"
            )
    if token_nll.dtype is zfree_token_nll.dtype:
        return _COMPUTE_DTYPE[token_nll.dtype]
    return _COMPUTE_DTYPE[torch.promote_types(token_nll.dtype, zfree_token_nll.dtype)]


def reconstruction_losses(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    mask: Tensor,
    config: ReconstructionLossConfig,
    *,
    validate: bool = True,
) -> ReconstructionLosses:
    """Compute the reconstruction terms, the two diagnostics and their weighted total.

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
            The checks read per-example results the stack computes anyway, with one host
            sync; only when one trips is the data scanned to name the bad position. They
            also catch arithmetic that overflows the compute dtype (an example whose
            losses sum past float32's range, say): a ``ValueError`` says so, rather than a
            NaN coming out. They need values, so they cannot run under ``torch.func.vmap``
            or on meta tensors (a ``ValueError`` says to pass ``validate=False`` there).

    Returns:
        ``ReconstructionLosses``: 0-dim tensors in float32 or better, on the inputs'
        device. ``total_reconstruction_loss`` is differentiable with respect to
        ``token_nll``, and so is each term on its own. The total sums the
        terms whose weight is non-zero: a zero-weighted term is returned but cannot reach
        the total's value or gradient, even where it overflows.

    The stack is one autograd node whose backward writes the gradient in one pass
    (``recon_impl.stack``); ``torch.compile`` traces the same code (one graph with
    ``validate=False``), and under ``torch.func`` transforms autograd differentiates its
    two stages instead of the analytic backward.
    """
    if validate:
        check_config_type("config", config, ReconstructionLossConfig)
        valid = check_tensor_metadata(token_nll, zfree_token_nll, mask)
        check_values_readable(token_nll, zfree_token_nll, mask)
    else:
        valid = mask if mask.dtype == torch.bool else mask != 0

    plan = Plan.of(config, compute_dtype(token_nll, zfree_token_nll), validate=validate)
    zfree_token_nll = zfree_token_nll.detach()
    if torch._C._are_functorch_transforms_active():
        # torch.func transforms differentiate the same two stages with autograd
        by_name, checksum, _ = stack_values(token_nll, zfree_token_nll, valid, plan)
    else:
        outputs = ReconstructionStack.apply(token_nll, zfree_token_nll, valid, plan)
        names = (*RECONSTRUCTION_LOSS_NAMES, *(("checksum",) if validate else ()))
        by_name = dict(zip(names, outputs, strict=True))
        checksum = by_name.pop("checksum", None)
    values = ReconstructionLosses(**by_name)
    if checksum is not None and not math.isfinite(checksum.item()):  # validation's one sync
        raise_for_invalid_values(
            token_nll,
            zfree_token_nll,
            valid,
            values,
            dtype=plan.dtype,
            epsilon=config.example_inverse_surprisal_epsilon,
            scale=config.zfree_reference_scale,
            token_divisors=lambda: (
                example_statistics(token_nll.detach(), zfree_token_nll, valid, plan).token_divisors
            ),
        )
    return values
