"""The oracle: the outputs of MATH.md evaluated from the sympy expressions.

``evaluate`` and ``evaluate_details`` compute every number from the expressions of
``spec.definitions``, lambdified with ``modules="mpmath"`` and evaluated at high
precision (50 significant digits by default), then rounded once to float64. So the
result is the float64 nearest to the exact value of the definitions for the given
inputs — also where float64 itself would overflow (``b^alpha`` with ``alpha = 1000``).

Two lambdified functions are built, each cached by its size, so that an evaluation on
``B, T <= 8`` costs a few milliseconds:

* per kept example, keyed by ``(n, zero_base, details)``: from ``l_1 .. l_n``,
  ``b_1 .. b_n`` and the config to the statistics of ``spec.statistics`` and, with
  ``details``, the shares ``pi_1 .. pi_n`` and the closed forms of ``dJ/dl_t`` and of each
  term's ``dR_k/dl_t``. ``zero_base`` is the row whose valid ``b`` are all 0 (uniform
  shares, ``kappa = 1``; MATH.md);
* per batch, keyed by the number ``B'`` of kept examples: from the per-example quantities
  and the config to the outputs.

The lambdified code is the expressions' own, rewritten only exactly: common
subexpressions are shared (``cse``), ``factor_terms`` takes common factors out of sums, and
sums are evaluated with ``mpmath.fsum``/``fdot`` (exact, rounded once).

Inputs may be torch tensors (any floating dtype; converted exactly to float64, never
through float32), numpy arrays or nested lists. Values at padded positions are never
read beyond the copy, so NaN and inf there change nothing.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, make_dataclass
from functools import cache
from typing import Any

import mpmath
import numpy as np
import sympy as sp
from mpmath.libmp import from_float, from_int
from sympy.printing.pycode import MpmathPrinter

from spec.definitions import (
    CONFIG_FIELDS,
    LOSS_NAMES,
    SYMBOLIC,
    TERMS,
    Example,
    ExampleSummary,
    ExplicitBatch,
    ExplicitTokens,
    loss_terms,
    term_gradient,
    token_gradient,
)
from spec.parameters import EPSILON, PARAMETERS, WEIGHT_RULE, check_value
from spec.statistics import STATISTIC_NAMES, STATISTICS

#: Significant decimal digits of the mpmath evaluation.
DEFAULT_PRECISION = 50

#: the config values the lambdified functions take, each with its config field: the
#: parameters of the registry, then the weights of the terms
CONFIG_ARGUMENTS: tuple[tuple[sp.Symbol, str], ...] = tuple(
    (symbol, CONFIG_FIELDS[str(symbol)])
    for symbol in (
        *(getattr(SYMBOLIC, parameter.name) for parameter in PARAMETERS),
        *SYMBOLIC.weights().values(),
    )
)
#: the rule of each config field (the term weights', then the parameters')
_RULES: dict[str, str] = {
    **{term.weight_field: WEIGHT_RULE for term in TERMS},  # type: ignore[misc]
    **{parameter.field: parameter.rule for parameter in PARAMETERS},
}
#: the per-example statistics the batch function reads (``ExampleSummary``'s fields)
SUMMARY_NAMES: tuple[str, ...] = STATISTIC_NAMES
# The counts n and B' enter the lambdified functions as arguments (see
# ExplicitTokens.count_symbol).
_KEPT = sp.Symbol("kept_count", positive=True)
_COUNT = sp.Symbol("token_count", positive=True)
_SHARE = sp.Symbol("share", nonnegative=True)
#: the names of example_function's per-token outputs beside each term's gradient
SHARES = "shares"
TOKEN_GRADIENT = "token_gradient"


@dataclass(frozen=True)
class _ShareAs:
    """``example`` with every share replaced by one symbol (for ``token_gradient``); every
    other per-example quantity (n_i, bbar_i, kappa_i, ...) is the example's own."""

    example: Example
    symbol: sp.Symbol

    def __getattr__(self, name: str) -> sp.Expr:
        return getattr(self.example, name)

    def share(self, token: object) -> sp.Expr:
        return self.symbol


