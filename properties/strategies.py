"""Hypothesis strategies for the stack's inputs: masks, losses, baselines, configs, logits.

Everything shrinks towards a small, readable case: one example of one token, losses of
1.0, the default config, float64. The edge values the spec cares about are drawn on
purpose, not left to chance: zeros and ties (values come from a short list half the time),
tiny and huge losses (up to ``Domain.max_loss``), empty, single-token and fully valid rows,
alpha exactly 0 and 1 and up to ``Domain.max_alpha``, epsilon 0 and larger than every loss,
the reference scale c across six orders of magnitude, and padding full of NaN and inf.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import torch
from hypothesis import strategies as st

from properties.cases import (
    ALL_CONTIGUOUS,
    LossCase,
    MaskRows,
    Rows,
    alike_along_a_dimension,
    round_to,
)
from properties.config import ReconstructionLossConfig
from properties.layouts import CONTIGUOUS, LAYOUTS
from properties.options import LARGEST_MAX_LOSS, MIN_POSITIVE_LOSS
from properties.scale import (
    MAX_BATCH,
    MAX_LENGTH,
    MAX_POSITIONS,
    RowSpan,
    ScaleCase,
    row_spans,
    scale_sizes,
    scale_values,
)
from spec.parameters import ALPHA, EPSILON, PARAMETERS, C, Parameter
from spec.parameters import COMPARISON_MAX_ALPHA as COMPARISON_MAX_ALPHA  # re-exported
from spec.parameters import MIN_POSITIVE_EPSILON as MIN_POSITIVE_EPSILON  # re-exported
from spec.terms import WEIGHT_FIELDS

ALL_DTYPES: tuple[torch.dtype, ...] = (
    torch.float64,
    torch.float32,
    torch.bfloat16,
    torch.float16,
)
INTEGER_MASK_DTYPES: tuple[torch.dtype, ...] = (torch.uint8, torch.int32, torch.int64)

#: values a padded position may hold: anything, NaN and inf included (MATH.md "Inputs").
PADDING_VALUES: tuple[float, ...] = (0.0, math.nan, math.inf, -math.inf, -1.0, 1e30)

#: the config fields of the five term weights (the term registry's)
WEIGHT_NAMES: tuple[str, ...] = WEIGHT_FIELDS


@dataclass(frozen=True)
class Domain:
    """The inputs an implementation is checked on.

    The default is the whole domain MATH.md promises. An implementation that is only meant
    to be right on a part of it (a naive float64 formula, say) is checked on that part by
    narrowing the domain, never by loosening a tolerance.
    """

    max_batch: int = 8
    max_length: int = 8
    max_loss: float = LARGEST_MAX_LOSS
    #: the largest alpha the implementation is meant for: any finite one by default
    max_alpha: float = math.inf
    dtypes: tuple[torch.dtype, ...] = ALL_DTYPES
    device: str = "cpu"
    #: the largest T, B and B x T the scale invariants draw (``properties.scale``)
    scale_length: int = MAX_LENGTH
    scale_batch: int = MAX_BATCH
    scale_positions: int = MAX_POSITIONS

    def admits(self, case: LossCase | ScaleCase) -> bool:
        """Whether ``case`` lies in this domain (edge cases outside it are not tried)."""
        if isinstance(case, ScaleCase):
            return self._admits_at_scale(case)
        batch, length = case.shape
        values = [
            v
            for rows in (case.token_nll, case.zfree_token_nll)
            for row, mask_row in zip(rows, case.mask, strict=True)
            for v, valid in zip(row, mask_row, strict=True)
            if valid
        ]
        return (
            batch <= self.max_batch
            and length <= self.max_length
            and case.dtype in self.dtypes
            and case.device == self.device
            and getattr(case.config, ALPHA.field) <= self.max_alpha
            # a NaN is no loss above the bound: the validation group's bad values are tried
            and not any(v > self.max_loss for v in values)
        )

    def _admits_at_scale(self, case: ScaleCase) -> bool:
        batch, length = case.shape
        return (
            batch <= self.scale_batch
            and length <= self.scale_length
            and batch * length <= self.scale_positions
            and case.dtype in self.dtypes
            and case.device == self.device
            and getattr(case.config, ALPHA.field) <= self.max_alpha
            and case.token_nll.largest <= self.max_loss
            and case.zfree_token_nll.largest <= self.max_loss
        )

    @property
    def low_precision_dtypes(self) -> tuple[torch.dtype, ...]:
        return tuple(d for d in self.dtypes if d in (torch.bfloat16, torch.float16))

    @property
    def full_precision_dtypes(self) -> tuple[torch.dtype, ...]:
        return tuple(d for d in self.dtypes if d in (torch.float64, torch.float32))


DEFAULT_DOMAIN = Domain()


@cache
def shapes(
    domain: Domain = DEFAULT_DOMAIN, min_length: int = 1
) -> st.SearchStrategy[tuple[int, int]]:
    """``(B, T)``, shrinking to ``(1, min_length)``."""
    return st.tuples(
        st.integers(1, domain.max_batch),
        st.integers(min(min_length, domain.max_length), domain.max_length),
    )


@st.composite
def masks(draw: st.DrawFn, batch: int, length: int) -> MaskRows:
    """Ragged masks with at least one valid token in the batch.

    Right-padded rows (``prefix``) are what data loaders make; ``scattered`` masks cover
    left padding and holes. Both shrink towards fully valid rows, then empty rows appear
    only where a failure needs them.
    """
    layout = draw(st.sampled_from(["prefix", "scattered"]))
    if layout == "prefix":
        padded_per_row = draw(st.lists(st.integers(0, length), min_size=batch, max_size=batch))
        rows = [[t < length - padded for t in range(length)] for padded in padded_per_row]
    else:
        rows = [[not draw(st.booleans()) for _ in range(length)] for _ in range(batch)]
    if not any(any(row) for row in rows):
        rows[0][0] = True  # a batch with no valid token is an error case, drawn elsewhere
    return tuple(tuple(row) for row in rows)


@st.composite
def mask_rows(draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN) -> MaskRows:
    """A mask with at least one valid token, its rows drawn as units (as ``example_rows``
    draws them, without values): a list of rows of 0 to ``max_length`` positions,
    right-padded to the longest, with holes in a ``scattered`` batch."""
    holes = draw(st.sampled_from(["prefix", "scattered"])) == "scattered"
    position = st.booleans() if holes else st.just(False)
    row = st.lists(position, max_size=domain.max_length)
    drawn = draw(st.lists(row, min_size=1, max_size=domain.max_batch))
    if not any(not hole for row in drawn for hole in row):
        drawn[0] = [False, *drawn[0][1:]]  # a batch with no valid token is an error case
    length = max(len(row) for row in drawn)
    return tuple(tuple(not hole for hole in row) + (False,) * (length - len(row)) for row in drawn)


@cache
def simple_losses(max_loss: float = DEFAULT_DOMAIN.max_loss) -> st.SearchStrategy[float]:
    """Values that tie and sit at the edges: 1, 0, 2, 1/2, 3, tiny, and the largest."""
    edges = [1.0, 0.0, 2.0, 0.5, 3.0, MIN_POSITIVE_LOSS, 1e-6, max_loss]
    return st.sampled_from([v for v in edges if v <= max_loss])  # inside a narrowed domain


def _representable_loss(dtype: torch.dtype, value: float, max_loss: float = math.inf) -> float:
    """``value`` held exactly by ``dtype`` (rounded down where rounding would pass
    ``max_loss``), 0 below ``MIN_POSITIVE_LOSS``."""
    rounded = round_to(dtype, value)
    while rounded > max_loss:  # two steps at most: one ulp of the coarsest dtype is 2**-8
        value = min(value, rounded) * (1 - 2.0**-9)
        rounded = round_to(dtype, value)
    return rounded if rounded >= MIN_POSITIVE_LOSS else 0.0


_PADDING = st.sampled_from(PADDING_VALUES)
ROW_STYLES: tuple[str, ...] = ("simple", "tied", "generic")


@cache
def _generic_losses(max_loss: float) -> st.SearchStrategy[float]:
    return st.floats(0.0, max_loss, allow_subnormal=False)


@cache
def _any_loss(max_loss: float) -> st.SearchStrategy[float]:
    return st.one_of(simple_losses(max_loss), _generic_losses(max_loss))


@cache
def _loss_list(style: str, max_loss: float, size: int) -> st.SearchStrategy[list[float]]:
    element = simple_losses(max_loss) if style == "simple" else _generic_losses(max_loss)
    return st.lists(element, min_size=size, max_size=size)


@st.composite
def loss_rows(
    draw: st.DrawFn,
    mask: MaskRows,
    dtype: torch.dtype,
    max_loss: float = DEFAULT_DOMAIN.max_loss,
    *,
    padding: bool = True,
    styles: tuple[str, ...] = ROW_STYLES,
) -> Rows:
    """Non-negative losses at valid positions, held exactly by ``dtype``; one padding value
    (NaN, inf, ...) at the padded positions of the tensor.

    Each row is ``simple`` (values from ``simple_losses``: zeros, ties, tiny, the largest),
    ``tied`` (one value throughout) or ``generic`` (any floats in ``[0, max_loss]``).
    One draw per value keeps generation fast; rows shrink to ``simple`` rows of 1.0.
    ``styles`` narrows the styles drawn (generic rows alone: values whose sums round).
    """
    junk = round_to(dtype, draw(_PADDING)) if padding else 0.0
    rows = []
    for mask_row in mask:
        style = draw(st.sampled_from(styles))
        if style == "tied":
            values = [draw(_any_loss(max_loss))] * len(mask_row)
        else:
            values = draw(_loss_list(style, max_loss, len(mask_row)))
        rows.append(
            tuple(
                _representable_loss(dtype, v, max_loss) if valid else junk
                for v, valid in zip(values, mask_row, strict=True)
            )
        )
    return tuple(rows)


@cache
def weights() -> st.SearchStrategy[float]:
    """A term weight: 0 and 1 first, then anything in [1e-3, 10].

    Positive weights stay well above float32's smallest numbers: a weight of 1e-80 makes
    J and its gradient too small for float32 to hold, whatever the implementation does.
    """
    return st.one_of(st.sampled_from([0.0, 1.0]), st.floats(1e-3, 10.0))


@cache
def mix_coefficients() -> st.SearchStrategy[float]:
    """A coefficient a_k of one output in a mix sum_k a_k output_k: values that vanish, tie
    and change sign first, then any in [-10, 10]; exact in float32 (the outputs' least
    dtype), so that the upstream gradient an implementation sees is the drawn number."""
    return st.one_of(
        st.sampled_from([0.0, 1.0, -1.0, 2.0, -0.5]),
        st.floats(-10.0, 10.0, width=32, allow_subnormal=False),
    )


@dataclass(frozen=True)
class _Bounds:
    """The bounds of a domain a parameter's ``Draw`` reads (``max_alpha``, ``max_loss``)."""

    max_alpha: float = DEFAULT_DOMAIN.max_alpha
    max_loss: float = DEFAULT_DOMAIN.max_loss


