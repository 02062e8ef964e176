"""Every numerical tolerance of the project, derived from dtype and problem size.

An implementation's output is compared with the float64-or-better oracle evaluated on the
*same* inputs (low-precision inputs are first rounded, so input rounding is not counted).
What is left is the rounding of the computation itself, which this module bounds as

    |observed - expected| <= rtol * scale,   rtol = u * (BASE + PER_TOKEN * T + PER_ALPHA * alpha)

where ``u`` is the unit roundoff of the dtype the implementation computes in (float32 at
least, MATH.md "Precision"), ``T`` the padded length (naive summation of T terms can lose
T * u), ``alpha`` the tempering exponent (a share b_t^alpha / sum b^alpha has relative
condition number alpha in b: each rounding of b/b_max is raised to the alpha-th power),
and ``scale`` the magnitude the result is built from: the same quantity evaluated with
|l| in place of l, so that cancellation between signed losses is not blamed on the
implementation. The constants are generous by a small factor over the worst case seen
and never tuned to let a failing implementation pass.

Below the dtype's smallest normal number rounding errors are absolute, not relative
(gradual underflow: a rounding adds up to ``eta``, half the smallest subnormal). Tempered
shares reach there easily: (1/6)^52 is a subnormal float32. An underflowing share's error
travels to the outputs multiplied by what multiplies the share (l, b, 1/c, the weights), and
a careful implementation keeps it within a factor T of ``eta`` (the normalisation divides
it by a share sum of at least 1/T). So every comparison also allows

    atol = eta * (BASE + PER_TOKEN * T) * M,
    M = 1 + T + S_b + (1 + w_tok + w_cc) * S_l * (1 + 1/c),

with ``S_l``, ``S_b`` the mean over kept examples of the row sums of |l| and b: M bounds the
factor any output applies to a share (R_tok: S_l; R_cc: S_l/c; token_weighted_base_loss:
S_b; kappa: n_i <= T; the total: the weighted sum) and 1 that of an output's own rounding.
In float64 ``eta`` is 2.5e-324 and atol vanishes; in float32 it is 7e-46, and atol stays
below 1e-33 on the strategies' domain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from spec.terms import TERMS

if TYPE_CHECKING:
    from properties.cases import LossCase

BASE = 64.0
PER_TOKEN = 4.0
PER_ALPHA = 4.0


@dataclass(frozen=True)
class Tolerance:
    """``|observed - expected| <= rtol * scale + atol``."""

    rtol: float
    atol: float = 0.0

    def allows(self, observed: float, expected: float, scale: float) -> bool:
        return abs(observed - expected) <= self.rtol * abs(scale) + self.atol


def unit_roundoff(dtype: torch.dtype) -> float:
    """Half the machine epsilon of ``dtype``."""
    return torch.finfo(dtype).eps / 2


def computation_dtype(input_dtype: torch.dtype) -> torch.dtype:
    """The dtype an implementation computes in: float32 or better (MATH.md, "Precision")."""
    return input_dtype if torch.finfo(input_dtype).bits >= 32 else torch.float32


def output_tolerance(input_dtype: torch.dtype, *, length: int, alpha: float) -> Tolerance:
    """Tolerance of an output computed from ``input_dtype`` inputs of padded length ``length``."""
    u = unit_roundoff(computation_dtype(input_dtype))
    return Tolerance(rtol=u * (BASE + PER_TOKEN * length + PER_ALPHA * alpha))


def underflow_unit(dtype: torch.dtype) -> float:
    """eta: half the smallest subnormal of ``dtype``, the most a rounding below the smallest
    normal number can add."""
    info = torch.finfo(dtype)
    return info.smallest_normal * info.eps / 2


def share_amplification(case: LossCase) -> float:
    """M of the module docstring: a bound of the factor by which any output multiplies an
    absolute error in a share, plus 1 for the output's own rounding."""
    rows = [
        (
            [abs(l) for l, valid in zip(l_row, mask_row, strict=True) if valid],
            [b for b, valid in zip(b_row, mask_row, strict=True) if valid],
        )
        for l_row, b_row, mask_row in zip(
            case.token_nll, case.zfree_token_nll, case.mask, strict=True
        )
        if any(mask_row)
    ]
    if not rows:
        return 1.0
    row_sum_l = math.fsum(math.fsum(l) for l, _ in rows) / len(rows)
    row_sum_b = math.fsum(math.fsum(b) for _, b in rows) / len(rows)
    return amplification(row_sum_l, row_sum_b, case.shape[1], case.config)


def amplification(row_sum_l: float, row_sum_b: float, length: int, config) -> float:
    """M of the module docstring from ``S_l`` and ``S_b``, the mean over kept examples of the
    row sums of |l| and b, the padded length and the config."""
    share_weights = 1.0 + sum(
        getattr(config, term.weight_field) for term in TERMS if term.policy == "shares"
    )
    inverse_scale = 1.0 + 1.0 / config.zfree_reference_scale
    return 1.0 + length + row_sum_b + share_weights * row_sum_l * inverse_scale


def tolerance_from(
    dtype: torch.dtype, *, length: int, alpha: float, amplification: float, oracle: float = 0.0
) -> Tolerance:
    """The tolerance of every output: the rounding bound of :func:`output_tolerance`, plus
    the underflow allowance of the module docstring for share amplification M, plus
    ``oracle``, the relative error bound of the reference compared with (0 for the 50-digit
    oracle; ``spec.array_oracle.relative_error_bound`` for the one at training sizes)."""
    relative = output_tolerance(dtype, length=length, alpha=alpha)
    eta = underflow_unit(computation_dtype(dtype))
    atol = eta * (BASE + PER_TOKEN * length) * amplification
    return Tolerance(rtol=relative.rtol + oracle, atol=atol)