# One array per statistic of the registry, beside what every batch has.
OracleResult = make_dataclass(
    "OracleResult",
    [
        ("values", dict[str, float]),
        ("token_gradient", np.ndarray),
        ("term_gradients", dict[str, np.ndarray]),
        ("shares", np.ndarray),
        *((statistic.name, np.ndarray) for statistic in STATISTICS),
        ("kept", np.ndarray),
        ("kept_count", int),
    ],
    frozen=True,
    eq=False,
)
OracleResult.__module__ = __name__
OracleResult.__doc__ = """Everything the oracle computes for one batch.

``values`` holds the outputs by name; ``shares``, ``token_gradient`` (dJ/dl) and
``term_gradients`` (dR_k/dl of each term, by name) are 0.0 at padded positions and in
dropped rows. Each statistic of ``spec.statistics`` has its per-example array by its name
(``result.lbar``, ..., ``result.kappa``), holding the statistic's ``dropped_row`` value (0.0,
or 1.0 for ``kappa``) for a dropped (empty) row. All arrays are read-only float64 (``kept``
is bool)."""


# ---------------------------------------------------------------------------------------
# The lambdified expressions


class _FsumPrinter(MpmathPrinter):
    """``MpmathPrinter`` that writes a sum of three or more terms with ``mpmath.fsum``.

    A sum of products of two factors, ``sum_t pi_t l_t``, becomes ``mpmath.fdot``, any
    other sum ``mpmath.fsum``. Both add exactly and round once, so they are at least as
    accurate as a chain of ``+`` and ``*``, and several times faster: the oracle spends
    most of its time in these sums.
    """

    def _print_Add(self, expr: sp.Add, order: str | None = None) -> str:
        terms = expr.args
        if len(terms) < 3:
            return super()._print_Add(expr, order)
        if all(isinstance(term, sp.Mul) and len(term.args) == 2 for term in terms):
            pairs = (f"({self._print(t.args[0])}, {self._print(t.args[1])})" for t in terms)
            return "fdot((" + ", ".join(pairs) + "))"
        return "fsum((" + ", ".join(self._print(term) for term in terms) + "))"


def config_arguments(config: Mapping[str, Any]) -> list[Any]:
    """The values of ``CONFIG_ARGUMENTS`` in ``config`` (by field), as the lambdified
    functions take them."""
    return [config[field] for _, field in CONFIG_ARGUMENTS]


class Lambdified:
    """Lambdified outputs, returned by name: ``f(*arguments)[name]`` is one value, or a
    tuple of them where the output was given as a tuple of expressions."""

    def __init__(
        self, arguments: list[sp.Symbol], outputs: dict[str, sp.Expr | tuple[sp.Expr, ...]]
    ) -> None:
        self._parts = {
            name: len(value) if isinstance(value, tuple) else None
            for name, value in outputs.items()
        }
        flat = tuple(
            x
            for value in outputs.values()
            for x in (value if isinstance(value, tuple) else (value,))
        )
        printer = _FsumPrinter({"fully_qualified_modules": False, "inline": True})
        self._function = sp.lambdify(arguments, flat, modules="mpmath", printer=printer, cse=True)

    def __call__(self, *arguments: Any) -> dict[str, Any]:
        flat = iter(self._function(*arguments))
        return {
            name: next(flat) if size is None else tuple(next(flat) for _ in range(size))
            for name, size in self._parts.items()
        }


@cache
def example_function(n: int, zero_base: bool, details: bool = True) -> Lambdified:
    """``f(l_1..l_n, b_1..b_n, *config_arguments(config), B', n)`` for one kept example.

    Returns each per-example statistic (``SUMMARY_NAMES``) by name, and with
    ``details`` also ``shares`` (``pi_1..pi_n``), ``token_gradient`` (the closed form of
    ``dJ/dl_1..dJ/dl_n``) and, by each term's name, the closed form of its
    ``dR_k/dl_1..dR_k/dl_n``; lambdified from ``spec.definitions`` with ``modules="mpmath"``.
    """
    plain = ExplicitTokens.symbols(n)
    tokens = ExplicitTokens(plain.loss, plain.base, count_symbol=_COUNT)
    example = Example(tokens, SYMBOLIC.alpha, zero_base=zero_base)
    # factor_terms is exact; it takes 1/sum_s b_s^alpha out of sum_t pi_t l_t, which spares
    # a multiplication per token.
    outputs: dict[str, sp.Expr | tuple[sp.Expr, ...]] = {
        name: sp.factor_terms(getattr(example, name)) for name in SUMMARY_NAMES
    }
    if details:
        shares = example.shares
        # dJ/dl_t is affine in pi_t: A + C pi_t with A, C the same for every token. Taking
        # A and C apart once (exactly) spares a multiplication per token.
        one_share = _ShareAs(example, _SHARE)
        gradients = {
            TOKEN_GRADIENT: token_gradient(one_share, None, _KEPT),
            **{term.name: term_gradient(term, one_share, None, _KEPT) for term in TERMS},
        }
        outputs[SHARES] = shares
        for name, gradient in gradients.items():
            offset, slope = gradient.subs(_SHARE, 0), sp.diff(gradient, _SHARE)
            outputs[name] = tuple(offset + slope * share for share in shares)
    arguments = [*tokens.loss, *tokens.base, *(s for s, _ in CONFIG_ARGUMENTS), _KEPT, _COUNT]
    return Lambdified(arguments, outputs)


