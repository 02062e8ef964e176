r"""The normative definitions of MATH.md as sympy expression builders.

Everything here is written once and works on two kinds of input:

* explicit tokens ``l_1 .. l_n``, ``b_1 .. b_n`` (``ExplicitTokens``) and explicit batches
  (``ExplicitBatch``) — for the proofs at fixed sizes and for the oracle;
* indexed tokens ``l[i, t]`` summed up to a symbolic ``n_i`` (``IndexedTokens``) and indexed
  batches summed up to a symbolic ``B'`` (``IndexedBatch``) — for the general proofs and the
  document.

For example ``i`` with ``n_i`` valid tokens (MATH.md, "Per example"):

.. math::

    \bar l_i = \frac{1}{n_i}\sum_t l_{it}, \quad
    \bar b_i = \frac{1}{n_i}\sum_t b_{it}, \quad
    \pi_{it} = \frac{b_{it}^\alpha}{\sum_s b_{is}^\alpha}, \quad
    l^\mathrm{tok}_i = \sum_t \pi_{it} l_{it}, \quad
    b^\mathrm{tok}_i = \sum_t \pi_{it} b_{it}, \quad
    \kappa_i = b^\mathrm{tok}_i / \bar b_i

and over the ``B'`` kept examples (MATH.md, the section ``spec.terms.OUTPUTS_SECTION`` names):

.. math::

    R_\mathrm{raw} = \operatorname{mean}_i \bar l_i, \;
    R_\mathrm{dist} = R_\mathrm{raw}/c, \;
    R_\mathrm{ex} = \operatorname{mean}_i \frac{\bar l_i}{\bar b_i + \varepsilon}, \;
    R_\mathrm{tok} = \operatorname{mean}_i l^\mathrm{tok}_i, \;
    R_\mathrm{cc} = \frac{1}{c}\operatorname{mean}_i \frac{l^\mathrm{tok}_i}{\kappa_i}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, make_dataclass
from typing import Literal, NamedTuple, Protocol

import sympy as sp

from spec import symbols as sym
from spec.parameters import PARAMETERS
from spec.statistics import STATISTICS
from spec.terms import DIAGNOSTIC_NAMES as DIAGNOSTIC_NAMES  # the vocabulary, re-exported
from spec.terms import DIAGNOSTICS, OUTPUTS, TERMS, Output
from spec.terms import LOSS_NAMES as LOSS_NAMES
from spec.terms import TERM_NAMES as TERM_NAMES
from spec.terms import TOTAL_NAME as TOTAL_NAME

#: The outputs as symbols (their LaTeX is MATH.md's notation: R_raw, ..., J).
OUTPUT_SYMBOLS: dict[str, sp.Symbol] = {output.name: output.symbol for output in OUTPUTS}

#: Config field of each weight (by its symbol's name) and parameter (by its name, which is
#: its symbol's) of ``ReconstructionLossConfig``.
CONFIG_FIELDS: dict[str, str] = {
    **{str(term.weight): term.weight_field for term in TERMS},  # type: ignore[misc]
    **{parameter.name: parameter.field for parameter in PARAMETERS},
}


class _Weights:
    """What ``Parameters`` adds to the parameters' fields: the weights of the terms."""

    def weights(self) -> dict[str, sp.Expr]:
        """The weight of each term, by output name."""
        return dict(self.term_weights)  # type: ignore[attr-defined]

    def weight(self, term: Output) -> sp.Expr:
        return self.weights()[term.name]


# One field per parameter of the registry, so that a new parameter is a record there only.
Parameters = make_dataclass(
    "Parameters",
    [
        *((p.name, sp.Expr, field(default=p.symbol)) for p in PARAMETERS),
        (
            "term_weights",
            tuple[tuple[str, sp.Expr], ...],
            field(default=tuple((term.name, term.weight) for term in TERMS)),
        ),
    ],
    bases=(_Weights,),
    frozen=True,
)
Parameters.__module__ = __name__
Parameters.__doc__ = """The config as expressions: symbols by default, numbers after
substitution. A field per parameter of ``spec.parameters`` (``p.alpha``, ``p.epsilon``,
``p.c``; default: its symbol) and ``term_weights``, the weight of each term by output name
(default: its symbol, ``w_raw`` and so on, from the term registry)."""

