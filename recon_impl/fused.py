r"""The eager fast path of the reconstruction stack: a few passes over the data, one graph node.

All eight outputs come out of one ``torch.autograd.Function``. Its forward reads
``token_nll``, ``zfree_token_nll`` and the mask once each, clearing padded positions, and
reduces them to the valid-token counts and a ``[7, B]`` table of per-example sums (of b, l,
and for ``alpha > 0`` of p*b, p*l and the share numerators p; the row maximum and minimum of
b where needed). Everything after that is arithmetic on ``[B]`` vectors, done in numpy for
CPU tensors (where torch's per-call cost would dominate) and in torch elsewhere. The
backward writes the gradient in one pass over the data, using that every term is linear in
:math:`l` for fixed :math:`b`:

.. math::

    \frac{\partial}{\partial l_{it}} \sum_k a_k R_k = m_{it}\,u_i + p_{it}\,v_i,

where :math:`a_k` is the upstream gradient of term :math:`k` (plus :math:`w_k` times that of
the total), :math:`m` the mask, :math:`p` the share numerators (0 at padded positions) and
:math:`u_i, v_i` per-example coefficients. Each of the five terms keeps its own gradient;
the two diagnostics carry none, and nothing flows to ``zfree_token_nll``. The coefficients
depend on :math:`b`, the weights and the upstream gradients, never on :math:`l`: on valid
inputs they are finite, so the gradient is exactly 0 at padded positions.

Padded positions are cleared with :func:`zero_padded`, the integer view of the tensor times
the 0/1 mask: ``torch.where(mask, x, 0)`` bit for bit (NaN and inf included) with no
floating-point multiplication by the mask, and several times cheaper than ``torch.where``
on CPUs, where that is not vectorised.

Shares are MATH.md's ``softmax(alpha * log b)``, computed as :math:`(b/s)^\alpha` over their
sum, with :math:`s` a per-example scale. ``alpha == 0``: uniform, never materialised.
``alpha == 1``: :math:`s = \sum b`, no power. Otherwise :math:`s = \sum b` while
:math:`\alpha \log_2 T \le 64` (the largest share is then at least :math:`T^{-\alpha} \ge
2^{-64}`: nothing underflows, and no max pass), else :math:`s = b_\max`, which maps to
exactly 1, so that no finite :math:`\alpha` loses the row. ``alpha == 0.5`` uses
:math:`\mathrm{rsqrt}(|s/b|)`. A row whose valid :math:`b` are all 0 gets uniform shares, and
:math:`\kappa_i = 1` where :math:`\bar b_i = 0`.

Validation reads the per-example results, with one host sync (none at all for CPU
tensors); only when a rule trips does
:func:`~recon_impl.validation.raise_for_invalid_values` scan the data. The row minimum of b,
for the sign rule, is the one read of the data it adds.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from recon_impl.config import ReconstructionLossConfig
from recon_impl.validation import raise_for_invalid_values

_INTEGER_VIEW = {2: torch.int16, 4: torch.int32, 8: torch.int64}

# Rows of the per-example table: the sums of b, l, p*b, p*l and p over valid positions,
# the row maximum of b (for shares scaled by it) and its row minimum (for validation).
B_SUM, L_SUM, SHARE_B_SUM, SHARE_L_SUM, SHARE_SUM, B_MAX, B_MIN = range(7)


@dataclass(frozen=True)
class StackPlan:
    """Everything the fused stack needs besides the tensors (hashable, so cacheable)."""

    dtype: torch.dtype
    alpha: float
    epsilon: float
    scale: float
    weights: tuple[float, float, float, float, float]
    validate: bool

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def from_config(
        config: ReconstructionLossConfig, dtype: torch.dtype, validate: bool
    ) -> StackPlan:
        return StackPlan(
            dtype=dtype,
            alpha=config.token_weight_alpha,
            epsilon=config.example_inverse_surprisal_epsilon,
            scale=config.zfree_reference_scale,
            weights=(
                config.raw_weight,
                config.distribution_normalized_weight,
                config.example_inverse_surprisal_weight,
                config.token_weighted_weight,
                config.normalized_concentration_corrected_token_weighted_weight,
            ),
            validate=validate,
        )

    @functools.cached_property
    def total_gradient_map(self) -> tuple[float, float, float, float]:
        """The total's gradient on the four coefficient columns (see ``per_example_stage``),
        per unit of its upstream gradient: w_raw + w_dist/c, w_ex, w_tok, w_cc/c."""
        w_raw, w_dist, w_ex, w_tok, w_cc = self.weights
        return (w_raw + w_dist / self.scale, w_ex, w_tok, w_cc / self.scale)


def keep_mask(valid: Tensor, dtype: torch.dtype) -> Tensor:
    """The bool mask as 0/1 integers as wide as ``dtype``, for :func:`zero_padded`."""
    return valid.to(_INTEGER_VIEW[torch.finfo(dtype).bits // 8])


def zero_padded(x: Tensor, keep: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``x`` where ``keep`` is 1 and +0.0 where it is 0: ``torch.where(keep, x, 0)`` bit for bit.

    The product is taken on the integer view (bits times 1 or times 0), so a NaN or inf at a
    cleared position cannot leak. ``keep`` comes from :func:`keep_mask` for ``x.dtype``;
    ``x`` broadcasts against it. With ``out`` (of ``x``'s dtype) the result is written there.
    """
    if out is None:
        return (x.view(keep.dtype) * keep).view(x.dtype)
    torch.mul(x.view(keep.dtype), keep, out=out.view(keep.dtype))
    return out


