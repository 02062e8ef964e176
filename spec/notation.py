"""How the document writes things: example ``i`` seen through named symbols.

The definitions expand every quantity into token losses; the document and the identity
catalogue often show a formula in terms of named per-example quantities instead (``n_i``,
``pi_{i,t}`` and the statistics of ``spec.statistics``, ``bbar_i``, ``kappa_i``). The
objects here stand in for an example in the same builders (``token_gradient``,
``Example.ltok``), so the rendered formula is still the builders' own.
"""

from __future__ import annotations

import sympy as sp

from spec import symbols as sym
from spec.definitions import OUTPUT_SYMBOLS, Example, Token, indexed_example
from spec.statistics import STATISTIC_BY_NAME, STATISTICS

i, t = sym.i, sym.t
pi_it = sym.pi_indexed[i, t]
n_i = sym.n_indexed[i]
b_it = sym.b_indexed[i, t]
l_it = sym.l_indexed[i, t]
kappa_i = STATISTIC_BY_NAME["kappa"].indexed[i]
#: The outputs as symbols, by name.
R = OUTPUT_SYMBOLS


class NamedExample:
    """Example ``i`` through named symbols: ``n_i``, ``pi_{i,t}`` and each statistic of
    ``spec.statistics`` by its name (``lbar_i``, ..., ``kappa_i``)."""

    count: sp.Expr = n_i

    def __getattr__(self, name: str) -> sp.Expr:
        if name not in STATISTIC_BY_NAME:
            raise AttributeError(name)
        return STATISTIC_BY_NAME[name].indexed[i]

    def share(self, token: object) -> sp.Expr:
        return pi_it


class NamedShares(Example):
    """An example whose shares are shown by name, ``pi_{i,t}``."""

    def share(self, token: Token) -> sp.Expr:
        return sym.pi_indexed[i, token.t]


def statistic_formula(name: str) -> sp.Expr:
    """Statistic ``name`` of example ``i`` as MATH.md writes it: its property of ``Example``
    with the shares and every other statistic by name (``kappa_i = btok_i / bbar_i``)."""
    others = {s.name: property(lambda _, s=s: s.indexed[i]) for s in STATISTICS if s.name != name}
    shown = type("Shown", (NamedShares,), others)(indexed_example(i).tokens)
    return getattr(shown, name)


def eq(lhs: sp.Basic, rhs: sp.Basic) -> str:
    """``lhs = rhs`` in LaTeX."""
    return f"{sym.latex(lhs)} = {sym.latex(rhs)}"


#: MATH.md's plain-text names of the named symbols (for messages and reports)
_PLAIN_NAMES: dict[sp.Basic, sp.Symbol] = {
    sym.kept_count: sp.Symbol("B'"),
    n_i: sp.Symbol("n_i"),
    **{s.indexed[i]: sp.Symbol(s.plain) for s in STATISTICS},
    pi_it: sp.Symbol("pi_it"),
}


def plain(expr: sp.Basic) -> str:
    """``expr`` in MATH.md's plain text: ``pi_it/(B'*c*kappa_i)``."""
    return sp.sstr(sp.sympify(expr).xreplace(_PLAIN_NAMES))
