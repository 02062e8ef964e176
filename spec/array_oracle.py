r"""The oracle at training sizes: the definitions of ``spec.definitions`` evaluated on float64
arrays, every example of a batch at once.

``spec.oracle`` evaluates each kept example through an mpmath function built for its
length: exact to the last bit, and a few milliseconds for ``B, T <= 8``, but far too slow
for a ``[256, 4096]`` batch. This module evaluates the *same* formulas (the statistics of
``spec.statistics``, the contributions of ``spec.terms``, ``spec.definitions.loss_terms``,
``token_gradient`` and ``term_gradient``) with numpy arrays in place of sympy symbols:
``Tokens.total`` becomes a masked sum along a row, ``Batch.mean`` a sum over the kept
examples. Nothing is written twice; only the share is taken through one exact rewrite,

.. math::

    \pi_{it} = \frac{b_{it}^\alpha}{\sum_s b_{is}^\alpha}
             = \frac{(b_{it}/m_i)^\alpha}{\sum_s (b_{is}/m_i)^\alpha}, \qquad
             m_i = \max_{s} b_{is},

so that ``b^alpha`` never overflows float64 (``alpha`` up to 1000, ``b`` up to ``1e4``).

Error bound (``relative_error_bound``): every output, statistic and gradient entry is
within ``u64 * (ORACLE_BASE + ORACLE_PER_LEVEL * ceil(log2 T) + alpha)`` of the exact value,
relative to the same quantity built from ``|l|`` (``OracleResult.magnitudes``). Each
rounding of ``b/m`` is raised to the ``alpha``-th power (relative error ``alpha u``); numpy's
pairwise summation of ``T`` terms loses ``u ceil(log2 T)`` of the sum of magnitudes; the
rest is a bounded number of products and quotients per value. ``tests/spec/
test_array_oracle.py`` checks it against ``spec.oracle`` (50 digits) on every input the
strategies draw. Below float64's smallest normal number the error is absolute instead:
``(b/m)^alpha`` can underflow, losing a share below ``2.2e-308``, far below any tolerance an
implementation is held to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import sympy as sp

from spec.definitions import (
    TERMS,
    Batch,
    Example,
    ExampleSummary,
    Extreme,
    Parameters,
    Token,
    Tokens,
    loss_terms,
    share,
    term_gradient,
    token_gradient,
)
from spec.oracle import (
    CONFIG_ARGUMENTS,
    TOKEN_GRADIENT,
    OracleResult,
    config_arguments,
    read_config,
)
from spec.parameters import EPSILON, PARAMETERS
from spec.statistics import STATISTIC_NAMES, STATISTICS
from spec.terms import LOSS_NAMES

#: the unit roundoff of float64
U64 = 2.0**-53
#: the constant part of the bound, and what each level of pairwise summation adds
ORACLE_BASE = 64.0
ORACLE_PER_LEVEL = 4.0


def relative_error_bound(length: int, alpha: float) -> float:
    """The most the array oracle's value of anything is off, relative to its magnitude
    (the module docstring): ``u64 (ORACLE_BASE + ORACLE_PER_LEVEL ceil(log2 T) + alpha)``."""
    levels = math.ceil(math.log2(max(length, 2)))
    return U64 * (ORACLE_BASE + ORACLE_PER_LEVEL * levels + alpha)


@dataclass(frozen=True)
class ArrayTokens(Tokens):
    """The valid tokens of several examples at once: ``[E, T]`` arrays, one row per example.

    ``loss`` and ``base`` hold 0 at padded positions (never read: every total and extreme
    takes only the valid ones). Per-example quantities are ``[E, 1]`` arrays, so that they
    broadcast against the tokens as the formulas combine them."""

    loss: np.ndarray
    base: np.ndarray
    valid: np.ndarray

    @property
    def count(self) -> np.ndarray:
        return self.valid.sum(axis=1, keepdims=True).astype(np.float64)

    def _each(self, f: Callable[[Token], Any]) -> np.ndarray:
        with np.errstate(all="ignore"):  # padded positions may give inf or NaN; dropped below
            return np.broadcast_to(np.asarray(f(Token(self.loss, self.base, 0))), self.loss.shape)

    def total(self, f: Callable[[Token], Any], *, index: Any = None) -> np.ndarray:
        # numpy sums along the contiguous last axis pairwise: log2(T) roundings deep
        return np.where(self.valid, self._each(f), 0.0).sum(axis=1, keepdims=True)

    def extreme(self, f: Callable[[Token], Any], kind: Extreme, *, index: Any = None) -> np.ndarray:
        fill, pick = (-np.inf, np.max) if kind == "max" else (np.inf, np.min)
        return pick(np.where(self.valid, self._each(f), fill), axis=1, keepdims=True)


@dataclass(frozen=True)
class ArrayExample(Example):
    """The examples of ``ArrayTokens`` as one ``Example``: each statistic of
    ``spec.statistics`` is its formula, evaluated on every row at once."""

    def share(self, token: Token) -> np.ndarray:
        """``pi_it`` through ``b/m_i`` (the module docstring), by ``spec.definitions.share``."""
        if self.zero_base:
            return share(token.base, self.tokens, self.alpha, zero_base=True)
        top = self.tokens.extreme(lambda tok: tok.base, "max")
        scaled = ArrayTokens(self.tokens.loss, self.tokens.base / top, self.tokens.valid)
        return share(token.base / top, scaled, self.alpha)


@dataclass(frozen=True)
class ArrayBatch(Batch):
    """The kept examples as one ``ExampleSummary`` of ``[E, 1]`` arrays: ``mean`` sums over
    them with ``math.fsum`` (exact, rounded once)."""

    examples: Any  # ExampleSummary

    @property
    def count(self) -> int:
        return len(getattr(self.examples, STATISTIC_NAMES[0]))

    def mean(self, f: Callable[[Any], Any]) -> float:
        with np.errstate(all="ignore"):
            values = np.broadcast_to(
                np.asarray(f(self.examples), dtype=np.float64), (self.count, 1)
            )
        return math.fsum(values.ravel()) / self.count


# ---------------------------------------------------------------------------------------
# Inputs


def _as_array(value: Any, name: str) -> np.ndarray:
    """``value`` as a 2-D float64 numpy array (a torch tensor exactly, through float64)."""
    if hasattr(value, "detach"):  # a torch tensor: every floating dtype converts exactly
        if value.dim() != 2:
            raise ValueError(f"{name} must be 2-D [B, T], got shape {tuple(value.shape)}")
        if not value.is_floating_point():
            raise ValueError(f"{name} must have a floating dtype, got {value.dtype}")
        return value.detach().to(device="cpu").double().numpy()
    array = np.asarray(value)
    if array.ndim != 2 or array.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a 2-D [B, T] array of real numbers")
    return array.astype(np.float64)


def _mask_array(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        if value.is_floating_point() or value.is_complex():
            raise ValueError(f"mask must be bool or an integer 0/1 tensor, got dtype {value.dtype}")
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.ndim != 2 or array.dtype.kind not in "biu":
        raise ValueError("mask must be a 2-D [B, T] bool or integer 0/1 array")
    if array.dtype.kind != "b" and ((array != 0) & (array != 1)).any():
        raise ValueError("mask must hold only 0 and 1 when it is an integer array")
    return array != 0


def _first(where: np.ndarray) -> tuple[int, int]:
    r, col = np.argwhere(where)[0]
    return int(r), int(col)


def _checked(
    token_nll: Any, zfree_token_nll: Any, mask: Any, epsilon: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The inputs as arrays, checked by the rules of MATH.md, "Errors" (``spec.oracle``'s
    messages)."""
    loss = _as_array(token_nll, "token_nll")
    base = _as_array(zfree_token_nll, "zfree_token_nll")
    valid = _mask_array(mask)
    if not loss.shape == base.shape == valid.shape:
        raise ValueError(
            "token_nll, zfree_token_nll and mask must have the same shape, got "
            f"{loss.shape}, {base.shape} and {valid.shape}"
        )
    for name, values in (("token_nll", loss), ("zfree_token_nll", base)):
        bad = valid & ~np.isfinite(values)
        if bad.any():
            r, col = _first(bad)
            raise ValueError(
                f"{name} must be finite at every position where mask is True; "
                f"found {values[r, col]} at [{r}, {col}]"
            )
    negative = valid & (base < 0)
    if negative.any():
        r, col = _first(negative)
        raise ValueError(
            "zfree_token_nll must be >= 0 at every position where mask is True; "
            f"found {base[r, col]} at [{r}, {col}]"
        )
    if not valid.any():
        raise ValueError("mask must select at least one valid token in the batch; it selects none")
    kept = valid.any(axis=1)
    zero_base = kept & ~(valid & (base != 0)).any(axis=1)
    if epsilon == 0 and zero_base.any():
        raise ValueError(
            f"{EPSILON.field} = 0 needs bbar_i > 0 for every kept example; example "
            f"{int(np.argmax(zero_base))} has zfree_token_nll = 0 at all of its valid positions"
        )
    return np.where(valid, loss, 0.0), np.where(valid, base, 0.0), valid


