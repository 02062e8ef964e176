"""The symbols of the specification, with the assumptions MATH.md states for them.

Two kinds of token symbols are used:

* explicit ones, ``l_1 .. l_n`` and ``b_1 .. b_n`` for a fixed ``n`` — what the proofs for
  ``n = 1 .. 4`` and the oracle's lambdified functions are built from;
* indexed ones, ``l[i, t]`` and ``b[i, t]`` summed with ``Sum`` up to a symbolic ``n_i`` —
  what the general-``n`` proofs and the document's formulas are built from.

``LATEX_NAMES`` maps the plain names sympy knows these symbols by to the notation of
MATH.md, for ``sympy.latex(..., symbol_names=LATEX_NAMES)``.
"""

from __future__ import annotations

import sympy as sp

from spec.parameters import ALPHA, EPSILON, PARAMETERS, C
from spec.statistics import STATISTICS

# The parameters of the stack have their symbols, with their assumptions and LaTeX, in the
# parameter registry (``spec/parameters.py``); these are the short names the formulas use.
alpha = ALPHA.symbol
epsilon = EPSILON.symbol
c = C.symbol

# The outputs and the weights of the terms have their symbols in the term registry
# (``spec/terms.py``), with their LaTeX.

# Counts and indices: n valid tokens in an example, B' kept examples in a batch.
n = sp.Symbol("n", integer=True, positive=True)
kept_count = sp.Symbol("B_kept", integer=True, positive=True)
i = sp.Symbol("i", integer=True, positive=True)
t = sp.Symbol("t", integer=True, positive=True)
s = sp.Symbol("s", integer=True, positive=True)

# Indexed token losses: l[i, t] is real, b[i, t] >= 0 (a surprisal).
l_indexed = sp.IndexedBase("l", real=True)
b_indexed = sp.IndexedBase("b", nonnegative=True)
n_indexed = sp.IndexedBase("ncount", integer=True, positive=True)

# The indexed per-example statistics (lbar[i], ..., kappa[i]) are their records' own
# (``spec/statistics.py``); the per-token shares and weights of the family are here.
pi_indexed = sp.IndexedBase("pi", nonnegative=True)
omega_indexed = sp.IndexedBase("omega", nonnegative=True)
scale_C = sp.Symbol("C", positive=True)

LATEX_NAMES: dict[sp.Basic, str] = {
    **{p.symbol: p.latex for p in PARAMETERS},
    kept_count: "B'",
    l_indexed.label: "l",
    b_indexed.label: "b",
    n_indexed.label: "n",
    **{statistic.indexed.label: statistic.latex for statistic in STATISTICS},
    pi_indexed.label: r"\pi",
    omega_indexed.label: r"\omega",
}


def token_symbols(
    count: int, *, prefix: str = "", positive_b: bool = False
) -> tuple[tuple[sp.Symbol, ...], tuple[sp.Symbol, ...]]:
    """``(l_1 .. l_n, b_1 .. b_n)`` for one example with ``count`` valid tokens.

    ``positive_b`` asks for ``b > 0`` instead of ``b >= 0``: the proofs that take
    ``log b`` need it. ``prefix`` keeps the examples of one batch apart (``l_2_1`` is token
    1 of example 2).
    """
    ls = tuple(sp.Symbol(f"l_{prefix}{k}", real=True) for k in range(1, count + 1))
    assumption = {"positive": True} if positive_b else {"nonnegative": True}
    bs = tuple(sp.Symbol(f"b_{prefix}{k}", **assumption) for k in range(1, count + 1))
    return ls, bs


def latex(expr: sp.Basic | str) -> str:
    """LaTeX of an expression in the notation of MATH.md."""
    if isinstance(expr, str):
        return expr
    from spec.terms import LATEX  # the registry's symbols (it imports this module)

    return sp.latex(expr, symbol_names={**LATEX_NAMES, **LATEX})
