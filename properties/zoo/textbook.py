"""A plain, vectorised torch implementation of the stack, with one mistake at a time.

``textbook_losses(..., mistake=None)`` is correct: it follows MATH.md line by line. Each
name in ``MISTAKES`` switches on one realistic slip at the line where people make it; the
wrong implementations of ``properties.zoo.wrong`` are this function with one mistake on.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from properties.config import ReconstructionLossConfig
from properties.invariants.edge_cases import EDGE_CASES
from properties.invariants.scale import AcrossThreshold
from properties.scale import RowSpan, ScaleCase, Values
from properties.zoo.smallest import (
    ANY_INPUT,
    EMPTY_ROW,
    NAN,
    ONE_CELL,
    PADDED,
    TWO_ROWS,
    TWO_TOKENS,
    WEIGHTS,
    Smallest,
    loss_case,
)
from spec.terms import BTOK, CC, DIST, EX, KAPPA, RAW, TERMS, TOK, TOTAL

MISTAKES: dict[str, str] = {
    "global-token-mean": "R_raw averages over all valid tokens of the batch, not per example",
    "padding-counted": "each example's mean divides by the padded length T, not n_i",
    "empty-rows-counted": "batch means divide by B, fully padded examples included",
    "mask-multiplication": "padding is removed by multiplying with the mask (NaN * 0 = NaN)",
    "zfree-not-detached": "the weights built from b are not detached",
    "alpha-ignored": "the shares are linear in b whatever alpha is",
    "exp-log-shares": "b^alpha as exp(alpha * log b): NaN for alpha = 0 and b = 0",
    "no-max-subtraction": "b^alpha / sum b^alpha without taking the maximum out (overflows)",
    "no-zero-row-fallback": "a row whose valid b are all 0 gets shares 0/0",
    "kappa-from-token-nll": "kappa is computed from l instead of b",
    "epsilon-as-floor": "R_ex divides by max(bbar, eps) instead of bbar + eps",
    "cc-scale-missing": "R_cc forgets the 1/c",
    "shares-over-padding": "the shares' normaliser runs over padded positions too (as b = 0)",
    "total-missing-cc": "J leaves out the w_cc term",
    "low-precision-compute": "float16/bfloat16 inputs are computed in their own dtype",
    "mutates-input": "padding is zeroed in place in the caller's token_nll",
    "float64-outputs": "results are returned in float64 whatever the inputs",
    "diagnostics-empty-rows-counted": "the two diagnostics average over all B examples",
    "batch-normalized-shares": "b^alpha is normalised over the whole batch, not per example",
    "token-term-detached": "l is detached in the token-weighted sum: right value, no gradient",
    "unnormalized-shares": "the token weights are b^alpha without dividing by their sum",
    "kappa-ratio-of-means": "kappa is mean(btok) / mean(bbar) over the batch",
    "shares-from-token-nll": "the shares are built from l (detached) instead of b",
    "nondeterministic-order": "per-example sums run in an order that changes from call to call, "
    "as GPU atomics do",
    "lengths-from-first-row": "every example's token count is read off the first row, as if "
    "the batch were packed to one length",
    "right-padding-assumed": "the valid tokens are taken to be the first n_i positions of each "
    "row, as if all padding were on the right",
    "kappa-with-epsilon": "kappa divides by bbar + eps, the R_ex denominator, instead of bbar",
    "alpha-in-result": "token_weight_alpha is returned beside the outputs, for logging",
    "terms-detached": "the terms are returned detached (logged numbers); only the total "
    "keeps its graph",
    "zfree-cached-by-shape": "the z-free losses are cached per batch shape, as for a fixed "
    "reference: a later batch of the same shape reads the first one's",
    "zfree-running-buffer": "a running mean of the z-free losses is kept in the last call's "
    "zfree_token_nll.detach() (its storage, not a copy) and updated in place by the next call "
    "of its shape",
    "lazy-first-call": "the first call of a process returns its warm-up pass, run before the "
    "config was read (with c = 1): every later call is right",
    "contiguous-assumed": "each input's data is read as if it were contiguous from the start "
    "of its storage (its strides and storage offset ignored, as a kernel given data_ptr())",
    "writes-noncontiguous-input": "padding is zeroed in place in token_nll when it arrives as "
    "a view (the contiguous path copies first)",
    # the mistakes of kernels that work tile by tile (TILE positions), seen only at sizes
    "tail-tile-dropped": "the positions past the last full tile of a row are left out",
    "shares-per-tile": "b^alpha is normalised within each tile, and the tiles' shares averaged",
    "running-max-restarts": "the maximum b^alpha is divided by restarts at each tile and the "
    "earlier tiles' sums are not rescaled (an online softmax without its correction)",
    "half-precision-counts": "the count n_i of valid tokens is kept in the inputs' float16 or "
    "bfloat16 (bfloat16 holds every whole number to 256, float16 to 2048)",
    "int16-counts": "the count n_i of valid tokens is kept in an int16 (it wraps past 32767)",
    "fast-path-counts-dropped-rows": "above 128 rows a fast path averages over all B rows, the "
    "dropped ones included",
    "fast-path-counts-padding": "from 2^16 positions a fast path divides each row's sums by T, "
    "padded positions included",
    "backward-drops-tail-tile": "the backward leaves the gradient of the last partial tile 0 "
    "(the forward is right)",
}
#: the positions a tile of the tiled mistakes holds
TILE = 64
#: the mistakes of the tiled kernels above, each first seen at a size (``properties.scale``)
AT_SCALE = tuple(MISTAKES)[tuple(MISTAKES).index("tail-tile-dropped") :]


_CALLS = [0]  # calls of the nondeterministic-order mistake so far
#: the z-free losses the zfree-cached-by-shape mistake has seen, by (shape, dtype)
_CACHED: dict[tuple, Tensor] = {}
#: the last z-free losses the zfree-running-buffer mistake was given, by (shape, dtype)
_RUNNING: dict[tuple, Tensor] = {}
#: whether the lazy-first-call mistake made its first call (its warm-up) in this process
_WARMED_UP = [False]


def fresh_process() -> None:
    """Forget what the mistakes that keep state saw, as a fresh process starts: for a check,
    in this process, of what shows on a process's first call."""
    _CALLS[0] = 0
    _CACHED.clear()
    _RUNNING.clear()
    _WARMED_UP[0] = False