# ---------------------------------------------------------------------------------------
# Evaluation


def _parameters(cfg: dict[str, float]) -> Any:
    """``Parameters`` holding the config's numbers (floats, not sympy numbers)."""
    return Parameters(
        **{p.name: cfg[p.field] for p in PARAMETERS},
        term_weights=tuple((term.name, cfg[term.weight_field]) for term in TERMS),
    )


def _statistics(
    loss: np.ndarray, base: np.ndarray, valid: np.ndarray, alpha: float
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each statistic and the shares of the kept rows ``[E, T]`` of ``loss``, ``base``,
    ``valid``, evaluated by their formulas: the rows whose valid b are all 0 apart (their
    shares are uniform and kappa is 1, MATH.md)."""
    kept = valid.shape[0]
    zero_base = ~(valid & (base != 0)).any(axis=1)
    statistics = {name: np.empty((kept, 1)) for name in STATISTIC_NAMES}
    shares = np.zeros(loss.shape)
    for flag in (False, True):
        rows = np.flatnonzero(zero_base == flag)
        if rows.size == 0:
            continue
        tokens = ArrayTokens(loss[rows], base[rows], valid[rows])
        example = ArrayExample(tokens, alpha, zero_base=flag)
        with np.errstate(all="ignore"):
            for name in STATISTIC_NAMES:
                value = np.asarray(getattr(example, name), dtype=np.float64)
                statistics[name][rows] = np.broadcast_to(value, (rows.size, 1))
            token = Token(tokens.loss, tokens.base, 0)
            shares[rows] = np.where(tokens.valid, example.share(token), 0.0)
    return statistics, shares


def _outputs(
    loss: np.ndarray, base: np.ndarray, valid: np.ndarray, params: Any
) -> tuple[dict[str, float], Any, np.ndarray]:
    """The outputs of the kept rows, their statistics (an ``ExampleSummary`` of ``[E, 1]``
    arrays) and their shares."""
    statistics, shares = _statistics(loss, base, valid, params.alpha)
    summary = ExampleSummary(**statistics)
    values = loss_terms(ArrayBatch(summary), params)
    return {name: float(values[name]) for name in LOSS_NAMES}, summary, shares


@dataclass(frozen=True)
class _SymbolicExample:
    """An example seen through its statistics, its count and one share, all symbols: what
    the closed forms of the gradients read (``ExampleLike``, ``count``, ``share``)."""

    summary: Any
    count: sp.Symbol
    one_share: sp.Symbol

    def __getattr__(self, name: str) -> sp.Expr:
        return getattr(self.summary, name)

    def share(self, token: object) -> sp.Symbol:
        return self.one_share


_SHARE = sp.Symbol("share", nonnegative=True)
_COUNT = sp.Symbol("token_count", positive=True)
_KEPT = sp.Symbol("kept_count", positive=True)
_SUMMARY = ExampleSummary.symbols("i")


@cache
def gradient_functions() -> dict[str, Callable[..., np.ndarray]]:
    """``dJ/dl_it`` (by ``TOKEN_GRADIENT``) and each term's ``dR_k/dl_it`` (by its name),
    the closed forms of ``spec.definitions`` lambdified for numpy: ``f(*statistics, share,
    n_i, B', *config_arguments(config))``, the statistics in ``STATISTIC_NAMES`` order."""
    example = _SymbolicExample(_SUMMARY, _COUNT, _SHARE)
    formulas = {
        TOKEN_GRADIENT: token_gradient(example, None, _KEPT),
        **{term.name: term_gradient(term, example, None, _KEPT) for term in TERMS},
    }
    arguments = [
        *(getattr(_SUMMARY, name) for name in STATISTIC_NAMES),
        _SHARE,
        _COUNT,
        _KEPT,
        *(symbol for symbol, _ in CONFIG_ARGUMENTS),
    ]
    return {
        name: sp.lambdify(arguments, formula, modules="numpy") for name, formula in formulas.items()
    }


def _gradients(
    summary: Any, shares: np.ndarray, valid: np.ndarray, cfg: dict[str, float]
) -> dict[str, np.ndarray]:
    """Each closed form at every valid token of the kept rows (0 at padded positions)."""
    arguments = (
        *(getattr(summary, name) for name in STATISTIC_NAMES),
        shares,
        valid.sum(axis=1, keepdims=True).astype(np.float64),
        float(valid.shape[0]),
        *config_arguments(cfg),
    )
    with np.errstate(all="ignore"):
        return {
            name: np.where(valid, np.broadcast_to(function(*arguments), valid.shape), 0.0)
            for name, function in gradient_functions().items()
        }


def evaluate_arrays(token_nll: Any, zfree_token_nll: Any, mask: Any, config: Any) -> OracleResult:
    """``spec.oracle.evaluate_details`` at training sizes: the same ``OracleResult`` (the
    outputs, statistics, shares, dJ/dl and each term's dR_k/dl), in float64 within
    ``relative_error_bound`` of the exact values (relative to ``output_magnitudes``), and
    the same errors.

    Example:
        >>> import spec
        >>> config = spec.config_mapping(raw_weight=1.0, token_weighted_weight=1.0)
        >>> result = evaluate_arrays([[2.0, 4.0, 0.0]], [[1.0, 3.0, float("nan")]],
        ...                          [[True, True, False]], config)
        >>> result.values["reconstruction_loss"], result.values["total_reconstruction_loss"]
        (3.0, 6.5)
    """
    cfg = read_config(config)
    params = _parameters(cfg)
    loss, base, valid = _checked(token_nll, zfree_token_nll, mask, cfg[EPSILON.field])
    rows = np.flatnonzero(valid.any(axis=1))
    values, summary, shares = _outputs(loss[rows], base[rows], valid[rows], params)
    gradients = _gradients(summary, shares, valid[rows], cfg)

    def scatter(kept_rows: np.ndarray, dropped: float | bool = 0.0) -> np.ndarray:
        """Per kept row, to per row of the batch (``dropped`` for a dropped row)."""
        full = np.full((valid.shape[0], *kept_rows.shape[1:]), dropped)
        full[rows] = kept_rows
        full.setflags(write=False)
        return full

    return OracleResult(
        values=values,
        token_gradient=scatter(gradients[TOKEN_GRADIENT]),
        term_gradients={term.name: scatter(gradients[term.name]) for term in TERMS},
        shares=scatter(shares),
        **{s.name: scatter(getattr(summary, s.name)[:, 0], s.dropped_row) for s in STATISTICS},
        kept=scatter(np.ones(rows.size, dtype=bool), False),
        kept_count=int(rows.size),
    )


def output_magnitudes(
    token_nll: Any, zfree_token_nll: Any, mask: Any, config: Any
) -> dict[str, float]:
    """Each output evaluated with ``|l|`` in place of ``l``: the magnitude its rounding (the
    oracle's, ``relative_error_bound``, and an implementation's) is relative to."""
    cfg = read_config(config)
    loss, base, valid = _checked(token_nll, zfree_token_nll, mask, cfg[EPSILON.field])
    rows = np.flatnonzero(valid.any(axis=1))
    return _outputs(np.abs(loss[rows]), base[rows], valid[rows], _parameters(cfg))[0]