#: The parameters as free symbols.
SYMBOLIC = Parameters()


# ---------------------------------------------------------------------------------------
# Tokens of one example


class Token(NamedTuple):
    """One valid position of an example: its losses and its index."""

    loss: sp.Expr  # l_t: token_nll
    base: sp.Expr  # b_t: zfree_token_nll
    t: sp.Expr | int


#: which extreme ``Tokens.extreme`` takes
Extreme = Literal["max", "min"]


class Tokens(ABC):
    """The valid tokens ``V_i`` of one example."""

    @property
    @abstractmethod
    def count(self) -> sp.Expr:
        """``n_i = |V_i|``."""

    @abstractmethod
    def total(self, f: Callable[[Token], sp.Expr], *, index: sp.Symbol = sym.t) -> sp.Expr:
        """``sum_{t in V_i} f(token t)``; ``index`` names the summation index."""

    @abstractmethod
    def extreme(
        self, f: Callable[[Token], sp.Expr], kind: Extreme, *, index: sp.Symbol = sym.t
    ) -> sp.Expr:
        """``max_{t in V_i} f(token t)`` (``kind`` "max") or its ``min``."""


class TokenExtreme(sp.Function):
    """``max_{index = 1..count} f`` or its ``min`` at a symbolic count: ``(f, index, count,
    kind)``, kind 1 for the maximum and -1 for the minimum. ``index`` is bound (not a free
    symbol); the expression is a constant of every token loss ``l`` (its derivative in
    anything ``f`` does not hold is 0)."""

    @classmethod
    def eval(cls, summand: sp.Expr, index: sp.Symbol, count: sp.Expr, kind: sp.Integer):
        # the extreme of a constant over n >= 1 tokens is the constant
        if index not in summand.free_symbols:
            return summand
        return None

    @property
    def free_symbols(self) -> set[sp.Basic]:
        summand, index, count, _ = self.args
        inner = {x for x in summand.free_symbols if index not in x.free_symbols}
        return inner | count.free_symbols

    def _latex(self, printer: sp.printing.latex.LatexPrinter) -> str:
        summand, index, _, kind = self.args
        name = r"\max" if kind == 1 else r"\min"
        return rf"{name}_{{{printer._print(index)}}} {printer._print(summand)}"


@dataclass(frozen=True)
class ExplicitTokens(Tokens):
    """``n`` explicit tokens: tuples of expressions ``l_1 .. l_n`` and ``b_1 .. b_n``."""

    loss: tuple[sp.Expr, ...]  # l_1 .. l_n
    base: tuple[sp.Expr, ...]  # b_1 .. b_n
    #: A symbol standing for ``n = len(l)``, or None for the number itself. The oracle's
    #: lambdified functions take ``n`` as an argument this way, which spares them
    #: re-creating the constant ``1/n`` at every use.
    count_symbol: sp.Symbol | None = None

    def __post_init__(self) -> None:
        if len(self.loss) != len(self.base) or not self.loss:
            raise ValueError("ExplicitTokens needs as many l as b, and at least one token")

    @property
    def count(self) -> sp.Expr:
        return sp.Integer(len(self.loss)) if self.count_symbol is None else self.count_symbol

    @property
    def tokens(self) -> tuple[Token, ...]:
        return tuple(
            Token(lt, bt, k) for k, (lt, bt) in enumerate(zip(self.loss, self.base, strict=True), 1)
        )

    def total(self, f: Callable[[Token], sp.Expr], *, index: sp.Symbol = sym.t) -> sp.Expr:
        return sp.Add(*(f(token) for token in self.tokens))

    def extreme(
        self, f: Callable[[Token], sp.Expr], kind: Extreme, *, index: sp.Symbol = sym.t
    ) -> sp.Expr:
        return (sp.Max if kind == "max" else sp.Min)(*(f(token) for token in self.tokens))

    @classmethod
    def symbols(cls, count: int, *, prefix: str = "", positive_b: bool = False) -> ExplicitTokens:
        """Fresh token symbols ``l_1 .. l_n``, ``b_1 .. b_n`` (see ``symbols.token_symbols``)."""
        return cls(*sym.token_symbols(count, prefix=prefix, positive_b=positive_b))


