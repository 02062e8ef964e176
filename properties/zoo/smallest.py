"""The smallest input that shows a mistake of the zoo, and why none smaller does.

Each mistake of the textbook stack (``properties.zoo.textbook.SMALLEST``) and each slip of
the fused one (``properties.zoo.fused.SMALLEST``) has a ``Smallest``: one input of the
fewest cells (B x T) on which an invariant rejects it while the textbook stack passes, and
the reason no input of fewer cells can show the mistake. A report must show an input of
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
from spec.terms import TERMS, distinct_weights

NAN = float("nan")
#: every term weighted, each differently, so that a mistake in any term reaches the total
WEIGHTS = distinct_weights(tuple(1.0 + 0.25 * k for k in range(len(TERMS))))


def loss_case(
    token_nll: list[list[float]],
    zfree_token_nll: list[list[float]],
    mask: list[list[bool]],
    dtype: torch.dtype = torch.float64,
    **config: float,
) -> LossCase:
    """A case of these rows, every term weighted (``WEIGHTS``) and ``config`` changed."""

    def rows(values: list[list[Any]]) -> tuple:
        return tuple(tuple(row) for row in values)

    return LossCase(
        rows(token_nll),
        rows(zfree_token_nll),
        rows(mask),
        ReconstructionLossConfig(**{**WEIGHTS, **config}),
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
        """B x T (of the labels, for logits: their vocabulary is not a cell)."""
        batch, length = self.case.shape[:2]
        return batch * length


ONE_CELL = loss_case([[1.0]], [[0.0]], [[True]])
ANY_INPUT = "one cell is the least"
TWO_TOKENS = "one valid token has share 1 and kappa 1 whatever the mistake: two valid tokens"
PADDED = "it needs a padded position beside a valid one"
EMPTY_ROW = "it needs an example with no valid token beside a kept one"
TWO_ROWS = "one example, or examples of one length, give the same means: two rows, one of two"
