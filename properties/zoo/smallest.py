"""The smallest input that shows each mistake of the stack zoo, and why none smaller does.

For every wrong implementation of ``properties.zoo.wrong``, ``SMALLEST`` holds one input of
the fewest cells (B x T) on which an invariant rejects it while the textbook stack passes,
and the reason no input of fewer cells can show the mistake. A report must show an input of
that many cells: ``tests/properties/test_smallest_inputs.py`` checks each witness and that
shrinking reaches its size under several seeds; ``benchmarks/report_sizes.py`` checks the
size of the input every report shows.

Every input has a valid token, so one cell is always the least; a mistake that needs a
padded position, a second token or a second example needs two, and so on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from properties.cases import LossCase
from properties.config import ReconstructionLossConfig
from properties.invariants.gradients import MixedGradient, SecondOrderUse
from spec.terms import TERMS, TOTAL_NAME, distinct_weights

_NAN = float("nan")
#: every term weighted, each differently, so that a mistake in any term reaches the total
_WEIGHTS = distinct_weights(tuple(1.0 + 0.25 * k for k in range(len(TERMS))))
_FIRST = TERMS[0].name


def _case(
    token_nll: list[list[float]],
    zfree_token_nll: list[list[float]],
    mask: list[list[bool]],
    dtype: torch.dtype = torch.float64,
    **config: float,
) -> LossCase:
    def rows(values: list[list[Any]]) -> tuple:
        return tuple(tuple(row) for row in values)

    return LossCase(
        rows(token_nll),
        rows(zfree_token_nll),
        rows(mask),
        ReconstructionLossConfig(**{**_WEIGHTS, **config}),
        dtype=dtype,
    )


@dataclass(frozen=True)
class Smallest:
    """``witness`` (rejected by ``invariant``, after the calls on ``after``): an input of
    the fewest cells that shows the mistake; ``why`` none of fewer cells does."""

    invariant: str
    witness: Any
    why: str
    after: tuple[LossCase, ...] = ()

    @property
    def case(self) -> LossCase:
        return getattr(self.witness, "case", self.witness)

    @property
    def cells(self) -> int:
        batch, length = self.case.shape
        return batch * length


_ONE = _case([[1.0]], [[0.0]], [[True]])
_ANY = "one cell is the least"
_TWO_TOKENS = "one valid token has share 1 and kappa 1 whatever the mistake: two valid tokens"
_PADDED = "it needs a padded position beside a valid one"
_EMPTY_ROW = "it needs an example with no valid token beside a kept one"
_TWO_ROWS = "one example, or examples of one length, give the same means: two rows, one of two"

#: zoo name (properties.zoo.wrong) -> the smallest input that shows its mistake
SMALLEST: dict[str, Smallest] = {
    "global_token_mean": Smallest(
        "oracle-agreement",
        _case([[1.0, 2.0], [3.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]], [[True, True], [True, False]]),
        _TWO_ROWS,
    ),
    "padding_counted": Smallest(
        "oracle-agreement", _case([[1.0, 1.0]], [[0.0, 0.0]], [[True, False]]), _PADDED
    ),
    "empty_rows_counted": Smallest(
        "oracle-agreement", _case([[1.0], [1.0]], [[0.0], [0.0]], [[True], [False]]), _EMPTY_ROW
    ),
    "mask_multiplication": Smallest(
        "oracle-agreement",
        _case([[1.0, _NAN]], [[0.0, _NAN]], [[True, False]]),
        "it needs a NaN at a padded position beside a valid one",
    ),
    "zfree_not_detached": Smallest("stop-gradient", _ONE, _ANY),
    "alpha_ignored": Smallest(
        "oracle-agreement",
        _case([[1.0, 2.0]], [[0.0, 0.5]], [[True, True]], token_weight_alpha=0.0),
        _TWO_TOKENS,
    ),
    "exp_log_shares": Smallest("oracle-agreement", _ONE, _ANY),
    "no_max_subtraction": Smallest("oracle-agreement", _ONE, _ANY),
    "no_zero_row_fallback": Smallest("oracle-agreement", _ONE, _ANY),
    "kappa_from_token_nll": Smallest(
        "oracle-agreement", _case([[1.0, 2.0]], [[0.0, 0.5]], [[True, True]]), _TWO_TOKENS
    ),
    "epsilon_as_floor": Smallest("oracle-agreement", _case([[1.0]], [[0.5]], [[True]]), _ANY),
    "cc_scale_missing": Smallest(
        "oracle-agreement", _case([[1.0]], [[0.0]], [[True]], zfree_reference_scale=2.0), _ANY
    ),
    "shares_over_padding": Smallest(
        "oracle-agreement", _case([[1.0, 1.0]], [[0.0, 0.0]], [[True, False]]), _PADDED
    ),
    "total_missing_cc": Smallest("oracle-agreement", _ONE, _ANY),
    "low_precision_compute": Smallest(
        "oracle-agreement-low-precision", _case([[1.0]], [[0.0]], [[True]], torch.bfloat16), _ANY
    ),
    "mutates_input": Smallest(
        "inputs-unmodified", _case([[1.0, 1.0]], [[0.0, 0.0]], [[True, False]]), _PADDED
    ),
    "float64_outputs": Smallest(
        "outputs-contract", _case([[1.0]], [[0.0]], [[True]], torch.float32), _ANY
    ),
    "diagnostics_empty_rows_counted": Smallest(
        "oracle-agreement", _case([[1.0], [1.0]], [[0.0], [0.0]], [[True], [False]]), _EMPTY_ROW
    ),
    "batch_normalized_shares": Smallest(
        "oracle-agreement",
        _case([[1.0], [2.0]], [[0.0], [0.0]], [[True], [True]]),
        "shares normalised over one example are its own: two examples",
    ),
    "token_term_detached": Smallest("gradient-closed-form", _ONE, _ANY),
    "unnormalized_shares": Smallest(
        "oracle-agreement", _case([[1.0, 2.0]], [[0.0, 0.0]], [[True, True]]), _TWO_TOKENS
    ),
    "kappa_ratio_of_means": Smallest(
        "oracle-agreement", _ONE, "a row whose b are all 0 makes its ratio of means 0/0"
    ),
    "shares_from_token_nll": Smallest(
        "oracle-agreement", _case([[1.0, 2.0]], [[0.0, 0.0]], [[True, True]]), _TWO_TOKENS
    ),
    "nondeterministic_order": Smallest(
        "deterministic",
        _case([[0.1, 0.2, 0.3]], [[0.0, 0.0, 0.0]], [[True, True, True]]),
        "a sum of two numbers is the same in either order: three tokens",
    ),
    "lengths_from_first_row": Smallest(
        "oracle-agreement",
        _case([[1.0, 2.0], [3.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]], [[True, True], [True, False]]),
        "two kept examples of different lengths, one of two tokens",
    ),
    "right_padding_assumed": Smallest(
        "oracle-agreement",
        _case([[1.0, 2.0]], [[0.0, 0.0]], [[False, True]]),
        "it needs a padded position before a valid one",
    ),
    "kappa_with_epsilon": Smallest("oracle-agreement", _case([[1.0]], [[0.5]], [[True]]), _ANY),
    "alpha_in_result": Smallest("outputs-contract", _ONE, _ANY),
    "terms_detached": Smallest("output-gradients", _ONE, _ANY),
    "zfree_cached_by_shape": Smallest(
        "oracle-agreement", _ONE, _ANY, after=(_case([[1.0]], [[2.0]], [[True]]),)
    ),
    "fused_total_weights_only": Smallest("output-gradients", _ONE, _ANY),
    "fused_term_gradient_scaled": Smallest("output-gradients", _ONE, _ANY),
    "fused_first_upstream_only": Smallest(
        "mixed-gradient", MixedGradient(_ONE, ((_FIRST, 1.0), (TOTAL_NAME, 1.0))), _ANY
    ),
    "fused_diagnostics_differentiable": Smallest("output-gradients", _ONE, _ANY),
    "fused_no_grad_backward": Smallest("second-order", SecondOrderUse(_ONE, TOTAL_NAME, 1.0), _ANY),
}