@cache
def parameter_values(
    parameter: Parameter, max_alpha: float = math.inf, max_loss: float = LARGEST_MAX_LOSS
) -> st.SearchStrategy[float]:
    """Values of ``parameter`` as its ``Draw`` (``spec.parameters``) says: its edges first
    (the first is where a case shrinks to), then its further edges and the largest value,
    a narrow range, and its whole range, up to what the domain's bounds allow."""
    how = parameter.draw
    high = how.high(_Bounds(max_alpha, max_loss))
    branches = [st.sampled_from([v for v in how.edges if v <= high])]
    if how.more_edges is not None:
        branches.append(st.sampled_from([v for v in how.more_edges if v < high] + [high]))
    if how.near is not None:
        branches.append(st.floats(how.low, min(how.near, high)))
    if how.decades:
        branches.append(
            st.builds(
                lambda k, m: m * 10.0**k,
                st.integers(round(math.log10(how.low)), round(math.log10(high))),
                st.floats(1.0, 10.0, exclude_max=True),
            )
        )
    else:
        branches.append(st.floats(how.low, high))
    return st.one_of(*branches)


def alphas(max_alpha: float = COMPARISON_MAX_ALPHA) -> st.SearchStrategy[float]:
    """alpha >= 0: exactly 1 (the default) and 0 first, then small and large values.

    1 and 0 are a branch of their own: alpha is drawn once per case and a run's cases
    cluster around the configs drawn first, so each of them must be likely in every draw.
    No branch takes fewer choices than the first (a ``just`` would): hypothesis shrinks
    towards fewer choices first, and alpha would shrink to the largest instead of to 1.
    """
    return parameter_values(ALPHA, max_alpha=max_alpha)