@dataclass(frozen=True)
class IndexedTokens(Tokens):
    """Tokens ``l[row, t]``, ``b[row, t]`` for ``t = 1 .. count`` (``l[t]`` without a row)."""

    loss: sp.IndexedBase = sym.l_indexed
    base: sp.IndexedBase = sym.b_indexed
    n: sp.Expr = sym.n
    row: sp.Expr | None = None

    @property
    def count(self) -> sp.Expr:
        return self.n

    def token(self, index: sp.Expr) -> Token:
        at = (index,) if self.row is None else (self.row, index)
        return Token(self.loss[at], self.base[at], index)

    def total(self, f: Callable[[Token], sp.Expr], *, index: sp.Symbol = sym.t) -> sp.Expr:
        return sp.Sum(f(self.token(index)), (index, 1, self.n))

    def extreme(
        self, f: Callable[[Token], sp.Expr], kind: Extreme, *, index: sp.Symbol = sym.t
    ) -> sp.Expr:
        return TokenExtreme(f(self.token(index)), index, self.n, 1 if kind == "max" else -1)


# ---------------------------------------------------------------------------------------
# Per-example quantities


def share_normalizer(tokens: Tokens, alpha: sp.Expr) -> sp.Expr:
    """``Z_i = sum_s b_is^alpha`` (with ``0^0 = 1``: at ``alpha = 0`` it is ``n_i``)."""
    return tokens.total(lambda tok: tok.base**alpha, index=sym.s)


def share(b_t: sp.Expr, tokens: Tokens, alpha: sp.Expr, *, zero_base: bool = False) -> sp.Expr:
    """``pi_it = b_it^alpha / sum_s b_is^alpha``, the tempered surprisal share.

    ``zero_base`` is the row whose valid ``b`` are all 0: there the shares are uniform,
    ``1/n_i`` (MATH.md; the limit of a row of equal losses, identity
    ``zero-base-uniform-fallback``), whatever ``alpha``.
    """
    if zero_base:
        return 1 / tokens.count
    return b_t**alpha / share_normalizer(tokens, alpha)


@dataclass(frozen=True)
class Example:
    """One kept example: its tokens, ``alpha`` and whether all of its valid ``b`` are 0.

    Each statistic of ``spec.statistics`` is a property of the same name (``lbar``, ...,
    ``kappa``), computed by the statistic's formula.
    """

    tokens: Tokens
    alpha: sp.Expr = sym.alpha
    zero_base: bool = False

    @property
    def count(self) -> sp.Expr:
        return self.tokens.count

    def share(self, token: Token) -> sp.Expr:
        """``pi_it`` of one of this example's tokens."""
        return share(token.base, self.tokens, self.alpha, zero_base=self.zero_base)

    @property
    def shares(self) -> tuple[sp.Expr, ...]:
        """``(pi_i1 .. pi_in)``, for explicit tokens."""
        if not isinstance(self.tokens, ExplicitTokens):
            raise TypeError("shares needs explicit tokens; use share(token) otherwise")
        return tuple(self.share(token) for token in self.tokens.tokens)


# Each statistic of the registry is a property of an example (``example.lbar``), its
# record's formula: a new statistic is its record alone.
for _statistic in STATISTICS:
    setattr(Example, _statistic.name, property(_statistic.formula, doc=_statistic.doc))


class ExampleLike(Protocol):
    """What the batch-level definitions read off an example: each statistic of
    ``spec.statistics`` by its name (``example.lbar``, ..., ``example.kappa``)."""

    def __getattr__(self, name: str) -> sp.Expr: ...


class _Summary:
    """What ``ExampleSummary`` adds to the statistics' fields: its two sets of symbols."""

    @classmethod
    def indexed(cls, row: sp.Expr) -> ExampleSummary:
        """``lbar[row], bbar[row], ...``: for the batch-level formulas at general ``B'``."""
        return cls(**{s.name: s.indexed[row] for s in STATISTICS})

    @classmethod
    def symbols(cls, k: int) -> ExampleSummary:
        """Plain symbols ``lbar_k, ...`` for example ``k`` of an explicit batch."""
        return cls(**{s.name: s.symbol(k) for s in STATISTICS})