@cache
def batch_function(kept: int) -> Lambdified:
    """``g(lbar_1, ..., kappa_1, lbar_2, ..., *config_arguments(config), B')``: the statistics
    of each kept example in turn (``SUMMARY_NAMES``), then the config and ``B'``.

    Returns the outputs by name, in MATH.md order, lambdified from ``loss_terms``.
    """
    summaries = tuple(ExampleSummary.symbols(k) for k in range(1, kept + 1))
    terms = loss_terms(ExplicitBatch(summaries, count_symbol=_KEPT), SYMBOLIC)
    arguments = [getattr(summary, name) for summary in summaries for name in SUMMARY_NAMES]
    arguments += [*(s for s, _ in CONFIG_ARGUMENTS), _KEPT]
    return Lambdified(arguments, {name: terms[name] for name in LOSS_NAMES})


# ---------------------------------------------------------------------------------------
# Inputs


def _torch_module() -> Any:
    # torch is only looked at when it is already imported: a torch tensor cannot exist
    # otherwise, and the oracle must not pay for importing it.
    return sys.modules.get("torch")


def _is_tensor(value: Any) -> bool:
    torch = _torch_module()
    return torch is not None and isinstance(value, torch.Tensor)


def _losses_as_lists(value: Any, name: str) -> list[list[float | int]]:
    """A 2-D array of real numbers as nested lists of exact Python numbers."""
    if _is_tensor(value):
        torch = _torch_module()
        if value.dim() != 2:
            raise ValueError(
                f"{name} must be 2-D [B, T], got {value.dim()}-D with shape {tuple(value.shape)}"
            )
        if not value.is_floating_point():
            raise ValueError(f"{name} must have a floating dtype, got {value.dtype}")
        # Every floating dtype torch has converts to float64 exactly.
        return value.detach().to(device="cpu", dtype=torch.float64).tolist()
    array = _as_2d_array(value, name)
    if isinstance(value, np.ndarray) and array.dtype.kind != "f":
        raise ValueError(f"{name} must have a floating dtype, got {array.dtype}")
    if array.dtype.kind == "f":
        return array.astype(np.float64).tolist()
    if array.dtype.kind in "iu":
        return array.tolist()  # Python ints: exact
    raise ValueError(f"{name} must hold real numbers, got dtype {array.dtype}")


def _as_2d_array(value: Any, name: str) -> np.ndarray:
    try:
        array = np.asarray(value)
    except ValueError as error:  # ragged nested lists
        raise ValueError(f"{name} must be a 2-D [B, T] array: {error}") from None
    if array.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D [B, T], got {array.ndim}-D with shape {tuple(array.shape)}"
        )
    return array


def _mask_as_lists(value: Any) -> list[list[bool]]:
    """The mask as nested lists of bool; integer masks must hold only 0 and 1."""
    if _is_tensor(value):
        if value.dim() != 2:
            raise ValueError(
                f"mask must be 2-D [B, T], got {value.dim()}-D with shape {tuple(value.shape)}"
            )
        if value.is_floating_point() or value.is_complex():
            raise ValueError(f"mask must be bool or an integer 0/1 tensor, got dtype {value.dtype}")
        array = value.detach().cpu().numpy()
    else:
        array = _as_2d_array(value, "mask")
    if array.dtype.kind == "b":
        return array.tolist()
    if array.dtype.kind not in "iu":
        raise ValueError(f"mask must be bool or integer 0/1, got dtype {array.dtype}")
    bad = (array != 0) & (array != 1)
    if bad.any():
        raise ValueError(
            f"mask must hold only 0 and 1 when it is an integer array, found {array[bad][0]}"
        )
    return (array != 0).tolist()