def epsilons(max_loss: float = DEFAULT_DOMAIN.max_loss) -> st.SearchStrategy[float]:
    """epsilon >= 0: the default, 0, and values up to larger than every loss."""
    return parameter_values(EPSILON, max_loss=max_loss)


def reference_scales() -> st.SearchStrategy[float]:
    """c > 0 across orders of magnitude: 1 (the default), the extremes 10^-3 and 10^3, and
    10^k * m for k in [-3, 3], m in [1, 10)."""
    return parameter_values(C)


@st.composite
def configs(
    draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN, *, alpha: float | None = None
) -> ReconstructionLossConfig:
    """Configs with zero and non-zero weights, and every parameter of the registry drawn as
    its record says; ``alpha`` pins the exponent when given."""
    pinned = {} if alpha is None else {ALPHA.field: alpha}
    return ReconstructionLossConfig(
        **{name: draw(weights()) for name in WEIGHT_NAMES},
        **{
            p.field: pinned[p.field]
            if p.field in pinned
            else draw(parameter_values(p, domain.max_alpha, domain.max_loss))
            for p in PARAMETERS
        },
    )


def has_kept_example_without_surprisal(zfree: Rows, mask: MaskRows) -> bool:
    return any(
        any(row_mask) and all(v == 0 for v, valid in zip(row, row_mask, strict=True) if valid)
        for row, row_mask in zip(zfree, mask, strict=True)
    )


