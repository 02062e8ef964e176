"""The per-example statistic registry: each record has its formula, and every per-example
quantity of the spec derives from the records."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest
import sympy as sp

import spec
from spec import symbols as sym
from spec.definitions import Example, ExampleSummary, ExplicitTokens, indexed_example
from spec.document import render_spec_document
from spec.notation import NamedExample, plain, statistic_formula
from spec.statistics import STATISTIC_NAMES, STATISTICS, Statistic
from spec.symbols import LATEX_NAMES, latex

NAN = math.nan
#: two kept rows (one of them with every b 0, the zero-base fallback) and a dropped one
NLL = [[2.0, 4.0, 1.0], [3.0, 5.0, NAN], [NAN, NAN, NAN]]
BASE = [[1.0, 3.0, 0.5], [0.0, 0.0, NAN], [NAN, NAN, NAN]]
MASK = [[1, 1, 1], [1, 1, 0], [0, 0, 0]]
_KEPT_TOKENS = (((2, 4, sp.Rational(1)), (1, 3, sp.Rational(1, 2))), ((3, 5), (0, 0)))
_ALPHA = sp.Rational(3, 2)


@pytest.mark.parametrize("statistic", STATISTICS, ids=lambda s: s.name)
def test_each_statistic_is_an_example_property_on_both_kinds_of_tokens(
    statistic: Statistic,
) -> None:
    explicit = Example(ExplicitTokens.symbols(3))
    indexed = indexed_example(sym.i)
    for example in (explicit, indexed):
        value = getattr(example, statistic.name)
        assert isinstance(value, sp.Expr) and value.free_symbols, (statistic.name, value)
    assert getattr(Example, statistic.name).__doc__ == statistic.doc
    # on explicit tokens, the formula reads only that example's tokens and alpha
    allowed = {*explicit.tokens.loss, *explicit.tokens.base, sym.alpha}
    assert getattr(explicit, statistic.name).free_symbols <= allowed


@pytest.mark.parametrize("statistic", STATISTICS, ids=lambda s: s.name)
def test_the_oracle_reports_each_statistic_as_its_formula_gives_it(statistic: Statistic) -> None:
    config = spec.config_mapping(raw_weight=1.0, token_weight_alpha=float(_ALPHA))
    result = spec.evaluate_details(NLL, BASE, MASK, config)
    expected = []
    for losses, bases in _KEPT_TOKENS:
        tokens = ExplicitTokens(tuple(map(sp.sympify, losses)), tuple(map(sp.sympify, bases)))
        example = Example(tokens, _ALPHA, zero_base=not any(bases))
        value = sp.nsimplify(getattr(example, statistic.name))
        # the symbol's assumption holds of the value (the proofs rely on it)
        assert getattr(value, f"is_{statistic.assumption}"), (statistic.name, value)
        expected.append(float(sp.N(value, 30)))
    array = getattr(result, statistic.name)
    assert array.tolist() == [*expected, statistic.dropped_row]


def test_the_per_example_vocabulary_derives_from_the_registry() -> None:
    assert tuple(f.name for f in fields(ExampleSummary)) == STATISTIC_NAMES
    assert {f.name for f in fields(spec.OracleResult)} >= set(STATISTIC_NAMES)
    summary = ExampleSummary.indexed(sp.Symbol("i"))
    for statistic in STATISTICS:
        assert getattr(summary, statistic.name) == statistic.indexed[sp.Symbol("i")]
        assert LATEX_NAMES[statistic.indexed.label] == statistic.latex
        assert plain(getattr(NamedExample(), statistic.name)) == statistic.plain
        assert getattr(ExampleSummary.symbols(3), statistic.name) == statistic.symbol(3)


def test_the_document_shows_each_statistic_through_those_it_is_built_from() -> None:
    assert plain(statistic_formula("kappa")) == "btok_i/bbar_i"
    assert plain(statistic_formula("ltok")) == "Sum(pi_it*l[i, t], (t, 1, n_i))"
    document = render_spec_document()
    for statistic in STATISTICS:
        lhs = latex(statistic.indexed[sym.i])
        assert f"{lhs} &= {latex(statistic_formula(statistic.name))}" in document


def test_a_statistic_may_take_the_extremes_of_its_tokens() -> None:
    # the largest and smallest b of an example, as a statistic built from them would use:
    # Max and Min on an explicit batch, max_t and min_t at a symbolic count
    tokens = ExplicitTokens.symbols(3)
    spread = tokens.extreme(lambda tok: tok.base, "max") - tokens.extreme(
        lambda tok: tok.base, "min"
    )
    values = {tok.base: v for tok, v in zip(tokens.tokens, (2.0, 5.0, 0.5), strict=True)}
    assert spread.subs(values) == 4.5
    example = indexed_example()
    largest = example.tokens.extreme(lambda tok: tok.base, "max")
    assert latex(largest).startswith(r"\max_{t}")
    assert sym.t not in largest.free_symbols  # the index is bound
    assert sp.diff(largest, example.tokens.token(sym.t).loss) == 0  # no l in it