def case_tolerance(case: LossCase, *, alpha: float | None = None) -> Tolerance:
    """The tolerance of every output of ``case``: the rounding bound of
    :func:`output_tolerance` plus the underflow allowance of the module docstring."""
    if alpha is None:
        alpha = case.config.token_weight_alpha
    return tolerance_from(
        case.dtype, length=case.shape[1], alpha=alpha, amplification=share_amplification(case)
    )


def gradient_tolerance(
    input_dtype: torch.dtype, *, length: int, alpha: float, oracle: float = 0.0
) -> Tolerance:
    """Tolerance of d(output)/d(token_nll), compared norm-wise (relative to its largest entry).

    The gradient is computed like an output, then cast back to the input's dtype, which
    adds one unit roundoff of that dtype, or, for an entry below that dtype's smallest
    normal number, up to ``eta`` of it (float16 holds 1e-5 only as a subnormal, to 3e-8).
    ``oracle`` is the relative error bound of the reference, as in :func:`tolerance_from`.
    """
    computed = output_tolerance(input_dtype, length=length, alpha=alpha)
    return Tolerance(
        rtol=computed.rtol + unit_roundoff(input_dtype) + oracle,
        atol=underflow_unit(input_dtype),
    )


def mixed_gradient_tolerance(
    input_dtype: torch.dtype, *, length: int, alpha: float, outputs: int
) -> Tolerance:
    """Tolerance of d(sum_k a_k output_k)/d(token_nll) over ``outputs`` outputs, compared
    norm-wise relative to the largest entry of sum_k |a_k| |d output_k/dl| (so that
    cancellation between signed coefficients is not blamed on the implementation).

    Each output's gradient rounds as :func:`gradient_tolerance` says; combining ``outputs``
    upstream coefficients and their products adds at most ``2 (outputs + 1)`` unit roundoffs
    of the compute dtype, with the module docstring's margin of 2, as
    :func:`weighted_sum_tolerance`.
    """
    single = gradient_tolerance(input_dtype, length=length, alpha=alpha)
    combined = 4.0 * (outputs + 1) * unit_roundoff(computation_dtype(input_dtype))
    return Tolerance(rtol=single.rtol + combined, atol=single.atol)


def second_order_tolerance(
    input_dtype: torch.dtype, *, length: int, alpha: float, positions: int
) -> Tolerance:
    """Tolerance of d(sum_t u_t g_t)/d(v), the derivative of a gradient g = v dR/dl taken
    with ``create_graph=True`` with respect to its upstream gradient v, relative to
    max_t |dR/dl_t| * sum_t |u_t|.

    Each g_t is within :func:`gradient_tolerance` of its closed form (norm-wise: relative
    to the largest entry), and the sum over the ``positions`` entries adds one unit
    roundoff of the compute dtype per entry (naive summation), times ``PER_TOKEN`` as
    :func:`output_tolerance` counts a token.
    """
    single = gradient_tolerance(input_dtype, length=length, alpha=alpha)
    summed = PER_TOKEN * positions * unit_roundoff(computation_dtype(input_dtype))
    return Tolerance(rtol=single.rtol + summed, atol=single.atol * positions)


def cross_entropy_tolerance(
    logits_dtype: torch.dtype, *, vocab: int, largest: float, gradient: bool = False
) -> Tolerance:
    """Absolute tolerance of -log softmax(z)[y] over ``vocab`` classes computed from
    ``logits_dtype`` logits whose largest magnitude is ``largest``, or (``gradient``) of an
    entry of its gradient u (softmax(z) - onehot(y)) for upstream weights |u| <= 1.

    The loss is computed in float32 or better (API.md): a log-sum-exp over V terms and one
    subtraction, each rounding relative to |z| + log V, ``32 u (largest + log V + 1)`` with
    the module docstring's margin. A gradient entry rounds as much (the softmax is built
    from the same log-sum-exp), then once more in the cast to the logits' dtype, plus an
    eta of it below its smallest normal number.
    """
    u = unit_roundoff(computation_dtype(logits_dtype))
    atol = 32.0 * u * (largest + math.log(vocab) + 1.0)
    if gradient:
        atol += unit_roundoff(logits_dtype) + underflow_unit(logits_dtype)
    return Tolerance(rtol=0.0, atol=atol)


def weighted_sum_tolerance(result_dtype: torch.dtype, *, terms: int) -> Tolerance:
    """Tolerance of ``x_0 + w_1 x_1 + ... + w_k x_k`` computed in ``result_dtype`` (the
    total of ``compute_total_loss``), relative to ``|x_0| + sum |w_i x_i|``.

    Each product rounds once and each addition once, at most ``u`` times the sum of the
    magnitudes so far: ``2 (k + 1) u`` in all, whatever the order of the additions. The
    factor 2 over that is the module docstring's margin. (The rounding of ``x_0`` itself,
    the reconstruction total, is its own tolerance's: ``case_tolerance``.)
    """
    u = unit_roundoff(computation_dtype(result_dtype))
    return Tolerance(rtol=4.0 * (terms + 1) * u)


def weight_gradient_tolerance(term_dtype: torch.dtype) -> Tolerance:
    """Tolerance of d(total_loss)/d(a) = w for an auxiliary term ``a`` of ``term_dtype``,
    relative to ``|w|``: the gradient is the weight rounded once to the term's dtype (a
    unit roundoff), with the module docstring's margin of 2."""
    return Tolerance(rtol=2.0 * unit_roundoff(term_dtype))