# One field per statistic of the registry, so that a new statistic is a record there and
# its property of ``Example``.
ExampleSummary = make_dataclass(
    "ExampleSummary",
    [(statistic.name, sp.Expr) for statistic in STATISTICS],
    bases=(_Summary,),
    frozen=True,
)
ExampleSummary.__module__ = __name__
ExampleSummary.__doc__ = """An example seen only through its per-example statistics (as
symbols): a field per statistic of ``spec.statistics``."""


# ---------------------------------------------------------------------------------------
# Batches


class Batch(ABC):
    """The ``B'`` kept examples of a batch, and the mean over them."""

    @property
    @abstractmethod
    def count(self) -> sp.Expr:
        """``B'``, the number of kept examples."""

    @abstractmethod
    def mean(self, f: Callable[[ExampleLike], sp.Expr]) -> sp.Expr:
        """``mean_i f(example i) = (1/B') sum_i f(example i)``."""


@dataclass(frozen=True)
class ExplicitBatch(Batch):
    """An explicit tuple of kept examples."""

    examples: tuple[ExampleLike, ...]
    #: A symbol standing for ``B' = len(examples)``, or None for the number itself (see
    #: ``ExplicitTokens.count_symbol``).
    count_symbol: sp.Symbol | None = None

    @property
    def count(self) -> sp.Expr:
        return sp.Integer(len(self.examples)) if self.count_symbol is None else self.count_symbol

    def mean(self, f: Callable[[ExampleLike], sp.Expr]) -> sp.Expr:
        return sp.Add(*(f(example) for example in self.examples)) / self.count

    @classmethod
    def of_sizes(
        cls,
        sizes: tuple[int, ...],
        alpha: sp.Expr = sym.alpha,
        *,
        positive_b: bool = False,
        zero_base: tuple[bool, ...] | None = None,
    ) -> ExplicitBatch:
        """Fresh examples with ``sizes[k]`` tokens each; token symbols ``l_{k}_{t}``."""
        zero = zero_base or (False,) * len(sizes)
        return cls(
            tuple(
                Example(
                    ExplicitTokens.symbols(size, prefix=f"{k}_", positive_b=positive_b),
                    alpha,
                    zero_base=z,
                )
                for k, (size, z) in enumerate(zip(sizes, zero, strict=True), 1)
            )
        )


@dataclass(frozen=True)
class IndexedBatch(Batch):
    """``example(i)`` for ``i = 1 .. count``, summed with ``Sum``."""

    example: Callable[[sp.Expr], ExampleLike] = ExampleSummary.indexed
    n_kept: sp.Expr = sym.kept_count
    index: sp.Symbol = sym.i

    @property
    def count(self) -> sp.Expr:
        return self.n_kept

    def mean(self, f: Callable[[ExampleLike], sp.Expr]) -> sp.Expr:
        return sp.Sum(f(self.example(self.index)), (self.index, 1, self.n_kept)) / self.n_kept


def indexed_example(row: sp.Expr = sym.i, alpha: sp.Expr = sym.alpha) -> Example:
    """Example ``row`` with indexed tokens ``l[row, t]``, ``b[row, t]``, ``t = 1 .. n[row]``."""
    return Example(IndexedTokens(sym.l_indexed, sym.b_indexed, sym.n_indexed[row], row=row), alpha)


# ---------------------------------------------------------------------------------------
# The terms, the two diagnostics and the total


def loss_terms(batch: Batch, params: Parameters = SYMBOLIC) -> dict[str, sp.Expr]:
    """The outputs of MATH.md, by name, in MATH.md order: each output's mean over the
    kept examples of its contribution (``spec.terms``), and the total."""
    terms = {
        output.name: batch.mean(lambda e, output=output: output.contribution(e, params))
        for output in (*TERMS, *DIAGNOSTICS)
    }
    terms[TOTAL_NAME] = total_loss(terms, params)
    return terms


def total_loss(terms: Mapping[str, sp.Expr], params: Parameters = SYMBOLIC) -> sp.Expr:
    """``J = w_raw R_raw + w_dist R_dist + w_ex R_ex + w_tok R_tok + w_cc R_cc``."""
    return sp.Add(*(weight * terms[name] for name, weight in params.weights().items()))