class _HostArrays:
    """The per-example arithmetic in numpy, for CPU tensors (read without copying)."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = np.float32 if dtype == torch.float32 else np.float64

    def asarray(self, tensor: Tensor) -> np.ndarray:
        return tensor.numpy()

    def floating(self, x: np.ndarray) -> np.ndarray:
        return x.astype(self.dtype)

    def zeros(self, shape: tuple[int, ...], like: np.ndarray) -> np.ndarray:
        return np.zeros(shape, dtype=self.dtype)

    def vector(self, values: Any, like: np.ndarray) -> np.ndarray:
        return np.array(values, dtype=self.dtype)

    def where(self, condition: Any, x: Any, y: Any) -> np.ndarray:
        return np.where(condition, x, y)

    def at_least(self, x: np.ndarray, low: float) -> np.ndarray:
        return np.maximum(x, low)

    def at_most(self, x: np.ndarray, high: float) -> np.ndarray:
        return np.minimum(x, high)

    def truth(self, x: Any) -> bool:
        return bool(x)

    def all_finite(self, x: np.ndarray) -> Any:
        return np.isfinite(x).all()

    def tensor(self, x: np.ndarray) -> Tensor:
        return torch.from_numpy(x)

    def errors_ignored(self) -> contextlib.AbstractContextManager[Any]:
        return np.errstate(divide="ignore", invalid="ignore", over="ignore")


class _DeviceArrays:
    """The same arithmetic in torch, on the tensors' own device (no host round trip)."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def asarray(self, tensor: Tensor) -> Tensor:
        return tensor

    def floating(self, x: Tensor) -> Tensor:
        return x.to(self.dtype)

    def zeros(self, shape: tuple[int, ...], like: Tensor) -> Tensor:
        return like.new_zeros(shape)

    def vector(self, values: Any, like: Tensor) -> Tensor:
        if all(isinstance(v, Tensor) for v in values):
            return torch.stack(values)
        return torch.tensor(values, dtype=self.dtype, device=like.device)

    def where(self, condition: Any, x: Any, y: Any) -> Tensor:
        return torch.where(condition, x, y)

    def at_least(self, x: Tensor, low: float) -> Tensor:
        return x.clamp(min=low)

    def at_most(self, x: Tensor, high: float) -> Tensor:
        return x.clamp(max=high)

    def truth(self, x: Any) -> bool:
        return bool(x)  # the host sync

    def all_finite(self, x: Tensor) -> Tensor:
        return torch.isfinite(x).all()

    def tensor(self, x: Tensor) -> Tensor:
        return x

    def errors_ignored(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()


def per_example_stage(
    xp: _HostArrays | _DeviceArrays, plan: StackPlan, counts: Any, table: Any
) -> tuple[Any, Any, bool]:
    """From the valid-token counts and the ``[7, B]`` table to the eight values (in
    ``RECONSTRUCTION_LOSS_NAMES`` order), the gradient coefficients and the validation
    verdict (always True unless ``plan.validate``).

    Every term is linear in l: each is a per-example sum (of l, or of p*l for the
    share-weighted terms) times a per-example coefficient, summed over examples. Those
    coefficients are the term's gradient per valid token (per unit of p), and the backward
    pass uses them as they are: the ``[5, B]`` rows d R_raw/dl, bbar + eps (d R_ex/dl is the
    first over it), d R_tok/dp, d (c R_cc)/dp, and 1.0 where the shares fall back to uniform
    (so that the share-row gradient moves to the mask row).
    """
    count = xp.floating(counts)
    b_sum, l_sum = table[B_SUM], table[L_SUM]
    epsilon, scale = plan.epsilon, plan.scale
    n = xp.at_least(count, 1.0)  # empty rows: their sums are 0, so their means are 0
    kept = xp.at_most(count, 1.0)  # 1.0 for kept examples, 0.0 for dropped ones
    kept_examples = kept.sum()  # B'
    weight = kept / kept_examples  # 1/B' for kept examples, 0 for dropped ones
    b_mean = b_sum / n
    if plan.alpha == 0.0:
        # Uniform shares 1/n_i (0^0 = 1): ltok = lbar, btok = bbar, kappa = 1.
        fallback = None
        share_sum, share_l_sum, token_b = n, l_sum, b_mean
    else:
        # Rows whose valid b are all 0 (and empty rows) have no share mass: their shares are
        # uniform, 1/n_i on the mask row (and their b sums are 0, so btok = bbar = 0 there).
        if plan.alpha == 1.0:
            # p = b * inverse with inverse = 1 / max(b_sum, tiny): sum(p) = b_sum * inverse,
            # and the table holds |p| (the row norm), sum(p*b) being sum(p^2) / inverse.
            b_scale = xp.at_least(b_sum, torch.finfo(plan.dtype).tiny)
            share_sum = b_sum / b_scale
            share_b_sum = table[SHARE_B_SUM] * table[SHARE_B_SUM] * b_scale
        else:
            share_sum, share_b_sum = table[SHARE_SUM], table[SHARE_B_SUM]
        fallback = share_sum == 0
        share_sum = xp.where(fallback, n, share_sum)
        share_l_sum = xp.where(fallback, l_sum, table[SHARE_L_SUM])
        token_b = share_b_sum / share_sum
        # kappa = btok/bbar, and 1 where bbar = 0 (the 0/0 of the other branch is dropped).
        kappa = xp.where(b_mean > 0, token_b / b_mean, 1.0)

    # Per example and valid token: d/dl of R_raw; of R_ex, that over bbar + eps (kept as a
    # divisor: its reciprocal overflows for a tiny eps); per unit of p, of R_tok and c*R_cc.
    # The + (1 - kept) keeps bbar + eps positive on dropped rows (weight 0).
    count_rows = b_sum.shape[0]
    coefficients = xp.zeros((5, count_rows), b_sum)
    uniform, divisor, share, share_cc, on_mask = coefficients
    uniform[...] = weight / n
    divisor[...] = (b_mean + epsilon) + (1.0 - kept)
    share[...] = weight / share_sum
    share_cc[...] = share if fallback is None else share / kappa
    if fallback is not None:
        on_mask[...] = fallback  # uniform shares live on the mask row
    raw = uniform @ l_sum
    example_inverse = (l_sum / n / divisor) @ weight
    token_weighted = share @ share_l_sum
    scaled_corrected = share_cc @ share_l_sum
    if fallback is None:
        base, concentration = token_b @ weight, kept_examples / kept_examples
    else:
        base, concentration = token_b @ weight, kappa @ weight
    distribution, corrected = raw / scale, scaled_corrected / scale
    w_raw, w_dist, w_ex, w_tok, w_cc = plan.weights
    total = (
        w_raw * raw
        + w_dist * distribution
        + w_ex * example_inverse
        + w_tok * token_weighted
        + w_cc * corrected
    )
    values = [raw, distribution, example_inverse, token_weighted, corrected]
    values = xp.vector([*values, base, concentration, total], b_sum)
    if b_sum.shape[0] == 0:
        values = values * math.nan  # B = 0: no valid token, 0/0 like the other means

    valid = True
    if plan.validate:
        # A NaN or inf at a valid position makes a per-example sum non-finite, and with it
        # a value (every kept example has a positive coefficient in R_raw, and b reaches
        # btok or kappa); so does a kept example with bbar = 0 when epsilon = 0 (R_ex). A
        # negative b makes the row minimum negative. One host sync (none with numpy).
        checks = (kept_examples >= 1) & xp.all_finite(values)
        valid = count_rows > 0 and xp.truth(checks & (table[B_MIN].min() >= 0))
    return values, coefficients, valid


_HOST = {torch.float32: _HostArrays(torch.float32), torch.float64: _HostArrays(torch.float64)}


def arrays_for(device: torch.device, dtype: torch.dtype) -> _HostArrays | _DeviceArrays:
    """Where the per-example arithmetic runs: numpy for CPU tensors, torch elsewhere."""
    return _HOST[dtype] if device.type == "cpu" else _DeviceArrays(dtype)


class ReconstructionStack(torch.autograd.Function):
    """``(token_nll, zfree_token_nll, valid, plan)`` -> the eight values, in
    ``RECONSTRUCTION_LOSS_NAMES`` order. ``zfree_token_nll`` comes detached and ``valid`` is
    the bool mask; the inputs are only read."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, token_nll: Tensor, zfree_token_nll: Tensor, valid: Tensor, plan: StackPlan
    ) -> tuple[Tensor, ...]:
        dtype, alpha = plan.dtype, plan.alpha
        l = token_nll if token_nll.dtype == dtype else token_nll.to(dtype)
        b = zfree_token_nll if zfree_token_nll.dtype == dtype else zfree_token_nll.to(dtype)
        batch, length = l.shape

        # data: b and l with padded positions cleared (zero_padded, written in place), then
        # for alpha > 0 the share numerators p. table: the per-example sums (see B_SUM...).
        keep = keep_mask(valid, dtype)
        integer = keep.dtype
        data = l.new_empty((2 if alpha in (0.0, 1.0) else 3, batch, length))
        data_bits = data.view(integer)
        torch.mul(b.view(integer), keep, out=data_bits[0])
        torch.mul(l.view(integer), keep, out=data_bits[1])
        b_valid = data[0]
        counts = keep.sum(dim=1, dtype=integer)
        table = l.new_empty((7, batch)) if length else l.new_zeros((7, batch))
        torch.sum(data[:2], dim=2, out=table[B_SUM : L_SUM + 1])
        if plan.validate and length:
            torch.amin(b_valid, dim=1, out=table[B_MIN])

        xp = arrays_for(l.device, dtype)
        host_table = xp.asarray(table)  # on the CPU, a view that follows the writes above
        shares = None
        if alpha == 1.0:
            # p = b/sum(b), in place of b: the shares of (b/b_max)^1 without a max pass or a
            # power (the row sum lies in [b_max, T*b_max]: nothing overflows or underflows).
            # Then sum(p*l), and sum(p*b) = sum(p^2) * sum(b) from the row norm of p.
            inverse = 1.0 / xp.at_least(host_table[B_SUM], torch.finfo(dtype).tiny)
            shares = b_valid.mul_(xp.tensor(inverse[:, None]))
            torch.sum(data[1].mul_(shares), dim=1, out=table[SHARE_L_SUM])
            torch.linalg.vector_norm(shares, dim=1, out=table[SHARE_B_SUM])
        elif alpha != 0.0:
            shares = data[2]
            # (b/s)^alpha with s the row sum when no share can underflow that way (the
            # largest is at least T^-alpha >= 2^-64), else the row maximum, which maps to
            # exactly 1 (a division, not a reciprocal) so that the share sum is >= 1.
            if alpha * math.log2(max(length, 2)) <= 64.0:
                scale = host_table[B_SUM]
            else:
                if length:
                    torch.amax(b_valid, dim=1, out=table[B_MAX])
                scale = host_table[B_MAX]
            scale = xp.tensor(xp.where(scale > 0, scale, 1.0)[:, None])
            if alpha == 0.5:
                # rsqrt(|s/b|): sqrt is slow on zeros (padding) on some CPUs, rsqrt of
                # inf is not; the abs maps b = -0.0 to +inf like +0.0 (a negative b is
                # a validation error anyway).
                torch.div(scale, b_valid, out=shares).abs_().rsqrt_()
            else:
                # An alpha below the dtype's smallest normal gives the same shares (1 for
                # b > 0, to rounding) and keeps 0^alpha = 0 where it would round to 0^0.
                exponent = max(alpha, torch.finfo(dtype).tiny)
                torch.div(b_valid, scale, out=shares).pow_(exponent)
            # p*b and p*l in place (the masked b and l are not needed any more), then their
            # sums and that of p in one reduction.
            data[:2].mul_(shares)
            torch.sum(data, dim=2, out=table[SHARE_B_SUM : SHARE_SUM + 1])

        with xp.errors_ignored():
            values, coefficients, inputs_valid = per_example_stage(
                xp, plan, xp.asarray(counts), host_table
            )
        if not inputs_valid:
            raise_for_invalid_values(token_nll, zfree_token_nll, valid, epsilon=plan.epsilon)

        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(keep, *(() if shares is None else (shares,)))
            ctx.coefficients = coefficients
            ctx.xp = xp
            ctx.plan = plan
            ctx.input_dtype = token_nll.dtype
        ctx.set_materialize_grads(False)
        outputs = xp.tensor(values).unbind()
        ctx.mark_non_differentiable(outputs[5], outputs[6])
        return outputs

    @staticmethod
    @once_differentiable
    def backward(  # type: ignore[override]
        ctx, *grads: Tensor | None
    ) -> tuple[Tensor | None, None, None, None]:
        if not ctx.needs_input_grad[0] or all(g is None for g in grads):
            return None, None, None, None
        keep, *shares = ctx.saved_tensors
        plan: StackPlan = ctx.plan
        xp = ctx.xp
        # The upstream gradient on each coefficient column: a_raw + a_dist/c, a_ex, a_tok,
        # a_cc/c, with a_k = g_k + w_k * g_total.
        g_raw, g_dist, g_ex, g_tok, g_cc, _, _, g_total = (
            0.0 if g is None else xp.asarray(g) for g in grads
        )
        c = plan.scale
        own = (g_raw + g_dist / c, g_ex, g_tok, g_cc / c)
        upstream = [x + m * g_total for x, m in zip(own, plan.total_gradient_map, strict=True)]
        uniform, divisor, share, share_cc, on_mask = ctx.coefficients
        a_raw, a_ex, a_tok, a_cc = upstream
        with xp.errors_ignored():
            v = share * a_tok + share_cc * a_cc  # per unit of p
            u = uniform * a_raw + uniform * a_ex / divisor  # per valid token
            u = u + on_mask * v if shares else u + v
        # u_i at valid positions, 0 at padded ones; then + v_i p_it, p being 0 at padded ones.
        grad = zero_padded(xp.tensor(u[:, None]), keep)
        if shares:
            grad.addcmul_(shares[0], xp.tensor(v[:, None]))
        if grad.dtype != ctx.input_dtype:
            grad = grad.to(ctx.input_dtype)
        return grad, None, None, None