def _without_surprisal(case: LossCase) -> LossCase:
    zeros = tuple(
        tuple(0.0 if valid else v for v, valid in zip(row, m, strict=True))
        for row, m in zip(case.zfree_token_nll, case.mask, strict=True)
    )
    return replace(case, zfree_token_nll=zeros)


@dataclass(frozen=True)
class Condition:
    """Inputs on which a parameter's ``Repair`` value is an error: whether a case is such
    an input (``make_valid`` repairs it), and how to make one (validation does, on purpose)."""

    holds: Callable[[LossCase], bool]
    make: Callable[[LossCase], LossCase]


#: the conditions a parameter's ``Repair`` (``spec.parameters``) names, by name
REPAIR_CONDITIONS: dict[str, Condition] = {
    "kept-example-without-surprisal": Condition(
        lambda case: has_kept_example_without_surprisal(case.zfree_token_nll, case.mask),
        _without_surprisal,
    ),
}


def make_valid(case: LossCase) -> LossCase:
    """Repair the error cases a random draw can hit: a parameter at the value its
    ``Repair`` (``spec.parameters``) names, on inputs its condition holds for, gets the
    repair's value instead (epsilon = 0 with a kept example whose z-free losses are all 0
    gets the default epsilon)."""
    for parameter in PARAMETERS:
        repair = parameter.repair
        if (
            repair is not None
            and getattr(case.config, parameter.field) == repair.value
            and REPAIR_CONDITIONS[repair.condition].holds(case)
        ):
            case = case.with_config(**{parameter.field: repair.replacement})
    return case


