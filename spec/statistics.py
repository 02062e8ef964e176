r"""The per-example statistics: one record each, the vocabulary of every per-example quantity.

A term is a batch mean of per-example statistics (MATH.md, "Per example"): ``lbar_i``,
``bbar_i``, ``ltok_i``, ``btok_i``, ``kappa_i``. Each ``Statistic`` says how one of them is
named and written: its name (the attribute of an example that holds it), the assumptions
of its symbol, its LaTeX, and what the oracle reports for a dropped (empty) row.
Its formula is the property of the same name of ``spec.definitions.Example``, written in
terms of the tokens and of the statistics before it.

Everything per-example derives from ``STATISTICS``: ``ExampleSummary`` (an example seen
only through its statistics), the indexed symbols and their LaTeX (``spec.symbols``), the
named example and the plain names of messages (``spec.notation``), the oracle's per-example
functions and ``OracleResult``'s arrays, and the document's "Per example" section. A new
statistic is a record here and a property of ``Example``.

Example:
    >>> [s.name for s in STATISTICS]
    ['lbar', 'bbar', 'ltok', 'btok', 'kappa']
    >>> STATISTIC_BY_NAME["kappa"].symbol(2), STATISTIC_BY_NAME["kappa"].dropped_row
    (kappa_2, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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
    Statistic("lbar", "real", r"\bar{l}"),  # the mean token loss
    Statistic("bbar", "nonnegative", r"\bar{b}"),  # the mean surprisal, the seed's b_u
    Statistic("ltok", "real", r"l^{\mathrm{tok}}"),  # the share-weighted token loss
    Statistic("btok", "nonnegative", r"b^{\mathrm{tok}}"),  # the seed's R^base_tok
    # the concentration factor btok / bbar, 1 for a row whose b are all 0
    Statistic("kappa", "positive", r"\kappa", dropped_row=1.0),
)
STATISTIC_BY_NAME: dict[str, Statistic] = {s.name: s for s in STATISTICS}
STATISTIC_NAMES: tuple[str, ...] = tuple(STATISTIC_BY_NAME)
