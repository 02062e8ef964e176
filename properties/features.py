"""The features of an input that a failure may hinge on, and how to take each one away.

A shrunk failing input is small, but it may still hold several things a user could suspect:
NaN at padded positions, a row whose z-free losses are all 0, an empty row, alpha = 0, a
tiny epsilon, bfloat16 values. The runner takes them away one at a time from the input a
report shows and checks the invariant again (``properties.runner``): a feature without
which the input passes is a *trigger*, and the report names it ("NaN in
token_concentration_factor, triggered by a row whose valid b are all 0").

Each ``Feature`` says whether a ``LossCase`` has it and gives the same case without it,
still a valid input (``make_valid``), as close to the original as can be. The parameters'
features come from the parameter registry: a parameter off its default is a feature, taken
away by its default.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from properties.cases import (
    ALL_CONTIGUOUS,
    DTYPE_NAMES,
    LossCase,
    MaskRows,
    Rows,
    cases_in,
    map_cases,
)
from properties.layouts import LAYOUTS
from properties.strategies import make_valid
from spec.parameters import PARAMETERS, Parameter

#: a valid loss below this is "tiny": it underflows in float16 and sums badly with others
TINY = 1e-6
#: a valid loss at or above this is "large": its square or exponential overflows first
LARGE = 1e3


@dataclass(frozen=True)
class Feature:
    """Something an input may have: its ``kind`` (what failures that share it share) and
    ``describe``, which names it as the report says it."""

    kind: str
    present: Callable[[LossCase], bool]
    without: Callable[[LossCase], LossCase]
    describe: Callable[[LossCase], str]


def _padded(case: LossCase) -> list[float]:
    return [
        v
        for rows in (case.token_nll, case.zfree_token_nll)
        for row, mask_row in zip(rows, case.mask, strict=True)
        for v, valid in zip(row, mask_row, strict=True)
        if not valid
    ]


def _map_valid(case: LossCase, rows: Rows, change: Callable[[float], float]) -> Rows:
    return tuple(
        tuple(change(v) if valid else v for v, valid in zip(row, mask_row, strict=True))
        for row, mask_row in zip(rows, case.mask, strict=True)
    )


def _number(value: float) -> str:
    return "NaN" if math.isnan(value) else repr(value)


def _padding_values(case: LossCase) -> str:
    shown = sorted({_number(v) for v in _padded(case) if v != 0}, key=len)
    return f"{', '.join(shown)} at padded positions"


def _without_padding(case: LossCase) -> LossCase:
    def zeroed(rows: Rows) -> Rows:
        return tuple(
            tuple(v if valid else 0.0 for v, valid in zip(row, mask_row, strict=True))
            for row, mask_row in zip(rows, case.mask, strict=True)
        )

    return case.with_rows(zeroed(case.token_nll), zeroed(case.zfree_token_nll), case.mask)


def _zero_base_rows(case: LossCase) -> list[int]:
    return [
        i
        for i, (row, mask_row) in enumerate(zip(case.zfree_token_nll, case.mask, strict=True))
        if any(mask_row) and all(v == 0 for v, valid in zip(row, mask_row, strict=True) if valid)
    ]


def has_zero_base_row(value: object) -> bool:
    """Whether an input (any ``LossCase`` in it) has a kept row whose valid b are all 0."""
    return any(_zero_base_rows(case) for case in cases_in(value))


def _without_zero_base_rows(case: LossCase) -> LossCase:
    rows = set(_zero_base_rows(case))
    zfree = tuple(
        tuple(1.0 if valid and i in rows else v for v, valid in zip(row, mask_row, strict=True))
        for i, (row, mask_row) in enumerate(zip(case.zfree_token_nll, case.mask, strict=True))
    )
    return replace(case, zfree_token_nll=zfree)


def _has_zero_base_token(case: LossCase) -> bool:
    rows = set(_zero_base_rows(case))
    return any(
        v == 0 and valid
        for i, (row, mask_row) in enumerate(zip(case.zfree_token_nll, case.mask, strict=True))
        if i not in rows
        for v, valid in zip(row, mask_row, strict=True)
    )


def _without_zero_base_tokens(case: LossCase) -> LossCase:
    rows = set(_zero_base_rows(case))
    zfree = tuple(
        tuple(
            1.0 if valid and v == 0 and i not in rows else v
            for v, valid in zip(row, mask_row, strict=True)
        )
        for i, (row, mask_row) in enumerate(zip(case.zfree_token_nll, case.mask, strict=True))
    )
    return replace(case, zfree_token_nll=zfree)


def _zero_rows(case: LossCase, rows: Rows) -> list[int]:
    """The kept rows of ``rows`` (l or b) whose valid values are all 0."""
    return [
        i
        for i, (row, mask_row) in enumerate(zip(rows, case.mask, strict=True))
        if any(mask_row) and all(v == 0 for v, valid in zip(row, mask_row, strict=True) if valid)
    ]


def _without_zero_rows(case: LossCase, field: str) -> LossCase:
    rows = getattr(case, field)
    zero = set(_zero_rows(case, rows))
    changed = tuple(
        tuple(1.0 if valid and i in zero else v for v, valid in zip(row, mask_row, strict=True))
        for i, (row, mask_row) in enumerate(zip(rows, case.mask, strict=True))
    )
    return replace(case, **{field: changed})


def _has_holes(case: LossCase) -> bool:
    return any(not a and b for row in case.mask for a, b in itertools.pairwise(row))


def _right_padded(case: LossCase) -> LossCase:
    """Each row's valid tokens moved to its front, in order, the padding after them."""

    def moved(rows: Rows) -> Rows:
        return tuple(
            tuple(v for v, valid in zip(row, m, strict=True) if valid)
            + tuple(v for v, valid in zip(row, m, strict=True) if not valid)
            for row, m in zip(rows, case.mask, strict=True)
        )

    mask = tuple(tuple(sorted(row, reverse=True)) for row in case.mask)
    return case.with_rows(moved(case.token_nll), moved(case.zfree_token_nll), mask)