@cache
def _token_values(style: str, max_loss: float) -> st.SearchStrategy[float | None]:
    """One token's value in a row of ``style``: none for a tied row (the row holds it)."""
    if style == "tied":
        return st.none()
    return simple_losses(max_loss) if style == "simple" else _generic_losses(max_loss)


@st.composite
def _example(
    draw: st.DrawFn, max_length: int, max_loss: float, styles: tuple[str, ...], holes: bool
) -> tuple[tuple[float, float, bool], ...]:
    """One example as a unit: its tokens ``(l, b, valid)`` in order, 0 to ``max_length``
    of them (the batch pads it on the right to the longest). Each of l and b is a
    ``simple``, ``tied`` or ``generic`` row (``loss_rows``); ``holes`` lets a token be a
    padded position inside the row (left padding, gaps)."""
    l_style, b_style = draw(st.sampled_from(styles)), draw(st.sampled_from(styles))
    l_tied = draw(_any_loss(max_loss)) if l_style == "tied" else 0.0
    b_tied = draw(_any_loss(max_loss)) if b_style == "tied" else 0.0
    token = st.tuples(
        _token_values(l_style, max_loss),
        _token_values(b_style, max_loss),
        st.booleans() if holes else st.just(False),
    )
    tokens = draw(st.lists(token, max_size=max_length))
    return tuple(
        (l_tied if l is None else l, b_tied if b is None else b, not hole) for l, b, hole in tokens
    )


@st.composite
def example_rows(
    draw: st.DrawFn,
    dtype: torch.dtype,
    domain: Domain = DEFAULT_DOMAIN,
    *,
    padding: bool = True,
    styles: tuple[str, ...] = ROW_STYLES,
    min_length: int = 1,
) -> tuple[Rows, Rows, MaskRows]:
    """``(token_nll, zfree_token_nll, mask)`` rows of a batch with at least one valid token.

    Examples and their tokens are drawn as units: a list of examples, each a list of
    tokens holding its l, b and mask value together, so that the shrinker deletes an
    example from all three tensors at once (and a token from its row), and a failure
    shrinks to the fewest examples and tokens that show it. Rows are right-padded to the
    longest (``min_length`` at least): ragged batches, as a data loader makes them, with
    empty rows where a failure needs them; a batch drawn ``scattered`` also has holes
    (left padding, gaps). The padded positions of each tensor hold one padding value
    (NaN, inf, ...; 0 without ``padding``), drawn after the examples.
    """
    holes = draw(st.sampled_from(["prefix", "scattered"])) == "scattered"
    example = _example(domain.max_length, domain.max_loss, styles, holes)
    examples = draw(st.lists(example, min_size=1, max_size=domain.max_batch))
    if not any(valid for tokens in examples for *_, valid in tokens):
        # a batch with no valid token is an error case, drawn elsewhere
        first = examples[0][0] if examples[0] else (1.0, 1.0, True)
        examples[0] = ((first[0], first[1], True), *examples[0][1:])
    length = max(min(min_length, domain.max_length), *(len(tokens) for tokens in examples))
    junk_l, junk_b = (
        (round_to(dtype, draw(_PADDING)), round_to(dtype, draw(_PADDING)))
        if padding
        else (0.0, 0.0)
    )

    def rows(which: int, junk: float) -> Rows:
        return tuple(
            tuple(
                _representable_loss(dtype, token[which], domain.max_loss) if token[2] else junk
                for token in tokens
            )
            + (junk,) * (length - len(tokens))
            for tokens in examples
        )

    mask = tuple(
        tuple(valid for *_, valid in tokens) + (False,) * (length - len(tokens))
        for tokens in examples
    )
    return rows(0, junk_l), rows(1, junk_b), mask