#: mistake -> the known variant (``properties/diagnosis.py``) a report names for it
DIAGNOSED_AS: dict[str, str] = {
    "global-token-mean": "global-token-mean",
    "padding-counted": "padding-counted",
    "empty-rows-counted": "empty-rows-counted",
    "alpha-ignored": "alpha-ignored",
    "epsilon-as-floor": "epsilon-as-floor",
    "cc-scale-missing": "scale-missing",
    "shares-from-token-nll": "shares-from-token_nll",
    "batch-normalized-shares": "batch-normalized-shares",
    "kappa-ratio-of-means": "ratio-of-means",
    "diagnostics-empty-rows-counted": "empty-rows-counted",
    "kappa-from-token-nll": "kappa-from-token_nll",
    "unnormalized-shares": "unnormalized-shares",
    "shares-over-padding": "shares-over-padding",
    "lengths-from-first-row": "lengths-from-first-row",
    "kappa-with-epsilon": "kappa-with-epsilon",
    "total-missing-cc": "total without the",
}


def _tiles(x: Tensor) -> Tensor:
    """``[B, T]`` as ``[B, tiles, TILE]``, the last tile padded with zeros."""
    batch, length = x.shape
    tiles = -(-length // TILE)
    return torch.nn.functional.pad(x, (0, tiles * TILE - length)).reshape(batch, tiles, TILE)


def _per_tile(x: Tensor, reduce) -> Tensor:
    """``reduce`` (``torch.sum`` or ``torch.amax``) over each tile of a row, broadcast back
    to every position of the tile."""
    tiles = _tiles(x)
    reduced = reduce(tiles, dim=2, keepdim=True).expand_as(tiles)
    return reduced.reshape(x.shape[0], -1)[:, : x.shape[1]]


def textbook_losses(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    mask: Tensor,
    config,
    *,
    mistake: str | None = None,
) -> dict[str, Tensor]:
    if mistake is not None and mistake not in MISTAKES:
        raise ValueError(f"unknown mistake {mistake!r}")
    if mistake == "contiguous-assumed":  # the strides and storage offset of a view ignored
        token_nll, zfree_token_nll, mask = (
            torch.as_strided(x, x.shape, (x.shape[1], 1), 0)
            for x in (token_nll, zfree_token_nll, mask)
        )
    if mistake == "writes-noncontiguous-input" and not token_nll.is_contiguous():
        token_nll.data.masked_fill_(~mask.bool(), 0.0)
    mask = mask.bool()
    batch, length = mask.shape
    tail = torch.arange(length, device=mask.device) >= length // TILE * TILE
    if mistake == "tail-tile-dropped" and length > TILE:
        mask = mask & ~tail
    if mistake == "right-padding-assumed":
        mask = torch.arange(mask.shape[1], device=mask.device) < mask.sum(1, keepdim=True)
    dtype = torch.promote_types(token_nll.dtype, zfree_token_nll.dtype)
    if mistake == "float64-outputs":
        dtype = torch.float64
    elif torch.finfo(dtype).bits < 32 and mistake != "low-precision-compute":
        dtype = torch.float32
    if mistake == "mutates-input":
        token_nll.data.masked_fill_(~mask, 0.0)
    l = token_nll.to(dtype)
    b = zfree_token_nll.to(dtype)
    if mistake == "zfree-cached-by-shape":
        b = _CACHED.setdefault((tuple(b.shape), b.dtype), b.detach().clone())
    if mistake == "zfree-running-buffer":
        # the running mean lives in the previous call's tensor: detach() shares its storage
        key = (tuple(zfree_token_nll.shape), zfree_token_nll.dtype)
        previous = _RUNNING.get(key)
        if previous is not None:
            previous.mul_(0.9).add_(zfree_token_nll.detach(), alpha=0.1)
        _RUNNING[key] = zfree_token_nll.detach()
    if mistake != "zfree-not-detached":
        b = b.detach()
    if mistake == "backward-drops-tail-tile" and length > TILE:
        l = torch.where(tail, l.detach(), l)
    if mistake == "mask-multiplication":
        l, b = l * mask, b * mask
    else:
        l, b = torch.where(mask, l, 0.0), torch.where(mask, b, 0.0)
    alpha = config.token_weight_alpha
    eps = config.example_inverse_surprisal_epsilon
    c = config.zfree_reference_scale
    if mistake == "lazy-first-call" and not _WARMED_UP[0]:
        _WARMED_UP[0] = True  # the warm-up pass is the first call's result: c not yet read
        c = 1.0

    n = mask.sum(1)
    kept = n > 0
    all_rows = torch.tensor(float(mask.shape[0]), dtype=dtype)
    kept_count = all_rows if mistake == "empty-rows-counted" else kept.sum().to(dtype)
    if mistake == "fast-path-counts-dropped-rows" and batch > 128:
        kept_count = all_rows
    n_safe = n.clamp(min=1).to(dtype)
    if mistake == "int16-counts":
        n_safe = n.to(torch.int16).clamp(min=1).to(dtype)
    if mistake == "half-precision-counts" and torch.finfo(token_nll.dtype).bits < 32:
        n_safe = n_safe.to(token_nll.dtype).to(dtype)
    if mistake == "padding-counted" or (
        mistake == "fast-path-counts-padding" and batch * length >= 2**16
    ):
        n_safe = torch.full_like(n_safe, mask.shape[1])
    elif mistake == "lengths-from-first-row":
        n_safe = n_safe[:1].expand_as(n_safe)
    if mistake == "nondeterministic-order":
        # the order of arrival differs from one call to the next (here: reversed on every
        # other call, so that the suite finds it on the same inputs every run)
        _CALLS[0] += 1
        lbar = (l.flip(1) if _CALLS[0] % 2 else l).sum(1) / n_safe
    else:
        lbar = l.sum(1) / n_safe
    bbar = b.sum(1) / n_safe

    # shares pi_it = b_it^alpha / sum_s b_is^alpha over valid positions
    share_mask = torch.ones_like(mask) if mistake == "shares-over-padding" else mask
    exponent = 1.0 if mistake == "alpha-ignored" else alpha
    if mistake == "shares-from-token-nll":
        b_for_shares, b = b, l.detach()
    if mistake == "exp-log-shares":
        numerator = torch.where(share_mask, torch.exp(exponent * torch.log(b)), 0.0)
    elif mistake == "no-max-subtraction":
        numerator = torch.where(share_mask, b**exponent, 0.0)
    else:
        top = b.amax(1, keepdim=True)
        if mistake == "running-max-restarts":
            top = _per_tile(b, torch.amax)
        ratio = torch.where(top > 0, b / top, 1.0)
        if mistake == "no-zero-row-fallback":
            ratio = b / top
        present = share_mask & (ratio > 0) if exponent > 0 else share_mask
        numerator = torch.where(present, ratio**exponent, 0.0)
    if mistake == "batch-normalized-shares":
        denominator = numerator.sum().expand(mask.shape[0])
    elif mistake == "shares-per-tile":
        tiles = _per_tile(numerator, torch.sum)
        per_tile = torch.where(tiles > 0, numerator / tiles, 0.0)
        occupied = _tiles(share_mask.to(dtype)).amax(dim=2).sum(1)  # tiles with a token
        numerator, denominator = per_tile, torch.where(kept, occupied, 1.0)
    elif mistake == "unnormalized-shares":
        denominator = torch.ones(mask.shape[0], dtype=dtype)
    else:
        denominator = torch.where(kept, numerator.sum(1), 1.0)
    pi = numerator / denominator[:, None]
    if mistake == "shares-from-token-nll":
        b = b_for_shares
    l_for_tokens = l.detach() if mistake == "token-term-detached" else l
    ltok = (pi * l_for_tokens).sum(1)
    btok = (pi * b).sum(1)
    if mistake == "kappa-from-token-nll":
        kappa = torch.where(lbar > 0, ltok / lbar, 1.0)
    elif mistake == "kappa-with-epsilon":
        kappa = torch.where(bbar > 0, btok / (bbar + eps), 1.0)
    else:
        kappa = torch.where(bbar > 0, btok / bbar, 1.0)

    def batch_mean(x: Tensor, *, count: Tensor = kept_count) -> Tensor:
        return torch.where(kept, x, 0.0).sum() / count

    raw = l.sum() / n.sum() if mistake == "global-token-mean" else batch_mean(lbar)
    dist = raw / c
    if mistake == "epsilon-as-floor":
        ex = batch_mean(lbar / torch.maximum(bbar, torch.tensor(eps, dtype=dtype)))
    else:
        ex = batch_mean(lbar / torch.where(kept, bbar + eps, 1.0))
    tok = batch_mean(ltok)
    if mistake == "kappa-ratio-of-means":
        kappa_batch = batch_mean(btok) / batch_mean(bbar)
        cc = batch_mean(ltok) / kappa_batch / c
        kappa = torch.where(kept, kappa_batch, 1.0)
    else:
        cc = batch_mean(ltok / kappa) / (1.0 if mistake == "cc-scale-missing" else c)
    terms = {RAW.name: raw, DIST.name: dist, EX.name: ex, TOK.name: tok, CC.name: cc}
    diagnostics_count = all_rows if mistake == "diagnostics-empty-rows-counted" else kept_count
    left_out = CC.name if mistake == "total-missing-cc" else None
    total = sum(
        getattr(config, term.weight_field) * terms[term.name]
        for term in TERMS
        if term.name != left_out
    )
    if mistake == "terms-detached":
        terms = {name: value.detach() for name, value in terms.items()}
    extra = {"token_weight_alpha": torch.tensor(alpha)} if mistake == "alpha-in-result" else {}
    return {
        **extra,
        **terms,
        BTOK.name: batch_mean(btok, count=diagnostics_count),
        KAPPA.name: batch_mean(kappa, count=diagnostics_count),
        TOTAL.name: total,
    }


#: mistake -> the smallest input that shows it (``properties.zoo.smallest``)
SMALLEST: dict[str, Smallest] = {
    "global-token-mean": Smallest(
        "oracle-agreement",
        loss_case(
            [[1.0, 2.0], [3.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]], [[True, True], [True, False]]
        ),
        TWO_ROWS,
    ),
    "padding-counted": Smallest(
        "oracle-agreement", loss_case([[1.0, 1.0]], [[0.0, 0.0]], [[True, False]]), PADDED
    ),
    "empty-rows-counted": Smallest(
        "oracle-agreement", loss_case([[1.0], [1.0]], [[0.0], [0.0]], [[True], [False]]), EMPTY_ROW
    ),
    "mask-multiplication": Smallest(
        "oracle-agreement",
        loss_case([[1.0, NAN]], [[0.0, NAN]], [[True, False]]),
        "it needs a NaN at a padded position beside a valid one",
    ),
    "zfree-not-detached": Smallest("stop-gradient", ONE_CELL, ANY_INPUT),
    "alpha-ignored": Smallest(
        "oracle-agreement",
        loss_case([[1.0, 2.0]], [[0.0, 0.5]], [[True, True]], token_weight_alpha=0.0),
        TWO_TOKENS,
    ),
    "exp-log-shares": Smallest("oracle-agreement", ONE_CELL, ANY_INPUT),
    "no-max-subtraction": Smallest("oracle-agreement", ONE_CELL, ANY_INPUT),
    "no-zero-row-fallback": Smallest("oracle-agreement", ONE_CELL, ANY_INPUT),
    "kappa-from-token-nll": Smallest(
        "oracle-agreement", loss_case([[1.0, 2.0]], [[0.0, 0.5]], [[True, True]]), TWO_TOKENS
    ),
    "epsilon-as-floor": Smallest(
        "oracle-agreement", loss_case([[1.0]], [[0.5]], [[True]]), ANY_INPUT
    ),
    "cc-scale-missing": Smallest(
        "oracle-agreement",
        loss_case([[1.0]], [[0.0]], [[True]], zfree_reference_scale=2.0),
        ANY_INPUT,
    ),
    "shares-over-padding": Smallest(
        "oracle-agreement", loss_case([[1.0, 1.0]], [[0.0, 0.0]], [[True, False]]), PADDED
    ),
    "total-missing-cc": Smallest("oracle-agreement", ONE_CELL, ANY_INPUT),
    "low-precision-compute": Smallest(
        "oracle-agreement-low-precision",
        loss_case([[1.0]], [[0.0]], [[True]], torch.bfloat16),
        ANY_INPUT,
    ),
    "mutates-input": Smallest(
        "inputs-unmodified", loss_case([[1.0, 1.0]], [[0.0, 0.0]], [[True, False]]), PADDED
    ),
    "float64-outputs": Smallest(
        "outputs-contract", loss_case([[1.0]], [[0.0]], [[True]], torch.float32), ANY_INPUT
    ),
    "diagnostics-empty-rows-counted": Smallest(
        "oracle-agreement", loss_case([[1.0], [1.0]], [[0.0], [0.0]], [[True], [False]]), EMPTY_ROW
    ),
    "batch-normalized-shares": Smallest(
        "oracle-agreement",
        loss_case([[1.0], [2.0]], [[0.0], [0.0]], [[True], [True]]),
        "shares normalised over one example are its own: two examples",
    ),
    "token-term-detached": Smallest("gradient-closed-form", ONE_CELL, ANY_INPUT),
    "unnormalized-shares": Smallest(
        "oracle-agreement", loss_case([[1.0, 2.0]], [[0.0, 0.0]], [[True, True]]), TWO_TOKENS
    ),
    "kappa-ratio-of-means": Smallest(
        "oracle-agreement", ONE_CELL, "a row whose b are all 0 makes its ratio of means 0/0"
    ),
    "shares-from-token-nll": Smallest(
        "oracle-agreement", loss_case([[1.0, 2.0]], [[0.0, 0.0]], [[True, True]]), TWO_TOKENS
    ),
    "nondeterministic-order": Smallest(
        "deterministic",
        loss_case([[0.1, 0.2, 0.3]], [[0.0, 0.0, 0.0]], [[True, True, True]]),
        "a sum of two numbers is the same in either order: three tokens",
    ),
    "lengths-from-first-row": Smallest(
        "oracle-agreement",
        loss_case(
            [[1.0, 2.0], [3.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]], [[True, True], [True, False]]
        ),
        "two kept examples of different lengths, one of two tokens",
    ),
    "right-padding-assumed": Smallest(
        "oracle-agreement",
        loss_case([[1.0, 2.0]], [[0.0, 0.0]], [[False, True]]),
        "it needs a padded position before a valid one",
    ),
    "kappa-with-epsilon": Smallest(
        "oracle-agreement", loss_case([[1.0]], [[0.5]], [[True]]), ANY_INPUT
    ),
    "alpha-in-result": Smallest("outputs-contract", ONE_CELL, ANY_INPUT),
    "terms-detached": Smallest("output-gradients", ONE_CELL, ANY_INPUT),
    "zfree-cached-by-shape": Smallest(
        "oracle-agreement", ONE_CELL, ANY_INPUT, after=(loss_case([[1.0]], [[2.0]], [[True]]),)
    ),
    "zfree-running-buffer": Smallest(
        "inputs-unmodified", loss_case([[1.0]], [[1.0]], [[True]]), ANY_INPUT
    ),
    "contiguous-assumed": Smallest(
        "oracle-agreement", replace(ONE_CELL, layouts=("offset",) * 3), ANY_INPUT
    ),
    "writes-noncontiguous-input": Smallest(
        "inputs-unmodified",
        replace(loss_case([[1.0, 1.0]], [[0.0, 0.0]], [[True, False]]), layouts=("strided",) * 3),
        PADDED,
    ),
    "lazy-first-call": Smallest(
        "first-call",
        EDGE_CASES["plain"].case,
        "first-call checks the plain input every worker starts with, as it is: not shrunk",
    ),
}


def _row(length: int, **fields) -> ScaleCase:
    """One row of ``length`` positions, every term weighted (``properties.zoo.smallest``)."""
    return ScaleCase(1, length, config=ReconstructionLossConfig(**WEIGHTS), **fields)


#: why no smaller size shows a tile's mistake: below TILE + 1 positions no tile is partial
#: and a row is one tile
PAST_A_TILE = f"a row of one tile ({TILE} positions) has no tail and one tile: {TILE + 1}"
SMALLEST.update(
    {
        "tail-tile-dropped": Smallest(
            "oracle-agreement-at-scale",
            _row(TILE + 1, zfree_token_nll=Values(1.0, spikes=((0, TILE, 2.0),))),
            PAST_A_TILE,
        ),
        "shares-per-tile": Smallest(
            "oracle-agreement-at-scale",
            _row(TILE + 1, zfree_token_nll=Values(1.0, spikes=((0, TILE, 2.0),))),
            PAST_A_TILE,
        ),
        "running-max-restarts": Smallest(
            "oracle-agreement-at-scale",
            _row(TILE + 1, zfree_token_nll=Values(1.0, spikes=((0, 0, 2.0),))),
            PAST_A_TILE,
        ),
        "half-precision-counts": Smallest(
            "oracle-agreement-at-scale",
            _row(257, dtype=torch.bfloat16),
            "bfloat16 holds every whole number to 256",
        ),
        "int16-counts": Smallest(
            "oracle-agreement-at-scale",
            _row(32768),
            "an int16 holds every count to 32767",
        ),
        "fast-path-counts-dropped-rows": Smallest(
            "size-thresholds",
            AcrossThreshold(replace(_row(1), batch=128), 129, 1),
            "the fast path starts past 128 rows, and the dropped row is one more",
        ),
        "fast-path-counts-padding": Smallest(
            "oracle-agreement-at-scale",
            _row(2**16, spans=(RowSpan(0, 1),)),
            "the fast path starts at 2^16 positions (one valid, the rest padding)",
        ),
        "backward-drops-tail-tile": Smallest(
            "output-gradients-at-scale", _row(TILE + 1), PAST_A_TILE
        ),
    }
)