def _shape(rows: list[list[Any]]) -> tuple[int, int]:
    return (len(rows), len(rows[0]) if rows else 0)


def _check_devices(token_nll: Any, zfree_token_nll: Any, mask: Any) -> None:
    devices = {str(x.device) for x in (token_nll, zfree_token_nll, mask) if _is_tensor(x)}
    if len(devices) > 1:
        raise ValueError(
            "token_nll, zfree_token_nll and mask must be on the same device, got "
            + ", ".join(sorted(devices))
        )


def read_config(config: Any) -> dict[str, float]:
    """The eight config values by field name, checked as ``ReconstructionLossConfig`` does.

    ``config`` is any object with the fields as attributes, or a mapping with them as keys.
    """
    values: dict[str, float] = {}
    for field in _RULES:
        if isinstance(config, Mapping):
            if field not in config:
                raise ValueError(f"config must have the key {field!r}")
            raw = config[field]
        else:
            if not hasattr(config, field):
                raise ValueError(f"config must have the attribute {field!r}")
            raw = getattr(config, field)
        value = check_value(f"config.{field}", raw, _RULES[field])
        values[field] = value
    return values


@dataclass(frozen=True)
class _Row:
    """The valid tokens of one kept example, as exact numbers."""

    index: int
    positions: tuple[int, ...]
    loss: tuple[float | int, ...]  # l at the valid positions
    base: tuple[float | int, ...]  # b at the valid positions

    @property
    def zero_base(self) -> bool:
        return all(value == 0 for value in self.base)


def _valid_rows(
    ls: list[list[Any]], bs: list[list[Any]], mask: list[list[bool]], epsilon: float
) -> list[_Row]:
    """Check the value rules of MATH.md, "Errors"; return the kept examples."""
    rows: list[_Row] = []
    for name, data in (("token_nll", ls), ("zfree_token_nll", bs)):
        for r, (values, valid) in enumerate(zip(data, mask, strict=True)):
            for col, (value, ok) in enumerate(zip(values, valid, strict=True)):
                if ok and not math.isfinite(value):
                    raise ValueError(
                        f"{name} must be finite at every position where mask is True; "
                        f"found {value} at [{r}, {col}]"
                    )
    for r, (values, valid) in enumerate(zip(bs, mask, strict=True)):
        for col, (value, ok) in enumerate(zip(values, valid, strict=True)):
            if ok and value < 0:
                raise ValueError(
                    "zfree_token_nll must be >= 0 at every position where mask is True; "
                    f"found {value} at [{r}, {col}]"
                )
    for r, valid in enumerate(mask):
        positions = tuple(col for col, ok in enumerate(valid) if ok)
        if positions:
            rows.append(
                _Row(
                    r,
                    positions,
                    tuple(ls[r][p] for p in positions),
                    tuple(bs[r][p] for p in positions),
                )
            )
    if not rows:
        raise ValueError("mask must select at least one valid token in the batch; it selects none")
    if epsilon == 0:
        for row in rows:
            if row.zero_base:
                raise ValueError(
                    f"{EPSILON.field} = 0 needs bbar_i > 0 for every kept "
                    f"example; example {row.index} has zfree_token_nll = 0 at all of its "
                    "valid positions"
                )
    return rows


# ---------------------------------------------------------------------------------------
# Evaluation


def _prepare(
    token_nll: Any, zfree_token_nll: Any, mask: Any, config: Any
) -> tuple[dict[str, float], tuple[int, int], list[_Row]]:
    """Read and check the config and the inputs; return them with the kept examples."""
    cfg = read_config(config)
    _check_devices(token_nll, zfree_token_nll, mask)
    ls = _losses_as_lists(token_nll, "token_nll")
    bs = _losses_as_lists(zfree_token_nll, "zfree_token_nll")
    valid = _mask_as_lists(mask)
    shapes = (_shape(ls), _shape(bs), _shape(valid))
    if not shapes[0] == shapes[1] == shapes[2]:
        raise ValueError(
            "token_nll, zfree_token_nll and mask must have the same shape, got "
            f"{shapes[0]}, {shapes[1]} and {shapes[2]}"
        )
    rows = _valid_rows(ls, bs, valid, cfg[EPSILON.field])
    return cfg, shapes[0], rows


