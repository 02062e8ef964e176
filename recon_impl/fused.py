r"""The eager fast path of the reconstruction stack: a few passes over the data, one graph node.

All eight outputs come out of one ``torch.autograd.Function``. Its forward reads
``token_nll``, ``zfree_token_nll`` and the mask once each, clearing padded positions, and
reduces them to per-example sums: the valid-token counts, the sums of b and l, and for
``alpha > 0`` those of p*b, p*l and the share numerators p (plus the row minimum of b for
validation, and the row maximum where shares are scaled by it). Everything after that is
arithmetic on ``[B]`` vectors (:func:`per_example_stage`), done in numpy for CPU tensors
(where torch's per-call cost would dominate) and in torch elsewhere. The backward writes
the gradient in one pass over the data, using that every term is linear in :math:`l` for
fixed :math:`b`:

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
:math:`\alpha \le 2`, else :math:`s = b_\max`, which maps to exactly 1. The choice is about
the shares that underflow (a tail token's :math:`(b/s)^\alpha` below the dtype's smallest
normal number carries an absolute error of up to half the smallest subnormal, and the
normalisation divides that error by the share sum): with :math:`s = b_\max` the sum is at
least 1; with :math:`s = \sum b` it is at least :math:`\min(1, T^{1-\alpha})`, which for
:math:`\alpha \le 2` costs at most a factor :math:`T`, and spares the max pass. Beyond,
:math:`T^{\alpha - 1}` grows without bound (float32 would flush tail shares of 1e-30 to 0),
and no finite :math:`\alpha` loses the row to the maximum. ``alpha == 0.5`` uses
:math:`\mathrm{rsqrt}(|s/b|)`. A row whose valid :math:`b` are all 0 gets uniform shares, and
:math:`\kappa_i = 1` where :math:`\bar b_i = 0`.

Validation reads the per-example results, with one host sync (none at all for CPU
tensors); only when a rule trips does
:func:`~recon_impl.validation.raise_for_invalid_values` scan the data. The row minimum of b,
for the sign rule, is the one read of the data it adds.

Much of a call's cost at moderate sizes is per call, not per element: every torch call
costs microseconds however small its tensors, a numpy call on ``[B]`` vectors a few, and
the autograd node its own share. So the code keeps those calls few: reductions return
fresh tensors (no table slices to write into), the ``[B]``-vector arithmetic writes its
rows with ``out=`` and takes its constants ready-made from the plan (:class:`StackPlan`,
built once per configuration), the forward also computes the backward's coefficients for
``total.backward()`` (on the host, inside the error state it has set anyway), and the
backward takes ``once_differentiable``'s ``no_grad`` wrapper only when grad mode is on.
Per element, each buffer is one ``[B, T]`` tensor, allocated where it is first written,
so that memory freed by one call (or within it: the masked l before the backward's
gradient) is reused rather than faulted in afresh.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from recon_impl.config import ReconstructionLossConfig
from recon_impl.validation import raise_for_invalid_values

_INTEGER_VIEW = {2: torch.int16, 4: torch.int32, 8: torch.int64}
_FLOAT_BYTES = {torch.float16: 2, torch.bfloat16: 2, torch.float32: 4, torch.float64: 8}
_NUMPY_DTYPE = {torch.float32: np.float32, torch.float64: np.float64}
_NUMPY_INTEGER = {torch.int16: np.int16, torch.int32: np.int32, torch.int64: np.int64}

# Rows of the [8, B] per-example coefficients (see per_example_stage): per valid token,
# d R_raw/dl and d R_dist/dl; per unit of p, d R_tok/dp and d R_cc/dp; btok and kappa;
# bbar + eps (d R_ex/dl is UNIFORM over it); 1.0 where the shares fall back to uniform.
UNIFORM, DISTRIBUTION, SHARE, CORRECTED, TOKEN_BASE, KAPPA, DIVISOR, ON_MASK = range(8)


@dataclass(frozen=True)
class StackPlan:
    """Everything the fused stack needs besides the tensors (hashable, so cacheable), with
    the constants derived from it computed once."""

    dtype: torch.dtype
    alpha: float
    epsilon: float
    scale: float
    weights: tuple[float, float, float, float, float]
    validate: bool
    # Derived (see __post_init__).
    integer: torch.dtype = field(init=False, compare=False)
    tiny: float = field(init=False, compare=False)
    exponent: float = field(init=False, compare=False)
    epsilon_vanishes: bool = field(init=False, compare=False)
    host_constants: _Constants = field(init=False, compare=False, repr=False)
    device_constants: _Constants = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        finfo = torch.finfo(self.dtype)
        host_dtype = _NUMPY_DTYPE.get(self.dtype, np.float64)
        derived = {
            # the integer dtype as wide as dtype, for zero_padded
            "integer": _INTEGER_VIEW[finfo.bits // 8],
            "tiny": finfo.tiny,
            # An alpha below the dtype's smallest normal gives the same shares (1 for b > 0,
            # to rounding) and keeps 0^alpha = 0 where it would round to 0^0.
            "exponent": max(self.alpha, finfo.tiny),
            # epsilon rounds to 0 in dtype: bbar + eps is 0 on dropped rows (see below)
            "epsilon_vanishes": bool(host_dtype(self.epsilon) == 0.0),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "host_constants", _Constants.for_plan(self, host=True))
        object.__setattr__(self, "device_constants", _Constants.for_plan(self, host=False))

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

    @property
    def max_scaled(self) -> bool:
        """Whether shares are scaled by the row maximum rather than the row sum (module
        docstring): for alpha > 2, where the row sum would let a tail share's underflow
        error grow as T^(alpha - 1), and a single token's b * (1/b), a rounding below 1,
        vanish under a huge alpha."""
        return self.alpha > 2.0


def keep_mask(valid: Tensor, dtype: torch.dtype) -> Tensor:
    """The bool mask as contiguous 0/1 integers as wide as ``dtype``, for :func:`zero_padded`."""
    integer = _INTEGER_VIEW[_FLOAT_BYTES[dtype]]
    if integer is torch.int32 and valid.is_contiguous():
        return valid.int()  # the common case: .int() parses faster than .to(...)
    return valid.to(integer, memory_format=torch.contiguous_format)


def zero_padded(x: Tensor, keep: Tensor) -> Tensor:
    """``x`` where ``keep`` is 1 and +0.0 where it is 0: ``torch.where(keep, x, 0)`` bit for bit.

    The product is taken on the integer view (bits times 1 or times 0), so a NaN or inf at a
    cleared position cannot leak. ``keep`` comes from :func:`keep_mask` for ``x.dtype``;
    ``x`` broadcasts against it. The result has ``keep``'s layout (the first operand of an
    elementwise op sets it), contiguous for a :func:`keep_mask`, whatever ``x``'s strides.
    """
    return (keep * x.view(keep.dtype)).view(x.dtype)


@dataclass(frozen=True, eq=False)
class _Constants:
    """The scalars the per-example arithmetic uses, in the form each back end takes fastest:
    0-d arrays of the dtype for numpy (cheaper operands than Python floats), Python floats
    for torch (no host-to-device copies)."""

    one: Any
    scale: Any
    epsilon: Any
    tiny: Any
    weights: Any  # the five weights (an array for numpy, a tuple for torch)

    @staticmethod
    def for_plan(plan: StackPlan, host: bool) -> _Constants:
        values = (1.0, plan.scale, plan.epsilon, plan.tiny)
        if not host:
            return _Constants(*values, weights=plan.weights)
        dtype = _NUMPY_DTYPE.get(plan.dtype, np.float64)
        arrays = [np.array(value, dtype=dtype) for value in (*values, plan.weights)]
        for array in arrays:
            array.flags.writeable = False  # shared by every call with this plan
        return _Constants(*arrays)


class _HostArrays:
    """The per-example arithmetic in numpy, for CPU tensors (read without copying)."""

    precomputes_total = True  # see ReconstructionStack.forward
    divide = staticmethod(np.divide)
    add = staticmethod(np.add)
    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    matmul = staticmethod(np.matmul)
    sum = staticmethod(np.add.reduce)  # ndarray.sum goes through a Python wrapper

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = _NUMPY_DTYPE[dtype]

    def constants(self, plan: StackPlan) -> _Constants:
        return plan.host_constants

    def asarray(self, tensor: Tensor) -> np.ndarray:
        return tensor.numpy()

    def tensor(self, x: np.ndarray) -> Tensor:
        return torch.from_numpy(x)

    def empty(self, shape: tuple[int, ...], like: np.ndarray) -> np.ndarray:
        return np.empty(shape, dtype=self.dtype)

    def floating(self, x: np.ndarray) -> np.ndarray:
        return x.astype(self.dtype)

    def kept_examples(self, counts: np.ndarray) -> tuple[int, Any]:
        """B', the examples with a valid token, and 1/B' in the dtype (NaN when B' = 0)."""
        kept = int(np.count_nonzero(counts))
        return kept, self.dtype(1.0 / kept if kept else math.nan)

    def any(self, x: np.ndarray) -> bool:
        """Whether x holds a True; where that would cost a host sync, True."""
        return bool(np.logical_or.reduce(x))  # ndarray.any goes through a Python wrapper

    def all_at_least(self, x: np.ndarray, low: Any) -> bool:
        """Whether every entry of x is >= low; where that would cost a host sync, False."""
        return x.size == 0 or bool(np.minimum.reduce(x) >= low)

    def weighted_sum(self, weights: np.ndarray, x: np.ndarray) -> Any:
        return weights @ x

    def integer_view(self, x: np.ndarray, integer: torch.dtype) -> np.ndarray:
        return x.view(_NUMPY_INTEGER[integer])

    def where(self, condition: Any, x: Any, y: Any) -> np.ndarray:
        return np.where(condition, x, y)

    def ratio_or_one(self, numerator: np.ndarray, denominator: np.ndarray, out: np.ndarray) -> Any:
        """numerator/denominator where denominator > 0, else 1 (no 0/0 is evaluated)."""
        out.fill(1.0)
        return np.divide(numerator, denominator, out=out, where=denominator > 0)

    def upstream(self, plan: StackPlan, grads: tuple[Tensor | None, ...]) -> np.ndarray:
        """The upstream gradient of each term, a_k = g_k + w_k g_total (None counts as 0)."""
        total = grads[7]
        if total is None:
            upstream = np.zeros(5, dtype=self.dtype)
        else:
            upstream = plan.host_constants.weights * total.numpy()
        for k in range(5):
            if grads[k] is not None:
                upstream[k] += grads[k].numpy()
        return upstream

    def all_hold(self, some_kept: Any, total: Any, b_min: np.ndarray | None) -> bool:
        """Whether some example is kept, ``total`` is finite and ``b_min`` (if any) >= 0."""
        return bool(
            some_kept and math.isfinite(total) and (b_min is None or np.minimum.reduce(b_min) >= 0)
        )

    def errors_ignored(self) -> contextlib.AbstractContextManager[Any]:
        return np.errstate(divide="ignore", invalid="ignore", over="ignore")


class _DeviceArrays:
    """The same arithmetic in torch, on the tensors' own device (no host round trip)."""

    precomputes_total = False  # checking for a unit upstream gradient would cost a sync
    divide = staticmethod(torch.div)
    add = staticmethod(torch.add)
    maximum = staticmethod(torch.clamp_min)  # with a Python float
    minimum = staticmethod(torch.minimum)  # with a 0-d tensor (NaN propagates)
    matmul = staticmethod(torch.matmul)
    sum = staticmethod(torch.sum)

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def constants(self, plan: StackPlan) -> _Constants:
        return plan.device_constants

    def asarray(self, tensor: Tensor) -> Tensor:
        return tensor

    def tensor(self, x: Tensor) -> Tensor:
        return x

    def empty(self, shape: tuple[int, ...], like: Tensor) -> Tensor:
        return like.new_empty(shape, dtype=self.dtype)

    def floating(self, x: Tensor) -> Tensor:
        return x.to(self.dtype)

    def kept_examples(self, counts: Tensor) -> tuple[Tensor, Tensor]:
        kept = torch.count_nonzero(counts).to(self.dtype)
        return kept, torch.where(kept > 0, 1.0 / kept, math.nan)

    def any(self, x: Tensor) -> bool:
        return True  # no host sync

    def all_at_least(self, x: Tensor, low: Any) -> bool:
        return False  # no host sync

    def weighted_sum(self, weights: tuple[float, ...], x: Tensor) -> Tensor:
        # Python-float weights: no host-to-device copy
        return sum((w * v for w, v in zip(weights, x, strict=True)), x.new_zeros(()))

    def integer_view(self, x: Tensor, integer: torch.dtype) -> Tensor:
        return x.view(integer)

    def where(self, condition: Any, x: Any, y: Any) -> Tensor:
        return torch.where(condition, x, y)

    def ratio_or_one(self, numerator: Tensor, denominator: Tensor, out: Tensor) -> Tensor:
        positive = denominator > 0
        return out.copy_(torch.where(positive, numerator / denominator, 1.0))

    def upstream(self, plan: StackPlan, grads: tuple[Tensor | None, ...]) -> Tensor:
        total = grads[7]
        like = next(g for g in (*grads[:5], total) if g is not None)
        parts = []
        for k, w in enumerate(plan.weights):
            part = like.new_zeros(()) if total is None else w * total
            parts.append(part if grads[k] is None else part + grads[k])
        return torch.stack(parts)

    def all_hold(self, some_kept: Tensor, total: Tensor, b_min: Tensor | None) -> bool:
        checks = some_kept & torch.isfinite(total)
        if b_min is not None:
            checks = checks & (b_min.min() >= 0)
        return bool(checks)  # the host sync

    def errors_ignored(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()


def per_example_stage(
    xp: _HostArrays | _DeviceArrays,
    plan: StackPlan,
    counts: Any,
    b_sum: Any,
    l_sum: Any,
    share_sums: tuple[Any, Any, Any] | None,
    b_min: Any | None,
) -> tuple[Any, Any, bool, bool]:
    """From the per-example reductions to the eight values (in ``RECONSTRUCTION_LOSS_NAMES``
    order), the ``[8, B]`` per-example coefficients, whether any example's shares fall back
    to the mask (row ``ON_MASK``; always True on a device, where finding out would cost a
    host sync) and the validation verdict (always True unless ``plan.validate``).

    ``counts`` are the valid tokens per example, ``b_sum`` and ``l_sum`` the sums of b and l
    over them, ``share_sums`` the sums of p*b, p*l and p (None for ``alpha == 0``) and
    ``b_min`` the row minimum of b (None when not validating or when T = 0).

    Every term is linear in l: each is a per-example sum (of l, or of p*l for the
    share-weighted terms) times a per-example coefficient, summed over examples. Those
    coefficients are the term's gradient per valid token (per unit of p), and the backward
    pass uses them as they are (rows ``UNIFORM`` to ``ON_MASK``; for ``alpha == 0`` only
    ``UNIFORM``, ``DISTRIBUTION`` and ``DIVISOR`` are written).

    The work is a few dozen operations on ``[B]`` vectors, each costing far more in call
    overhead than in arithmetic, so every one counts: rows are written in place with
    ``out=``, constants come ready-made from the plan, and the values are dot products of
    coefficient rows with the per-example sums.
    """
    k = xp.constants(plan)
    batch = b_sum.shape[0]
    coefficients = xp.empty((8, batch), b_sum)
    values = xp.empty((8,), b_sum)
    count = xp.floating(counts)
    n = xp.maximum(count, k.one)  # empty rows: their sums are 0, so their means are 0
    kept_examples, per_kept_example = xp.kept_examples(counts)  # B', 1/B'
    # 1/B' for kept examples (count >= 1), 0 for dropped ones (count = 0)
    weight = xp.minimum(count, per_kept_example)
    b_mean = b_sum / n

    # Per valid token: d R_raw/dl = weight/n and d R_dist/dl = weight/(n c); R_raw and
    # R_dist are those rows times l_sum.
    uniform = xp.divide(weight, n, out=coefficients[UNIFORM])
    xp.divide(uniform, k.scale, out=coefficients[DISTRIBUTION])
    xp.matmul(coefficients[UNIFORM : DISTRIBUTION + 1], l_sum, out=values[0:2])
    # R_ex = mean_i lbar_i / (bbar_i + eps): divided, not multiplied by a reciprocal, which
    # overflows for a tiny eps (l_sum first, so that 0/tiny is 0). On dropped rows bbar = 0;
    # where eps is 0 in the dtype, + 1 there keeps the divisor positive (their weight is 0).
    divisor = coefficients[DIVISOR]
    if plan.epsilon_vanishes:
        xp.add(b_mean, count == 0, out=divisor)
    else:
        xp.add(b_mean, k.epsilon, out=divisor)
    values[2] = (l_sum / divisor) @ uniform

    on_mask = False
    if share_sums is None:
        # alpha = 0: uniform shares 1/n_i (0^0 = 1): ltok = lbar, btok = bbar, kappa = 1, so
        # R_tok = R_raw, R_cc = R_dist; the backward folds the share rows into the mask row.
        values[3:5] = values[0:2]
        values[5] = b_mean @ weight
        values[6] = per_kept_example / per_kept_example  # 1 (NaN when no example is kept)
    else:
        share_b_sum, share_l_sum, share_sum = share_sums
        # Rows whose valid b are all 0 (and empty rows) have no share mass: their shares are
        # uniform, 1/n_i on the mask row (and their b sums are 0, so btok = bbar = 0 there).
        fallback = share_sum == 0
        on_mask = xp.any(fallback)  # rare: skip the selections when no row falls back
        if on_mask:
            share_sum = xp.where(fallback, n, share_sum)
            share_l_sum = xp.where(fallback, l_sum, share_l_sum)
            coefficients[ON_MASK] = fallback  # uniform shares live on the mask row
        token_base = xp.divide(share_b_sum, share_sum, out=coefficients[TOKEN_BASE])
        # kappa = btok/bbar, and 1 where bbar = 0
        kappa = xp.ratio_or_one(token_base, b_mean, out=coefficients[KAPPA])
        # Per unit of p: d R_tok/dp = weight/sum(p), d R_cc/dp = that over kappa c.
        share = xp.divide(weight, share_sum, out=coefficients[SHARE])
        xp.divide(share, kappa * k.scale, out=coefficients[CORRECTED])
        xp.matmul(coefficients[SHARE : CORRECTED + 1], share_l_sum, out=values[3:5])
        xp.matmul(coefficients[TOKEN_BASE : KAPPA + 1], weight, out=values[5:7])
    values[7] = xp.weighted_sum(k.weights, values[0:5])  # the total, sum_k w_k R_k
    if batch == 0:
        values = values * math.nan  # B = 0: no valid token, 0/0 like the other means

    valid = True
    if plan.validate and batch == 0:
        valid = False
    elif plan.validate:
        # A NaN or inf at a valid position makes a per-example sum non-finite, and with it
        # a value (every kept example has a positive coefficient in R_raw, and b reaches
        # btok or kappa), and so the values' sum (which a finite overflow can also make
        # inf: the scan then finds nothing); so does a kept example with bbar = 0 when
        # epsilon = 0 (R_ex). A negative b makes the row minimum negative. One host sync
        # (none with numpy).
        valid = xp.all_hold(kept_examples >= 1, xp.sum(values), b_min)
    return values, coefficients, on_mask, valid


_HOST = {dtype: _HostArrays(dtype) for dtype in _NUMPY_DTYPE}


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
        dtype, alpha, integer = plan.dtype, plan.alpha, plan.integer
        l = token_nll if token_nll.dtype == dtype else token_nll.to(dtype)
        b = zfree_token_nll if zfree_token_nll.dtype == dtype else zfree_token_nll.to(dtype)
        length = l.shape[1]
        xp = arrays_for(l.device, dtype)

        # b and l with padded positions cleared (zero_padded). Every buffer is one [B, T]
        # tensor, allocated where it is first written: the masked l, not needed after the
        # forward, is freed before the backward allocates the gradient, which can then take
        # its place (memory the process has already touched, not fresh pages). All take the
        # contiguous layout of keep, so that the sums below add in the same order whatever
        # the inputs' strides.
        keep = keep_mask(valid, dtype)
        b_valid = zero_padded(b, keep)
        l_valid = zero_padded(l, keep)
        counts = xp.asarray(torch.sum(keep, 1, dtype=integer))
        b_sum = xp.asarray(torch.sum(b_valid, 1))
        l_sum = xp.asarray(torch.sum(l_valid, 1))
        b_min = xp.asarray(torch.amin(b_valid, 1)) if plan.validate and length else None

        shares = share_sums = None
        with xp.errors_ignored():
            if alpha == 1.0:
                # p = b/sum(b), in place of b: the shares of (b/b_max)^1 without a max pass or
                # a power (the row sum lies in [b_max, T*b_max]: nothing overflows or
                # underflows). Then sum(p*l), and sum(p*b) = |p|^2 sum(b) from the row norm.
                k = xp.constants(plan)
                b_scale = xp.maximum(b_sum, k.tiny)
                inverse = k.one / b_scale
                shares = b_valid.mul_(xp.tensor(inverse[:, None]))
                share_l_sum = xp.asarray(torch.sum(l_valid.mul_(shares), 1))
                norm = xp.asarray(torch.linalg.vector_norm(shares, 2, 1))
                share_sums = (norm * norm * b_scale, share_l_sum, b_sum / b_scale)
            elif alpha == 0.5:
                # p = sqrt(b/s) as rsqrt(|s/b|), s the row sum (no share underflows): sqrt is
                # slow on zeros (padding) on some CPUs, rsqrt of inf is not; the abs maps
                # b = -0.0 to +inf like +0.0 (a negative b is a validation error anyway).
                k = xp.constants(plan)
                scale = xp.tensor(xp.where(b_sum > 0, b_sum, k.one)[:, None])
                shares = torch.div(scale, b_valid).abs_().rsqrt_()
                # p*b and p*l in place (the masked b and l are not needed any more), then
                # their sums, and that of p.
                share_sums = (
                    xp.asarray(torch.sum(b_valid.mul_(shares), 1)),
                    xp.asarray(torch.sum(l_valid.mul_(shares), 1)),
                    xp.asarray(torch.sum(shares, 1)),
                )
            elif alpha != 0.0:
                # p = x^alpha with x = b/s, in place of b. s is the row sum for alpha <= 2
                # (the share sum is then >= min(1, T^(1 - alpha)) >= 1/T: an underflowing
                # share's error grows by at most T), else the row maximum, which maps to
                # exactly 1 so that the share sum is >= 1 (a division, not a reciprocal). A
                # row sum is applied as a reciprocal, cheaper than a division, unless that
                # could overflow (a subnormal sum).
                k = xp.constants(plan)
                max_scaled = plan.max_scaled
                b_scale = xp.asarray(torch.amax(b_valid, 1)) if max_scaled and length else b_sum
                b_scale = xp.where(b_scale > 0, b_scale, k.one)
                if max_scaled or not xp.all_at_least(b_scale, k.tiny):
                    scaled = b_valid.div_(xp.tensor(b_scale[:, None]))
                else:
                    scaled = b_valid.mul_(xp.tensor((k.one / b_scale)[:, None]))
                shares = torch.pow(scaled, plan.exponent)
                # p*x and p*l in place (x and the masked l are not needed any more), then
                # their sums, and that of p; sum(p*b) = s sum(p*x).
                share_x_sum = xp.asarray(torch.sum(scaled.mul_(shares), 1))
                share_sums = (
                    share_x_sum * b_scale,
                    xp.asarray(torch.sum(l_valid.mul_(shares), 1)),
                    xp.asarray(torch.sum(shares, 1)),
                )

            values, coefficients, on_mask, inputs_valid = per_example_stage(
                xp, plan, counts, b_sum, l_sum, share_sums, b_min
            )
            # The usual backward is total.backward(): on the host, its coefficients come
            # cheaper here, with the arithmetic's error state already set.
            unit_total = None
            if ctx.needs_input_grad[0] and xp.precomputes_total:
                unit_total = gradient_coefficients(
                    xp, coefficients, on_mask, shares is not None, plan.host_constants.weights
                )
        if not inputs_valid:
            raise_for_invalid_values(token_nll, zfree_token_nll, valid, epsilon=plan.epsilon)

        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(keep, *(() if shares is None else (shares,)))
            ctx.state = (xp, plan, coefficients, on_mask, unit_total, token_nll.dtype)
        ctx.set_materialize_grads(False)
        outputs = xp.tensor(values).unbind()
        ctx.mark_non_differentiable(outputs[5], outputs[6])
        return outputs

    @staticmethod
    def backward(  # type: ignore[override]
        ctx, *grads: Tensor | None
    ) -> tuple[Tensor | None, None, None, None]:
        # The engine runs a backward with grad mode off unless create_graph=True; only then
        # is once_differentiable's guard (an error on differentiating this gradient) needed,
        # and its no_grad context costs a noticeable part of a small call.
        if torch.is_grad_enabled():
            return _stack_backward_once_differentiable(ctx, *grads)
        return _stack_backward(ctx, *grads)


def gradient_coefficients(
    xp: _HostArrays | _DeviceArrays, coefficients: Any, on_mask: bool, shares: bool, upstream: Any
) -> tuple[Any, Any]:
    """The backward's per-example coefficients for the upstream gradients ``upstream`` =
    (a_raw, a_dist, a_ex, a_tok, a_cc): u_i per valid token and v_i per unit of p (None
    without shares, ``alpha == 0``, where the share rows are the uniform rows, on the mask).
    """
    # per valid token: a_raw d R_raw/dl + a_dist d R_dist/dl + a_ex d R_ex/dl, the last
    # divided by bbar + eps, not multiplied by its (overflowing) reciprocal
    u = coefficients[UNIFORM] * upstream[2] / coefficients[DIVISOR]
    if not shares:
        u += (upstream[0:2] + upstream[3:5]) @ coefficients[UNIFORM : DISTRIBUTION + 1]
        return u, None
    v = upstream[3:5] @ coefficients[SHARE : CORRECTED + 1]  # per unit of p
    u += upstream[0:2] @ coefficients[UNIFORM : DISTRIBUTION + 1]
    if on_mask:
        u += coefficients[ON_MASK] * v  # rows whose shares are uniform
    return u, v


def _stack_backward(ctx: Any, *grads: Tensor | None) -> tuple[Tensor | None, None, None, None]:
    """The backward of :class:`ReconstructionStack` (module docstring): m u + p v."""
    own, total = grads[0:5], grads[7]  # the diagnostics (5 and 6) carry no gradient
    only_total = all(g is None for g in own)
    if not ctx.needs_input_grad[0] or (total is None and only_total):
        return None, None, None, None
    keep, *shares = ctx.saved_tensors
    xp, plan, coefficients, on_mask, unit_total, input_dtype = ctx.state
    if only_total and unit_total is not None and total.item() == 1.0:
        # total.backward(): the coefficients of a unit upstream gradient on the total,
        # computed by the forward (on the host; .item() costs no device sync there)
        u, v = unit_total
    else:
        # a_k = g_k + w_k g_total for the five terms, in RECONSTRUCTION_TERM_NAMES order
        upstream = xp.upstream(plan, grads)
        with xp.errors_ignored():
            u, v = gradient_coefficients(xp, coefficients, on_mask, bool(shares), upstream)
    # u_i at valid positions, 0 at padded ones: zero_padded, with u's integer view taken
    # before it becomes a tensor; then + v_i p_it, p being 0 at padded ones.
    grad = (keep * xp.tensor(xp.integer_view(u, keep.dtype)[:, None])).view(plan.dtype)
    if shares:
        grad.addcmul_(shares[0], xp.tensor(v[:, None]))
    if grad.dtype != input_dtype:
        grad = grad.to(input_dtype)
    return grad, None, None, None


_stack_backward_once_differentiable = once_differentiable(_stack_backward)