@st.composite
def loss_cases(
    draw: st.DrawFn,
    domain: Domain = DEFAULT_DOMAIN,
    *,
    dtypes: tuple[torch.dtype, ...] | None = None,
    alpha: float | None = None,
    padding: bool = True,
    integer_masks: bool = True,
    styles: tuple[str, ...] = ROW_STYLES,
    min_length: int = 1,
) -> LossCase:
    """A valid input of the stack (MATH.md "Errors" never applies to it), its examples and
    tokens drawn as units (``example_rows``); ``styles`` as in ``loss_rows``,
    ``min_length`` the shortest T drawn."""
    dtype = draw(st.sampled_from(dtypes or domain.dtypes))
    token_nll, zfree, mask = draw(
        example_rows(dtype, domain, padding=padding, styles=styles, min_length=min_length)
    )
    mask_dtype = (
        draw(st.sampled_from((torch.bool, *INTEGER_MASK_DTYPES))) if integer_masks else torch.bool
    )
    case = LossCase(
        token_nll=token_nll,
        zfree_token_nll=zfree,
        mask=mask,
        config=draw(configs(domain, alpha=alpha)),
        dtype=dtype,
        mask_dtype=mask_dtype,
        device=domain.device,
        layouts=draw(case_layouts(tuple(map(alike_along_a_dimension, (token_nll, zfree, mask))))),
    )
    return make_valid(case)


@st.composite
def case_layouts(draw: st.DrawFn, expandable: tuple[bool, ...]) -> tuple[str, ...]:
    """Each input's layout (MATH.md, "Inputs": any strided one), ``expanded`` only for an
    input whose values repeat along a dimension (``expandable``): all contiguous half the
    time, in one choice that shrinks to it (a draw per input would cost every case three,
    and the shrinker the paths between), else each contiguous or a view."""
    if not draw(st.booleans()):
        return ALL_CONTIGUOUS
    views = [layout for layout in LAYOUTS if layout not in (CONTIGUOUS, "expanded")]
    return tuple(
        draw(st.one_of(st.just(CONTIGUOUS), st.sampled_from(views + ["expanded"] * ok)))
        for ok in expandable
    )


def mean_zfree_loss(case: LossCase) -> float:
    """mean_i bbar_i over kept examples, in float64: the c of the z-free baseline."""
    means = [
        math.fsum(v for v, valid in zip(row, m, strict=True) if valid) / sum(m)
        for row, m in zip(case.zfree_token_nll, case.mask, strict=True)
        if any(m)
    ]
    return math.fsum(means) / len(means)


@st.composite
def baseline_cases(draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN) -> LossCase:
    """The z-free baseline: l = b at valid positions, c = mean_i bbar_i (> 0)."""
    case = draw(loss_cases(domain))
    if mean_zfree_loss(case) == 0:
        rows = [list(row) for row in case.zfree_token_nll]
        b, t = next((i, j) for i, row in enumerate(case.mask) for j, v in enumerate(row) if v)
        rows[b][t] = 1.0
        case = case.with_rows(case.token_nll, tuple(map(tuple, rows)), case.mask)
    token_nll = tuple(
        tuple(bv if valid else lv for lv, bv, valid in zip(lr, br, mr, strict=True))
        for lr, br, mr in zip(case.token_nll, case.zfree_token_nll, case.mask, strict=True)
    )
    case = replace(case, token_nll=token_nll)
    case = case.with_config(zfree_reference_scale=mean_zfree_loss(case))
    return make_valid(case)


