"""How the document writes things: example ``i`` seen through named symbols.

The definitions expand every quantity into token losses; the document and the identity
catalogue often show a formula in terms of the named per-example quantities instead
(``n_i``, ``bbar_i``, ``kappa_i``, ``pi_{i,t}``). The objects here stand in for an example
in the same builders (``token_gradient``, ``Example.ltok``), so the rendered formula is
still the builders' own.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from spec import symbols as sym
from spec.definitions import OUTPUT_SYMBOLS, Example, Token

i, t = sym.i, sym.t
pi_it = sym.pi_indexed[i, t]
n_i = sym.n_indexed[i]
b_it = sym.b_indexed[i, t]
l_it = sym.l_indexed[i, t]
bbar_i = sym.bbar_indexed[i]
kappa_i = sym.kappa_indexed[i]
#: The eight outputs as symbols, by name.
R = OUTPUT_SYMBOLS


@dataclass(frozen=True)
class NamedExample:
    """Example ``i`` through the names ``n_i, bbar_i, kappa_i, pi_{i,t}``."""

    count: sp.Expr = n_i
    bbar: sp.Expr = bbar_i
    kappa: sp.Expr = kappa_i

    def share(self, token: object) -> sp.Expr:
        return pi_it


class NamedShares(Example):
    """An example whose shares are shown by name, ``pi_{i,t}``."""

    def share(self, token: Token) -> sp.Expr:
        return sym.pi_indexed[i, token.t]


def eq(lhs: sp.Basic, rhs: sp.Basic) -> str:
    """``lhs = rhs`` in LaTeX."""
    return f"{sym.latex(lhs)} = {sym.latex(rhs)}"


#: MATH.md's plain-text names of the named symbols (for messages and reports)
_PLAIN_NAMES: dict[sp.Basic, sp.Symbol] = {
    sym.kept_count: sp.Symbol("B'"),
    n_i: sp.Symbol("n_i"),
    bbar_i: sp.Symbol("bbar_i"),
    kappa_i: sp.Symbol("kappa_i"),
    pi_it: sp.Symbol("pi_it"),
}


def plain(expr: sp.Basic) -> str:
    """``expr`` in MATH.md's plain text: ``pi_it/(B'*c*kappa_i)``."""
    return sp.sstr(sp.sympify(expr).xreplace(_PLAIN_NAMES))