def _exact_mpf(value: float | int) -> Any:
    """``value`` as an mpf, exactly (a float64 or an int needs no rounding)."""
    # make_mpf(from_float(...)) is what mpf(value) does, without its generic dispatch:
    # the oracle converts every valid input this way.
    if isinstance(value, int):
        return mpmath.mp.make_mpf(from_int(value))
    return mpmath.mp.make_mpf(from_float(value))


def _run(
    cfg: dict[str, float], rows: list[_Row], precision: int, details: bool
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Evaluate the lambdified expressions; return the values and each row's outputs."""
    per_row: list[dict[str, Any]] = []
    with mpmath.workdps(precision):
        mpf = mpmath.mpf
        parameters = config_arguments({field: mpf(value) for field, value in cfg.items()})
        kept_count = mpf(len(rows))
        summaries: list[Any] = []
        for row in rows:
            n = len(row.positions)
            out = example_function(n, row.zero_base, details)(
                *(_exact_mpf(x) for x in row.loss),
                *(_exact_mpf(x) for x in row.base),
                *parameters,
                kept_count,
                mpf(n),
            )
            summaries.extend(out[name] for name in SUMMARY_NAMES)
            per_row.append(out)
        outputs = batch_function(len(rows))(*summaries, *parameters, kept_count)
        # float(mpf) rounds to nearest: one rounding from the high-precision value.
        values = {name: float(value) for name, value in outputs.items()}
    return values, per_row


def evaluate_details(
    token_nll: Any,
    zfree_token_nll: Any,
    mask: Any,
    config: Any,
    *,
    precision: int = DEFAULT_PRECISION,
) -> OracleResult:
    """The outputs and the per-example and per-token quantities behind them.

    Args:
        token_nll: ``[B, T]`` l, the model's per-token NLL.
        zfree_token_nll: ``[B, T]`` b, the z-free reference's per-token NLL (>= 0 where valid).
        mask: ``[B, T]`` bool or integer 0/1, True at valid positions.
        config: object or mapping with the fields of ``ReconstructionLossConfig``.
        precision: significant decimal digits of the mpmath evaluation.

    Raises:
        ValueError: for the cases of MATH.md, "Errors" (the message names the argument
            and the rule), and for a config value ``ReconstructionLossConfig`` would reject.
    """
    cfg, (batch_size, width), rows = _prepare(token_nll, zfree_token_nll, mask, config)
    values, per_row = _run(cfg, rows, precision, details=True)

    shares = np.zeros((batch_size, width))
    gradient = np.zeros((batch_size, width))
    term_gradients = {term.name: np.zeros((batch_size, width)) for term in TERMS}
    per_example = {s.name: np.full(batch_size, s.dropped_row) for s in STATISTICS}
    kept = np.zeros(batch_size, dtype=bool)
    for row, out in zip(rows, per_row, strict=True):
        r, cols = row.index, list(row.positions)
        kept[r] = True
        for name, array in per_example.items():
            array[r] = float(out[name])
        shares[r, cols] = [float(x) for x in out[SHARES]]
        gradient[r, cols] = [float(x) for x in out[TOKEN_GRADIENT]]
        for name, array in term_gradients.items():
            array[r, cols] = [float(x) for x in out[name]]
    for array in (gradient, *term_gradients.values(), shares, *per_example.values(), kept):
        array.setflags(write=False)
    return OracleResult(
        values=values,
        token_gradient=gradient,
        term_gradients=term_gradients,
        shares=shares,
        **per_example,
        kept=kept,
        kept_count=len(rows),
    )


def evaluate(
    token_nll: Any,
    zfree_token_nll: Any,
    mask: Any,
    config: Any,
    *,
    precision: int = DEFAULT_PRECISION,
) -> dict[str, float]:
    """The outputs of MATH.md, by name and in MATH.md order, as float64.

    Same arguments and errors as ``evaluate_details``; skips the shares and the gradient.
    """
    cfg, _, rows = _prepare(token_nll, zfree_token_nll, mask, config)
    values, _ = _run(cfg, rows, precision, details=False)
    return values
