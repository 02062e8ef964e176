r"""The per-example statistics: one record each, the vocabulary of every per-example quantity.

A term is a batch mean of per-example statistics (MATH.md, "Per example"), ``STATISTICS``
below. Each ``Statistic`` says what one of them is and how it is written: its name (the
attribute of an example that holds it), the assumptions of its symbol, its LaTeX, its
formula (in terms of the example's tokens, their sums and extremes, ``Tokens.total`` and
``Tokens.extreme``, its shares and the statistics before it; ``spec.definitions.Example``
has it as the property of that name), and what the oracle reports for a dropped (empty)
row.

Everything per-example derives from ``STATISTICS``: ``ExampleSummary`` (an example seen
only through its statistics), the indexed symbols and their LaTeX (``spec.symbols``), the
named example and the plain names of messages (``spec.notation``), the oracle's per-example
functions and ``OracleResult``'s arrays, and the document's "Per example" section. A new
statistic is a record here, nothing else.

Example:
    >>> STATISTIC_BY_NAME["lbar"].doc
    '``lbar_i = (1/n_i) sum_t l_it``, the mean token loss.'
    >>> STATISTIC_BY_NAME["kappa"].symbol(2), STATISTIC_BY_NAME["kappa"].dropped_row
    (kappa_2, 1.0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import sympy as sp

Assumption = Literal["real", "nonnegative", "positive"]


@dataclass(frozen=True)
class Statistic:
    """One per-example statistic of MATH.md."""

    #: the attribute of an example that holds it, and the stem of its symbols
    name: str
    #: what sympy may assume of it (MATH.md: ``l`` is real, ``b >= 0``, ``kappa > 0``)
    assumption: Assumption
    latex: str
    #: the statistic of an example (``spec.definitions.Example``: its ``tokens``, ``count``,
    #: ``share(token)``, ``zero_base`` and the statistics before this one)
    formula: Callable[[Any], sp.Expr]
    #: the formula in MATH.md's words, the docstring of ``Example.<name>``
    doc: str
    #: what the oracle's per-example array holds for a dropped (empty) row
    dropped_row: float = 0.0
    #: ``name[i]``, for the formulas at a general batch size; built once, so that every
    #: use is the same symbol
    indexed: sp.IndexedBase = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "indexed", sp.IndexedBase(self.name, **{self.assumption: True}))

    def symbol(self, k: int | str) -> sp.Symbol:
        """The plain symbol ``name_k`` of example ``k`` of an explicit batch."""
        return sp.Symbol(f"{self.name}_{k}", **{self.assumption: True})

    @property
    def plain(self) -> str:
        """Its name for example ``i`` in MATH.md's plain text: ``kappa_i``."""
        return f"{self.name}_i"


STATISTICS: tuple[Statistic, ...] = (
    Statistic(
        "lbar",
        "real",
        r"\bar{l}",
        lambda e: e.tokens.total(lambda tok: tok.loss) / e.count,
        "``lbar_i = (1/n_i) sum_t l_it``, the mean token loss.",
    ),
    Statistic(
        "bbar",
        "nonnegative",
        r"\bar{b}",
        lambda e: e.tokens.total(lambda tok: tok.base) / e.count,
        "``bbar_i = (1/n_i) sum_t b_it``, the mean surprisal (the seed's ``b_u``).",
    ),
    Statistic(
        "ltok",
        "real",
        r"l^{\mathrm{tok}}",
        lambda e: e.tokens.total(lambda tok: e.share(tok) * tok.loss),
        "``ltok_i = sum_t pi_it l_it``, the share-weighted token loss.",
    ),
    Statistic(
        "btok",
        "nonnegative",
        r"b^{\mathrm{tok}}",
        lambda e: e.tokens.total(lambda tok: e.share(tok) * tok.base),
        "``btok_i = sum_t pi_it b_it`` (the seed's ``R^base_tok,alpha``).",
    ),
    Statistic(
        "kappa",
        "positive",
        r"\kappa",
        lambda e: sp.Integer(1) if e.zero_base else e.btok / e.bbar,
        "``kappa_i = btok_i / bbar_i``, and 1 where ``bbar_i = 0`` (the zero-base row).",
        dropped_row=1.0,
    ),
)
STATISTIC_BY_NAME: dict[str, Statistic] = {s.name: s for s in STATISTICS}
STATISTIC_NAMES: tuple[str, ...] = tuple(STATISTIC_BY_NAME)