def _without_empty_rows(case: LossCase) -> LossCase:
    kept = [i for i, row in enumerate(case.mask) if any(row)]

    def select(rows: Rows | MaskRows) -> tuple:
        return tuple(rows[i] for i in kept)

    return case.with_rows(select(case.token_nll), select(case.zfree_token_nll), select(case.mask))


def _valid_values(case: LossCase) -> list[float]:
    return [
        v
        for rows in (case.token_nll, case.zfree_token_nll)
        for row, mask_row in zip(rows, case.mask, strict=True)
        for v, valid in zip(row, mask_row, strict=True)
        if valid
    ]


def _replace_values(case: LossCase, wanted: Callable[[float], bool]) -> LossCase:
    def change(v: float) -> float:
        return 1.0 if wanted(v) else v

    return case.with_rows(
        _map_valid(case, case.token_nll, change),
        _map_valid(case, case.zfree_token_nll, change),
        case.mask,
    )


def _is_tiny(v: float) -> bool:
    return 0 < v < TINY


def _is_large(v: float) -> bool:
    return v >= LARGE


def _parameter_feature(parameter: Parameter) -> Feature:
    def value(case: LossCase) -> float:
        return getattr(case.config, parameter.field)

    return Feature(
        kind=parameter.name,
        present=lambda case: value(case) != parameter.default,
        without=lambda case: case.with_config(**{parameter.field: parameter.default}),
        describe=lambda case: f"{parameter.name} = {value(case)!r}",
    )


#: the kind of the views' feature
LAYOUT_KIND = "layout"


def _views(case: LossCase) -> str:
    """The inputs that are views, as a report says them (those of one layout together)."""
    by_layout: dict[str, list[str]] = {}
    for name, layout in case.views.items():
        by_layout.setdefault(layout, []).append(name)
    views = [
        f"{', '.join(names[:-1])}{' and ' if len(names) > 1 else ''}{names[-1]} as "
        f"{LAYOUTS[layout]}"
        for layout, names in by_layout.items()
    ]
    return f"{'; '.join(views)} (a contiguous copy of the same values passes)"


def _in_float32(case: LossCase) -> LossCase:
    # every bfloat16 and float16 value is a float32 value: the same numbers, more precision
    return replace(case, dtype=torch.float32)


FEATURES: tuple[Feature, ...] = (
    Feature(
        kind="padding values",
        present=lambda case: any(v != 0 for v in _padded(case)),
        without=_without_padding,
        describe=_padding_values,
    ),
    Feature(
        kind="zero-base row",
        present=lambda case: bool(_zero_base_rows(case)),
        without=_without_zero_base_rows,
        describe=lambda case: "a row whose valid b are all 0",
    ),
    Feature(
        kind="zero b",
        present=_has_zero_base_token,
        without=_without_zero_base_tokens,
        describe=lambda case: "b = 0 at a valid position beside positive ones",
    ),
    Feature(
        kind="zero-loss row",
        present=lambda case: bool(_zero_rows(case, case.token_nll)),
        without=lambda case: _without_zero_rows(case, "token_nll"),
        describe=lambda case: "a row whose valid l are all 0",
    ),
    Feature(
        kind="holes",
        present=_has_holes,
        without=_right_padded,
        describe=lambda case: "a padded position before a valid one (left padding or a gap)",
    ),
    Feature(
        kind="empty row",
        present=lambda case: (
            any(not any(row) for row in case.mask) and any(any(row) for row in case.mask)
        ),
        without=_without_empty_rows,
        describe=lambda case: "an empty row (no valid token)",
    ),
    Feature(
        kind="low precision",
        present=lambda case: case.dtype in (torch.bfloat16, torch.float16),
        without=_in_float32,
        describe=lambda case: f"low-precision inputs ({DTYPE_NAMES[case.dtype]})",
    ),
    Feature(
        kind="tiny losses",
        present=lambda case: any(_is_tiny(v) for v in _valid_values(case)),
        without=lambda case: _replace_values(case, _is_tiny),
        describe=lambda case: f"tiny losses (below {TINY:g})",
    ),
    Feature(
        kind="large losses",
        present=lambda case: any(_is_large(v) for v in _valid_values(case)),
        without=lambda case: _replace_values(case, _is_large),
        describe=lambda case: f"large losses ({LARGE:g} or more)",
    ),
    Feature(
        kind="integer mask",
        present=lambda case: case.mask_dtype != torch.bool,
        without=lambda case: replace(case, mask_dtype=torch.bool),
        describe=lambda case: f"an integer mask ({str(case.mask_dtype).removeprefix('torch.')})",
    ),
    *(_parameter_feature(p) for p in PARAMETERS),
    Feature(
        kind=LAYOUT_KIND,
        present=lambda case: bool(case.views),
        without=lambda case: replace(case, layouts=ALL_CONTIGUOUS),
        describe=_views,
    ),
)


def features_of(value: object) -> list[tuple[Feature, str, object]]:
    """The features of the input ``value`` (every ``LossCase`` in it), each with its
    description there and ``value`` without it (a valid input)."""
    cases = cases_in(value)
    found = []
    for feature in FEATURES:
        having = [case for case in cases if feature.present(case)]
        if not having:
            continue

        def take_away(case: LossCase, feature: Feature = feature) -> LossCase:
            return make_valid(feature.without(case)) if feature.present(case) else case

        found.append((feature, feature.describe(having[0]), map_cases(value, take_away)))
    return found
