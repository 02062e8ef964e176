"""Inputs at training sizes, drawn as compact descriptions and built with torch.

A ``LossCase`` holds every value (at most 8 x 8 of them). A kernel breaks where such cases
never reach: a tail tile, a count past 255 or 32767, a long reduction in half precision,
a path taken above some size (MATH.md, "Inputs": any size is valid). A ``ScaleCase`` is a
batch of ``B x T`` positions described in a few numbers: which positions of each row are
valid (``RowSpan``, repeated over the rows), what the losses hold (``Values``: a constant
or dense values from a seed, with runs and spikes over them), the value at padded
positions, the config, dtype, device and layouts. ``tensors()`` builds it with
``torch.full``, slicing and a seeded ``torch.rand``; ``construction_lines()`` writes the same
in Python for a report's script; ``describe()`` says it in a line ("1 x 513, every position
valid, l = 1.0, b = 1.0 except b[0, 7] = 40.0").

Hypothesis shrinks the description: a smaller ``T`` or ``B``, fewer spikes, a constant in
place of dense values, so a failure at scale is shown at the smallest size that fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch
from hypothesis import strategies as st

from properties.cases import (
    ALL_CONTIGUOUS,
    DTYPE_NAMES,
    INPUT_NAMES,
    format_config,
    format_float,
    views_of,
)
from properties.config import ReconstructionLossConfig
from properties.layouts import CONTIGUOUS, LAYOUTS, lay_out

#: the step of the dense values' Weyl sequence: frac(i * (sqrt 5 - 1)/2) spreads evenly
WEYL = 0.6180339887498949
#: how far apart the sequence's indices of two rows lie: any row length stays below it, so
#: position (r, t) holds the same value at every batch size and row length
ROW_STRIDE = 1_000_003


@dataclass(frozen=True)
class Values:
    """The values of a ``[B, T]`` loss tensor: ``fill`` everywhere, or with ``dense`` =
    ``(seed, low, high)`` values spread evenly over ``[low, high)`` (a Weyl sequence: at
    ``(r, t)``, ``low + (high - low) frac((seed + r ROW_STRIDE + t) WEYL)``, the same at every
    size); then each run ``(start, stop, value)`` over columns ``start:stop`` of every row;
    then each spike ``(row, column, value)``."""

    fill: float = 1.0
    dense: tuple[int, float, float] | None = None
    runs: tuple[tuple[int, int, float], ...] = ()
    spikes: tuple[tuple[int, int, float], ...] = ()

    def build(self, batch: int, length: int, device: str) -> torch.Tensor:
        """The values as a float64 tensor."""
        if self.dense is None:
            values = torch.full((batch, length), self.fill, dtype=torch.float64, device=device)
        else:
            seed, low, high = self.dense
            rows = torch.arange(batch, dtype=torch.float64, device=device)[:, None] * ROW_STRIDE
            index = rows + torch.arange(length, dtype=torch.float64, device=device) + seed
            values = torch.frac(index * WEYL) * (high - low) + low
        for start, stop, value in self.runs:
            values[:, start:stop] = value
        for row, column, value in self.spikes:
            values[row, column] = value
        return values

    def lines(self, name: str, batch: int, length: int) -> list[str]:
        """``build`` in Python, assigning ``name``."""
        if self.dense is None:
            made = f"torch.full(({batch}, {length}), {self.fill!r}, dtype=torch.float64)"
        else:
            seed, low, high = self.dense
            made = (
                f"torch.frac((torch.arange({batch}, dtype=torch.float64)[:, None] * {ROW_STRIDE}"
                f" + torch.arange({length}, dtype=torch.float64) + {seed}) * {WEYL!r})"
                f" * {high - low!r} + {low!r}"
            )
        lines = [f"{name} = {made}"]
        lines += [f"{name}[:, {a}:{b}] = {v!r}" for a, b, v in self.runs]
        lines += [f"{name}[{r}, {c}] = {v!r}" for r, c, v in self.spikes]
        return lines

    def describe(self, symbol: str) -> str:
        text = (
            f"{symbol} = {self.fill!r}"
            if self.dense is None
            else f"{symbol} spread over [{self.dense[1]!r}, {self.dense[2]!r}) "
            f"(seed {self.dense[0]})"
        )
        changes = [f"{symbol}[:, {a}:{b}] = {v!r}" for a, b, v in self.runs]
        changes += [f"{symbol}[{r}, {c}] = {v!r}" for r, c, v in self.spikes]
        return text + (" except " + ", ".join(changes) if changes else "")

    @property
    def largest(self) -> float:
        """The largest value it may hold."""
        values = [self.fill if self.dense is None else self.dense[2]]
        values += [v for *_, v in self.runs] + [v for *_, v in self.spikes]
        return max(values)

    @property
    def alike_along_rows(self) -> bool:
        """Whether every row holds the same values (what an expanded layout needs)."""
        return self.dense is None and not self.spikes


@dataclass(frozen=True)
class RowSpan:
    """The valid positions of a row: columns ``start:stop`` (clipped to the row), less every
    ``hole``-th of them (0: none), none where ``start >= stop`` (a dropped row). A negative
    ``start`` counts from the row's end at every size: ``RowSpan(-1)`` is one valid token
    at the very end, of a row of any length."""

    start: int = 0
    stop: int | None = None  # None: the end of the row
    hole: int = 0

    def columns(self, length: int) -> tuple[int, int]:
        stop = length if self.stop is None else min(self.stop, length)
        start = max(length + self.start, 0) if self.start < 0 else min(self.start, length)
        return start, stop

    def describe(self, length: int) -> str:
        start, stop = self.columns(length)
        if start >= stop:
            return "no valid position"
        text = "every position" if (start, stop) == (0, length) else f"positions {start}:{stop}"
        return text + (f" less every {self.hole}th" if self.hole else "")


@dataclass(frozen=True)
class ScaleCase:
    """A ``[B, T]`` input described compactly (the module docstring): row ``i`` is valid as
    ``spans[i % len(spans)]`` says, up to ``dropped_from``; padded positions hold ``padding``
    in both losses."""

    batch: int
    length: int
    token_nll: Values = field(default_factory=Values)
    zfree_token_nll: Values = field(default_factory=Values)
    spans: tuple[RowSpan, ...] = (RowSpan(),)
    #: rows from this one on are dropped (no valid position); None: none is
    dropped_from: int | None = None
    padding: float = 0.0
    config: ReconstructionLossConfig = field(default_factory=ReconstructionLossConfig)
    dtype: torch.dtype = torch.float32
    mask_dtype: torch.dtype = torch.bool
    device: str = "cpu"
    layouts: tuple[str, ...] = ALL_CONTIGUOUS

    @property
    def shape(self) -> tuple[int, int]:
        return self.batch, self.length

    @property
    def views(self) -> dict[str, str]:
        """The inputs that are not contiguous, by name, with their layouts."""
        return views_of(self.layouts)

    def _mask(self) -> torch.Tensor:
        mask = torch.zeros(self.shape, dtype=torch.bool, device=self.device)
        every = len(self.spans)
        for k, span in enumerate(self.spans):
            start, stop = span.columns(self.length)
            mask[k::every, start:stop] = True
            if span.hole:
                mask[k::every, start + span.hole - 1 : stop : span.hole] = False
        if self.dropped_from is not None:
            mask[self.dropped_from :] = False
        return mask

    def on_device(self, device: str) -> ScaleCase:
        return self if self.device == device else replace(self, device=device)

    @property
    def has_valid_token(self) -> bool:
        return bool(self._mask().any())

    def tensors(self, *, requires_grad: bool = False) -> tuple[torch.Tensor, ...]:
        """Fresh ``(token_nll, zfree_token_nll, mask)`` tensors for one call."""
        mask = self._mask()
        token_nll, zfree = (
            values.build(self.batch, self.length, self.device)
            .masked_fill(~mask, self.padding)
            .to(self.dtype)
            for values in (self.token_nll, self.zfree_token_nll)
        )
        made = (token_nll, zfree, mask.to(self.mask_dtype))
        token_nll, zfree, mask = (
            lay_out(tensor, layout).detach()
            for tensor, layout in zip(made, self.layouts, strict=True)
        )
        if requires_grad:
            token_nll.requires_grad_()
        return token_nll, zfree, mask

    def construction_lines(
        self, k: int, *, token_nll_requires_grad: bool = False, zfree_requires_grad: bool = False
    ) -> list[str]:
        """``token_nll_k``, ``zfree_token_nll_k`` and ``mask_k`` built as ``tensors`` builds
        them, in Python (for a report's script)."""
        batch, length = self.shape
        every = len(self.spans)
        lines = [f"mask_{k} = torch.zeros(({batch}, {length}), dtype=torch.bool)"]
        for j, span in enumerate(self.spans):
            start, stop = span.columns(length)
            rows = "" if every == 1 else f"{j}::{every}"
            if start >= stop:
                continue  # a dropped row: nothing valid
            lines.append(f"mask_{k}[{rows or ':'}, {start}:{stop}] = True")
            if span.hole:
                lines.append(
                    f"mask_{k}[{rows or ':'}, {start + span.hole - 1}:{stop}:{span.hole}] = False"
                )
        if self.dropped_from is not None:
            lines.append(f"mask_{k}[{self.dropped_from}:] = False")
        grads = {INPUT_NAMES[0]: token_nll_requires_grad, INPUT_NAMES[1]: zfree_requires_grad}
        dtype = f"torch.{DTYPE_NAMES[self.dtype]}"
        for name, values in zip(
            INPUT_NAMES[:2], (self.token_nll, self.zfree_token_nll), strict=True
        ):
            lines += values.lines(f"{name}_{k}", batch, length)
            padded = f"masked_fill(~mask_{k}, {format_float(self.padding)})"
            lines.append(f"{name}_{k} = {name}_{k}.{padded}.to({dtype})")
        if self.mask_dtype != torch.bool:
            lines.append(f"mask_{k} = mask_{k}.to({self.mask_dtype})")
        device = "" if self.device == "cpu" else f".to({self.device!r})"
        for name, layout in zip(INPUT_NAMES, self.layouts, strict=True):
            made = f"{name}_{k}{device}"
            if layout != CONTIGUOUS:
                made = f"lay_out({made}, {layout!r}).detach()"
            if grads.get(name):
                made += ".requires_grad_()"
            if made != f"{name}_{k}":
                lines.append(f"{name}_{k} = {made}")
        return lines

    def describe(self) -> str:
        """The input in a line: shape, valid positions, values, dtype and layouts."""
        shown = [span.describe(self.length) for span in self.spans[: self.batch]]
        if len(set(shown)) == 1:
            spans = shown[0]
        else:
            every = len(self.spans)
            spans = "; ".join(f"rows {j}::{every}: {text}" for j, text in enumerate(shown))
        if self.dropped_from is not None:
            spans += f"; rows {self.dropped_from}: dropped"
        parts = [
            f"{self.batch} x {self.length}",
            spans,
            self.token_nll.describe("l"),
            self.zfree_token_nll.describe("b"),
            DTYPE_NAMES[self.dtype],
        ]
        if self.padding != 0.0 or math.copysign(1.0, self.padding) < 0:
            parts.append(f"padding {format_float(self.padding)}")
        parts += [f"{name} {LAYOUTS[layout]}" for name, layout in self.views.items()]
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"ScaleCase({self.describe()}; config={format_config(self.config)})"

    def resized(self, batch: int, length: int) -> ScaleCase:
        """The same description at ``batch x length`` (runs and spikes outside it left out):
        every position inside holds the value it held."""

        def within(values: Values) -> Values:
            return replace(
                values,
                runs=tuple((a, min(b, length), v) for a, b, v in values.runs if a < length),
                spikes=tuple(s for s in values.spikes if s[0] < batch and s[1] < length),
            )

        return replace(
            self,
            batch=batch,
            length=length,
            token_nll=within(self.token_nll),
            zfree_token_nll=within(self.zfree_token_nll),
        )

    def smaller(self) -> list[ScaleCase]:
        """Smaller or simpler descriptions, the largest steps first: half the length and
        half the batch, then the same size described more simply (``simpler``), then ever
        closer sizes (T - T/4, T - T/8, ..., T - 1, then B's). A failure that a search found
        at 1 x 65537 is cut down to the size it starts at, on values read at a glance."""

        lengths, batches = _order(self.length), _order(self.batch)
        halves = [(self.batch, t) for t in lengths[:1]] + [(b, self.length) for b in batches[:1]]
        closer = [(self.batch, t) for t in lengths[1:]] + [(b, self.length) for b in batches[1:]]
        return [
            *(self.resized(b, t) for b, t in halves),
            *self.simpler(),
            *(self.resized(b, t) for b, t in closer),
        ]

    def simpler(self) -> list[ScaleCase]:
        """The same size described more simply, one part at a time: each loss without its
        spikes, runs and spread (then its fill 1.0), every row valid, no input a view."""
        found = []
        for name in ("token_nll", "zfree_token_nll"):
            values: Values = getattr(self, name)
            plain = Values(values.fill) if values != Values(values.fill) else Values()
            if plain != values:
                found.append(replace(self, **{name: plain}))
        if self.spans != (RowSpan(),) or self.dropped_from is not None:
            found.append(replace(self, spans=(RowSpan(),), dropped_from=None))
        if self.layouts != ALL_CONTIGUOUS:
            found.append(replace(self, layouts=ALL_CONTIGUOUS))
        return found

    def padded_to(self, batch: int, length: int) -> ScaleCase:
        """The same batch padded to ``batch x length``: the rows added dropped, the columns
        added padding; every valid position holds the value it held (an expanded layout
        becomes contiguous where dropped rows make the rows differ)."""
        spans = tuple(RowSpan(*s.columns(self.length), s.hole) for s in self.spans)
        if batch == self.batch:
            return replace(self, length=length, spans=spans)
        dropped = self.batch if self.dropped_from is None else self.dropped_from
        layouts = tuple(CONTIGUOUS if layout == "expanded" else layout for layout in self.layouts)
        return replace(
            self, batch=batch, length=length, spans=spans, dropped_from=dropped, layouts=layouts
        )


def _order(size: int) -> list[int]:
    """The sizes ``ScaleCase.smaller`` tries below ``size``: half of it, then ``size - size/4``,
    ``size - size/8``, ... up to ``size - 1``."""
    tried = [size // 2, *(size - size // 2**k for k in range(2, 40) if size // 2**k), size - 1]
    return list(dict.fromkeys(n for n in tried if 1 <= n < size))


def scale_cases_in(value: object) -> list[ScaleCase]:
    """The ``ScaleCase`` an input is, or the ones a record of two sizes calls at: its
    ``case``, then its ``padded`` one."""
    found = (value, getattr(value, "case", None), getattr(value, "padded", None))
    return [c for c in found if isinstance(c, ScaleCase)]


# ---------------------------------------------------------------------------------------
# Strategies

#: the defaults of --max-length, --max-batch and --max-positions: what training reaches
#: (T = 64k and one more: a count past 32767 and 65535, a tail of one; B = 256; 2^20
#: positions in one call)
MAX_LENGTH = 2**16 + 1
MAX_BATCH = 256
MAX_POSITIONS = 2**20


def around_powers_of_two(low: int, high: int) -> list[int]:
    """``2^k - 1``, ``2^k`` and ``2^k + 1`` for every power of two from 16 within
    ``[low, high]``, and ``high``: where tiles, blocks and cut-overs end."""
    sizes = {n for k in range(4, 40) for n in (2**k - 1, 2**k, 2**k + 1) if low <= n <= high} | {
        high
    }
    return sorted(sizes)


def scale_sizes(low: int, high: int) -> st.SearchStrategy[int]:
    """A size around a power of two half the time, else anywhere in ``[low, high]``;
    shrinking towards ``low``."""
    return st.one_of(st.integers(low, high), st.sampled_from(around_powers_of_two(low, high)))


@st.composite
def row_spans(draw: st.DrawFn, length: int) -> RowSpan:
    """A row's valid positions: all of them (what it shrinks to), right or left padding, one
    valid token at the very end, holes, or a dropped row."""
    kind = draw(st.sampled_from(("all", "right", "left", "last", "holes", "dropped")))
    if kind == "all":
        return RowSpan()
    if kind == "right":
        return RowSpan(0, draw(st.integers(1, length)))
    if kind == "left":
        return RowSpan(draw(st.integers(0, length - 1)))
    if kind == "last":
        return RowSpan(-1)  # the last position at every size the case is cut to
    if kind == "holes":
        return RowSpan(hole=draw(st.integers(2, 17)))
    return RowSpan(0, 0)


@st.composite
def scale_values(draw: st.DrawFn, batch: int, length: int, max_loss: float) -> Values:
    """A constant (what it shrinks to) or dense values, with a few runs and spikes."""
    top = min(max_loss, 100.0)
    dense = None
    if draw(st.booleans()):
        seed = draw(st.integers(0, 2**16))
        low = draw(st.sampled_from((0.0, 0.5, 1.0)))
        dense = (seed, min(low, top / 2), top)
    fill = draw(st.sampled_from((1.0, 0.5, 2.0, 0.0, top)))
    value = st.floats(0.0, max_loss, allow_nan=False, allow_infinity=False)
    runs = draw(
        st.lists(
            st.tuples(st.integers(0, length - 1), st.integers(1, length), value).filter(
                lambda r: r[0] < r[1]
            ),
            max_size=2,
        )
    )
    spike = st.tuples(st.integers(0, batch - 1), st.integers(0, length - 1), value)
    return Values(fill, dense, tuple(runs), tuple(draw(st.lists(spike, max_size=3))))