def per_example_contributions(
    example: ExampleLike, params: Parameters = SYMBOLIC
) -> dict[str, sp.Expr]:
    """``x_i`` with ``output = mean_i x_i`` for each of the eight (identity ``batch-mean-form``)."""
    parts = {output.name: output.contribution(example, params) for output in (*TERMS, *DIAGNOSTICS)}
    parts[TOTAL_NAME] = total_loss(parts, params)
    return parts


# ---------------------------------------------------------------------------------------
# Gradients

#: the token policies pi of the generic family (``spec.family``): pi(example, token)
POLICIES: dict[str, Callable[[Example, Token], sp.Expr]] = {
    "uniform": lambda example, token: 1 / example.count,
    "shares": lambda example, token: example.share(token),
}


def term_gradient(
    term: Output, example: Example, token: Token, kept: sp.Expr, params: Parameters = SYMBOLIC
) -> sp.Expr:
    """The closed form of ``dR_k/dl_it`` of one term for a valid token of a kept example
    (MATH.md, "Gradients").

    The term is the member ``(1/C) mean_i omega_i sum_t pi_it l_it`` of the generic family
    its record names, so ``dR_k/dl_it = omega_ik pi^k_it / (C_k B')``: ``1/(B' n_i)`` for
    R_raw, ``1/(c B' n_i)`` for R_dist, ``1/(B' n_i (bbar_i + eps))`` for R_ex,
    ``pi_it/B'`` for R_tok and ``pi_it/(c B' kappa_i)`` for R_cc. The weights built from
    ``b`` are constants for the derivative in ``l`` (the stop-gradient of MATH.md); identity
    ``term-gradient-closed-form`` proves it equal to the derivative of the term.
    """
    if term.kind != "term":
        raise ValueError(f"term must be one of the terms, got the {term.kind} {term.name}")
    return _token_coefficient(term, example, params) * POLICIES[term.policy](example, token) / kept


def _token_coefficient(term: Output, example: Example, params: Parameters) -> sp.Expr:
    """``omega_i / C``: what multiplies the term's policy pi_it (before ``1/B'``)."""
    return term.omega(example, params) / term.scale(params)


def token_gradient(
    example: Example, token: Token, kept: sp.Expr, params: Parameters = SYMBOLIC
) -> sp.Expr:
    """The closed form of ``dJ/dl_it`` for a valid token of a kept example (MATH.md, "Gradients").

    ``J`` is linear in the terms, so ``dJ/dl_it = sum_k w_k dR_k/dl_it`` (``term_gradient``):

    ``(1/B') [ (w_raw + w_dist/c + w_ex/(bbar_i + eps)) / n_i + (w_tok + w_cc/(c kappa_i)) pi_it ]``

    ``pi``, ``kappa`` and ``bbar`` are built from ``b`` alone, so they are constants for
    the derivative in ``l``: this is the stop-gradient of MATH.md. Identity
    ``gradient-closed-form`` proves it equal to the derivative of ``J``.
    """
    # grouped by policy, as MATH.md writes it: (w_raw + w_dist/c + w_ex/(bbar+eps)) / n_i + ...
    per_policy: dict[str, list[sp.Expr]] = {}
    for term in TERMS:
        weight = params.weight(term) * _token_coefficient(term, example, params)
        per_policy.setdefault(term.policy, []).append(weight)
    return (
        sp.Add(
            *(
                sp.Add(*weights) * POLICIES[policy](example, token)
                for policy, weights in per_policy.items()
            )
        )
        / kept
    )


# ---------------------------------------------------------------------------------------
# Substitutions used by the identities


def at_baseline(expr: sp.Expr, batch: Batch) -> sp.Expr:
    """``expr`` at the z-free baseline: ``l = b`` on every valid position of ``batch``."""
    if isinstance(batch, ExplicitBatch):
        mapping: dict[sp.Expr, sp.Expr] = {}
        for example in batch.examples:
            tokens = example.tokens
            mapping.update(zip(tokens.loss, tokens.base, strict=True))
        return expr.xreplace(mapping)
    return expr.replace(
        lambda e: isinstance(e, sp.Indexed) and e.base == sym.l_indexed,
        lambda e: sym.b_indexed[e.indices],
    )


def baseline_scale(batch: Batch) -> sp.Expr:
    """``c = mean_i bbar_i``: the reference scale that matches the baseline exactly."""
    return batch.mean(lambda e: e.bbar)