@st.composite
def logits_cases(
    draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN, *, ignore_index: int = -100
) -> LossCase:
    """Inputs as a language model makes them: per-token cross-entropy of random logits of
    the model and of the z-free reference against the same targets, padded with
    ``ignore_index``. The losses cluster, tie and vanish as real ones do."""
    mask = draw(mask_rows(domain))
    batch, length = len(mask), len(mask[0])
    vocab = draw(st.integers(2, 16))
    # Logits come from a seeded generator: B*T*V drawn floats would be slow to draw and
    # no easier to read; the report prints the losses, not the logits.
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    spread = draw(st.sampled_from([1.0, 0.1, 10.0]))
    generated = [
        torch.randn(batch, length, vocab, generator=generator, dtype=torch.float64) * spread
        for _ in range(2)
    ]
    targets = torch.tensor(
        [[draw(st.integers(0, vocab - 1)) if v else ignore_index for v in row] for row in mask]
    )
    dtype = draw(st.sampled_from(domain.dtypes))

    def nll(logits: torch.Tensor) -> Rows:
        losses = torch.nn.functional.cross_entropy(
            logits.reshape(-1, vocab),
            targets.reshape(-1),
            ignore_index=ignore_index,
            reduction="none",
        ).view(batch, length)
        return tuple(tuple(_representable_loss(dtype, float(v)) for v in row) for row in losses)

    case = LossCase(
        token_nll=nll(generated[0]),
        zfree_token_nll=nll(generated[1]),
        mask=mask,
        config=draw(configs(domain)),
        dtype=dtype,
        device=domain.device,
    )
    return make_valid(case)


# ---------------------------------------------------------------------------------------
# Inputs at training sizes (properties.scale)


def _scale_expandable(case: ScaleCase) -> tuple[bool, bool, bool]:
    """Which inputs of ``case`` repeat along the rows (and so may be expanded)."""
    rows_alike = len(case.spans) == 1 and case.dropped_from is None
    return (
        rows_alike and case.token_nll.alike_along_rows,
        rows_alike and case.zfree_token_nll.alike_along_rows,
        rows_alike,
    )


def scale_valid(case: ScaleCase) -> ScaleCase:
    """``case`` as an input the spec accepts: a valid position somewhere (else every row
    valid), and epsilon's repair where a kept example has only zero z-free losses."""
    _, zfree, mask = case.tensors()
    if not bool(mask.any()):
        case = replace(case, spans=(RowSpan(),), dropped_from=None)
        _, zfree, mask = case.tensors()
    repair = EPSILON.repair
    assert repair is not None
    if getattr(case.config, EPSILON.field) == repair.value:
        kept = mask.bool().any(dim=1)
        zero_base = kept & ~(mask.bool() & (zfree != 0)).any(dim=1)
        if bool(zero_base.any()):
            case = replace(case, config=replace(case.config, **{EPSILON.field: repair.replacement}))
    return case


@st.composite
def scale_cases(
    draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN, dtypes: tuple[torch.dtype, ...] = ()
) -> ScaleCase:
    """A batch at training sizes (``properties.scale``): T up to ``domain.scale_length``, B
    up to ``domain.scale_batch``, B x T up to ``domain.scale_positions``, each around a
    power of two half the time; rows valid in a few patterns; values constant or dense,
    with runs and spikes; any padding value, config, dtype and layout."""
    length = draw(scale_sizes(1, min(domain.scale_length, domain.scale_positions)))
    batch = draw(scale_sizes(1, max(1, min(domain.scale_batch, domain.scale_positions // length))))
    max_loss = domain.max_loss
    case = ScaleCase(
        batch,
        length,
        draw(scale_values(batch, length, max_loss)),
        draw(scale_values(batch, length, max_loss)),
        tuple(draw(st.lists(row_spans(length), min_size=1, max_size=3))),
        padding=draw(st.sampled_from(PADDING_VALUES)),
        config=draw(configs(domain)),
        dtype=draw(st.sampled_from(dtypes or domain.dtypes)),
        device=domain.device,
    )
    case = replace(case, layouts=draw(case_layouts(_scale_expandable(case))))
    return scale_valid(case)
