"""Named edge cases every run tries first (``@example``): each once mattered.

Each says why it is there; a failure report quotes that when the case fails the same way as
the input it shows. A case is tried only where the domain under check admits it
(``Domain.admits``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from properties.cases import LossCase
from properties.config import ReconstructionLossConfig
from properties.invariant import NamedInput
from properties.layouts import LAYOUTS
from spec.parameters import BY_NAME
from spec.terms import distinct_weights

NAN, INF = math.nan, math.inf
#: every term weighted, each weight different (by the term registry's weight fields)
ALL_WEIGHTS = distinct_weights((1.0, 0.5, 0.25, 2.0, 1.5, 0.75, 3.0, 0.125))


def _config(weights: dict[str, float] = ALL_WEIGHTS, **changes: float) -> ReconstructionLossConfig:
    """A config of ``weights`` (the defaults where not given), with ``changes``: weight
    fields, or parameters by their registry names (``alpha=0.0``)."""
    named = {(BY_NAME[k].field if k in BY_NAME else k): v for k, v in changes.items()}
    return ReconstructionLossConfig(**{**weights, **named})


@dataclass(frozen=True)
class EdgeCase:
    """An input that once mattered, and why."""

    why: str
    case: LossCase


EDGE_CASES: dict[str, EdgeCase] = {
    "plain": EdgeCase(
        "A plain valid input, every position valid, every term weighted and no parameter at "
        "its default: the first call of every worker process, checked like any other.",
        LossCase(
            token_nll=((2.0, 1.0), (4.0, 3.0)),
            zfree_token_nll=((0.5, 1.5), (3.0, 1.0)),
            mask=((True, True), (True, True)),
            config=_config(alpha=2.0, epsilon=0.25, c=2.0),
        ),
    ),
    "nan-padding": EdgeCase(
        "Padded positions full of NaN and inf: multiplying by the mask leaks them.",
        LossCase(
            token_nll=((1.0, 2.0, NAN), (3.0, INF, -INF)),
            zfree_token_nll=((0.5, 1.5, INF), (2.0, NAN, NAN)),
            mask=((True, True, False), (True, False, False)),
            config=_config(),
        ),
    ),
    "alpha0-zero-surprisal": EdgeCase(
        "alpha = 0 with zero surprisal: 0^0 = 1, and exp(0 * log 0) is NaN.",
        LossCase(
            token_nll=((1.0, 2.0, 3.0),),
            zfree_token_nll=((0.0, 1.0, 2.0),),
            mask=((True, True, True),),
            config=_config(alpha=0.0, epsilon=0.0),
        ),
    ),
    "tiny-alpha-zero-surprisal": EdgeCase(
        "alpha > 0 so small it rounds to 0 in float32: 0^alpha is still 0, not 0^0 = 1.",
        LossCase(
            token_nll=((1.0, 5.0, 2.0),),
            zfree_token_nll=((2.0, 0.0, 1.0),),
            mask=((True, True, True),),
            config=_config(alpha=1e-300),
            dtype=torch.float32,
        ),
    ),
    "all-zero-surprisal-row": EdgeCase(
        "alpha > 0 and every valid b = 0: uniform shares, kappa = 1 (0/0 otherwise).",
        LossCase(
            token_nll=((1.0, 3.0), (2.0, 0.0)),
            zfree_token_nll=((0.0, 0.0), (4.0, 0.0)),
            mask=((True, True), (True, False)),
            config=_config(alpha=2.0, epsilon=0.5),
        ),
    ),
    "zero-base-row-with-padding": EdgeCase(
        "A row whose valid b are all 0, beside a padded position: its uniform shares run over "
        "its valid positions alone (1/2 each here, not 1/3).",
        LossCase(
            token_nll=((1.0, 2.0, 5.0),),
            zfree_token_nll=((0.0, 0.0, 3.0),),
            mask=((True, True, False),),
            config=_config(),
        ),
    ),
    **{
        f"{layout}-views": EdgeCase(
            f"Every input as {LAYOUTS[layout]}: a kernel that reads its data pointer as if "
            "it were contiguous, or writes into the view's buffer, is right on contiguous "
            "inputs alone.",
            LossCase(
                token_nll=((1.0, 3.0, NAN), (2.0, 5.0, 4.0)),
                zfree_token_nll=((0.5, 2.0, INF), (1.5, 1.0, 3.0)),
                mask=((True, True, False), (True, True, True)),
                config=_config(),
                layouts=(layout,) * 3,
            ),
        )
        for layout in ("transposed", "strided", "offset")
    },
    "expanded-views": EdgeCase(
        "Every input a stride-0 view (rows alike: the mask of whole rows, a repeated row of "
        "b): one row of memory read for every example.",
        LossCase(
            token_nll=((1.0, 3.0, 2.0), (1.0, 3.0, 2.0)),
            zfree_token_nll=((0.5, 2.0, 1.0), (0.5, 2.0, 1.0)),
            mask=((True, True, True), (True, True, True)),
            config=_config(),
            layouts=("expanded",) * 3,
        ),
    ),
    "empty-row": EdgeCase(
        "A fully padded example is dropped, not averaged in as a zero.",
        LossCase(
            token_nll=((1.0, 2.0), (5.0, 7.0), (3.0, 0.0)),
            zfree_token_nll=((1.0, 3.0), (1.0, 1.0), (2.0, 0.0)),
            mask=((True, True), (False, False), (True, False)),
            config=_config(),
        ),
    ),
    "single-token-rows": EdgeCase(
        "One valid token per example: shares are 1 whatever alpha.",
        LossCase(
            token_nll=((2.0,), (4.0,)),
            zfree_token_nll=((0.5,), (3.0,)),
            mask=((True,), (True,)),
            config=_config(alpha=3.0),
        ),
    ),
    "huge-alpha-float32": EdgeCase(
        "Huge alpha in float32: b^alpha overflows unless the maximum is taken out.",
        LossCase(
            token_nll=((1.0, 2.0, 3.0), (4.0, 5.0, 6.0)),
            zfree_token_nll=((1e4, 9000.0, 0.5), (1e4, 1e4, 2.0)),
            mask=((True, True, True), (True, True, True)),
            config=_config(alpha=1e3),
            dtype=torch.float32,
        ),
    ),
    "order-sensitive-sum": EdgeCase(
        "Three tokens whose float64 sum depends on the order they are added in "
        "((0.1 + 0.2) + 0.3 != 0.1 + (0.2 + 0.3)): the fewest that show a reduction order "
        "that changes from call to call.",
        LossCase(
            token_nll=((0.1, 0.2, 0.3),),
            zfree_token_nll=((0.1, 0.2, 0.3),),
            mask=((True, True, True),),
            config=_config(),
        ),
    ),
    "ties-at-max": EdgeCase(
        "Ties at the largest surprisal share the weight evenly.",
        LossCase(
            token_nll=((1.0, 5.0, 9.0),),
            zfree_token_nll=((3.0, 3.0, 1.0),),
            mask=((True, True, True),),
            config=_config(alpha=7.0),
        ),
    ),
    "uneven-concentration-rows": EdgeCase(
        "A flat row beside a concentrated one: kappa's batch mean is (1 + 2) / 2, which a "
        "ratio of batch means, (1 + 100) / (1 + 50), overshoots.",
        LossCase(
            token_nll=((1.0, 1.0), (1.0, 1.0)),
            zfree_token_nll=((1.0, 1.0), (0.0, 100.0)),
            mask=((True, True), (True, True)),
            config=_config(alpha=1.0),
        ),
    ),
    "large-epsilon-tiny-scale": EdgeCase(
        "epsilon far larger than every loss, and a tiny reference scale.",
        LossCase(
            token_nll=((1.0, 2.0),),
            zfree_token_nll=((0.25, 0.75),),
            mask=((True, True),),
            config=_config(epsilon=1e5, c=1e-3),
        ),
    ),
    "overflowing-term-epsilon-zero": EdgeCase(
        "epsilon = 0 and a reference scale so small that R_dist is past float32's range: "
        "the output is inf, the input is valid, and validation that looks again for a kept "
        "example with bbar = 0 must find none (the fully padded row, inf included, is "
        "dropped, not kept).",
        LossCase(
            token_nll=((1.0e4, 5.0e3), (INF, 4.0)),
            zfree_token_nll=((0.5, 1.5), (0.0, INF)),
            mask=((True, True), (False, False)),
            config=_config(epsilon=0.0, c=1e-36),
            dtype=torch.float32,
        ),
    ),
    "subnormal-tail-shares": EdgeCase(
        "Tail shares below float32's smallest normal number: (1/6)^52 is subnormal, and "
        "only the tail tokens carry loss. Their rounding is absolute, not relative "
        "(tolerances.py).",
        LossCase(
            token_nll=((1.0, 0.0, 1.0, 1.0, 1.0), (0.0, 0.0, 0.0, 0.0, 0.0)),
            zfree_token_nll=((0.0, 6.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 0.0, 0.0)),
            mask=((True, True, True, True, True), (False, False, False, False, False)),
            config=_config({}, raw_weight=0.0, alpha=52.0),
            dtype=torch.bfloat16,
        ),
    ),
    "tail-share-float32": EdgeCase(
        "A tail share of 1e-31, a normal float32 number: scaled by the row sum instead of "
        "the row maximum, b^alpha underflows first and the only token with a loss counts 0.",
        LossCase(
            token_nll=((0.0, 0.0, 0.0, 0.0, 1.0),),
            zfree_token_nll=((6.0, 6.0, 6.0, 6.0, 0.5),),
            mask=((True, True, True, True, True),),
            config=_config(raw_weight=0.0, alpha=27.5),
            dtype=torch.float32,
        ),
    ),
    "subnormal-float16-gradient": EdgeCase(
        "A float16 gradient of 0.001/35 = 2.9e-5, below float16's smallest normal number: "
        "its cast back to the input dtype rounds to a subnormal step, 6e-8 (tolerances.py).",
        LossCase(
            token_nll=((1.0,) * 7,) * 5,
            zfree_token_nll=((1.0,) * 7,) * 5,
            mask=((True,) * 7,) * 5,
            config=_config(
                {}, raw_weight=0.0, normalized_concentration_corrected_token_weighted_weight=0.001
            ),
            dtype=torch.float16,
        ),
    ),
    "half-precision": EdgeCase(
        "Half precision must be computed in float32.",
        LossCase(
            token_nll=((0.125, 7.5, 1000.0), (2.0, 0.0, 0.0)),
            zfree_token_nll=((0.3125, 6.0, 900.0), (1.5, 0.0, 0.0)),
            mask=((True, True, True), (True, False, False)),
            config=_config(alpha=1.5),
            dtype=torch.float16,
        ),
    ),
    "bfloat16-integer-mask": EdgeCase(
        "An integer 0/1 mask on bfloat16 inputs: the mask is treated as bool, and the "
        "values are computed in float32.",
        LossCase(
            token_nll=((0.125, 3.0), (2.0, 1.0)),
            zfree_token_nll=((0.25, 2.0), (1.0, 1.0)),
            mask=((True, True), (True, False)),
            config=_config(),
            dtype=torch.bfloat16,
            mask_dtype=torch.int64,
        ),
    ),
}


def named(
    name: str, build: Callable[[LossCase], Any] | None = None, *, note: str = ""
) -> NamedInput:
    """Edge case ``name`` as an invariant's example: its case, or what ``build`` makes of it
    (an invariant whose strategy draws more than a case); ``note`` says what was changed."""
    edge = EDGE_CASES[name]
    value = edge.case if build is None else build(edge.case)
    return NamedInput(f"{name} ({note})" if note else name, edge.why, value)
