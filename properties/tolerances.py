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
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

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


def gradient_tolerance(input_dtype: torch.dtype, *, length: int, alpha: float) -> Tolerance:
    """Tolerance of d(output)/d(token_nll), compared norm-wise (relative to its largest entry).

    The gradient is computed like an output, then cast back to the input's dtype, which
    adds one unit roundoff of that dtype.
    """
    computed = output_tolerance(input_dtype, length=length, alpha=alpha)
    return Tolerance(rtol=computed.rtol + unit_roundoff(input_dtype))
