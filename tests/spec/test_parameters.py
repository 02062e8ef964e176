"""The parameter registry (``spec/parameters.py``): one record per parameter, the vocabulary
that derives from it, and ``recon_impl`` (which imports nothing of the spec) agreeing with it."""

from __future__ import annotations

import argparse
import dataclasses
import math

import pytest

import recon_impl
import spec
from recon_impl.trainer_flags import RECONSTRUCTION_FLAGS
from spec import api, symbols, terms
from spec.definitions import CONFIG_FIELDS, SYMBOLIC, Parameters
from spec.oracle import CONFIG_ARGUMENTS, read_config
from spec.parameters import PARAMETERS, RULES

#: the parameters of seed 001's config, in its order
SEED_PARAMETERS = ("alpha", "epsilon", "c")


def test_every_parameter_has_one_record_and_the_vocabulary_derives_from_them() -> None:
    # the seed's three, in its order (a later parameter may follow them)
    names = [p.name for p in PARAMETERS]
    assert [name for name in names if name in SEED_PARAMETERS] == list(SEED_PARAMETERS)
    assert len({p.field for p in PARAMETERS}) == len(PARAMETERS)
    # the expressions' Parameters: a field per parameter, its symbol by default
    names = [f.name for f in dataclasses.fields(Parameters)]
    assert names == [*(p.name for p in PARAMETERS), "term_weights"]
    for p in PARAMETERS:
        assert getattr(SYMBOLIC, p.name) is p.symbol
        assert str(p.symbol) == p.name and CONFIG_FIELDS[p.name] == p.field
        # a short name in spec.symbols, where the formulas have one, is the record's symbol
        assert getattr(symbols, p.name, p.symbol) is p.symbol
        assert symbols.latex(p.symbol) == p.latex
    # spec.api: the parameters follow the weights, with the record's default, rule and flag
    recorded = api.RECONSTRUCTION_FIELDS[len(terms.TERMS) :]
    assert [(f.name, f.default, f.rule, f.flag) for f in recorded] == [
        (p.field, p.default, p.rule, p.flag) for p in PARAMETERS
    ]
    flags = {p.flag: p.field for p in PARAMETERS if p.flag is not None}
    assert flags.items() <= api.FLAGS.items()
    # the oracle's arguments: every parameter and every weight, once
    assert [field for _, field in CONFIG_ARGUMENTS] == [
        *(p.field for p in PARAMETERS),
        *terms.WEIGHT_FIELDS,
    ]


def test_each_symbol_carries_the_assumption_of_its_rule() -> None:
    for p in PARAMETERS:
        assert p.symbol.is_real and p.symbol.is_nonnegative, p.name
        assert p.symbol.is_positive is (True if p.rule == "positive" else None), p.name


def test_the_draws_start_at_the_default_and_keep_the_rule() -> None:
    class Widest:
        max_alpha = math.inf
        max_loss = 1e4

    for p in PARAMETERS:
        rule = RULES[p.rule]
        assert p.draw.edges[0] == p.default, f"{p.name}: a case shrinks to its default"
        high = p.draw.high(Widest())
        for value in (*p.draw.edges, *(p.draw.more_edges or ()), p.draw.low, high):
            assert rule.holds(value), (p.name, value)
        assert p.draw.low <= high
        if p.repair is not None:
            assert rule.holds(p.repair.value) and rule.holds(p.repair.replacement)
            assert p.repair.replacement != p.repair.value


def test_config_mapping_fills_weights_with_0_and_parameters_with_their_defaults() -> None:
    # a caller names only what it sets: a new parameter needs no edit of every caller
    config = spec.config_mapping(raw_weight=2.0)
    assert list(config) == [*terms.WEIGHT_FIELDS, *(p.field for p in PARAMETERS)]
    assert config["raw_weight"] == 2.0 and config[terms.TOK.weight_field] == 0.0
    for p in PARAMETERS:
        assert config[p.field] == p.default
        changed = 3.0 if p.default != 3.0 else 4.0
        assert spec.config_mapping(**{p.field: changed})[p.field] == changed
    with pytest.raises(ValueError, match="no_such_field"):
        spec.config_mapping(no_such_field=1.0)


@pytest.mark.parametrize("parameter", PARAMETERS, ids=lambda p: p.name)
def test_the_oracle_checks_each_parameter_by_its_rule(parameter) -> None:
    config = spec.config_mapping()
    bad = -1.0 if parameter.rule == "non-negative" else 0.0
    with pytest.raises(ValueError) as raised:
        read_config({**config, parameter.field: bad})
    assert str(raised.value) == RULES[parameter.rule].message(f"config.{parameter.field}", bad)
    for value in (math.nan, True, "1.0"):
        with pytest.raises(ValueError, match=parameter.field):
            read_config({**config, parameter.field: value})
    assert read_config(config)[parameter.field] == parameter.default


def test_recon_impl_writes_the_same_fields_defaults_rules_and_flags() -> None:
    declared = [f.name for f in dataclasses.fields(recon_impl.ReconstructionLossConfig)]
    assert declared == list(api.RECONSTRUCTION_DEFAULTS)  # field for field, in order
    default = recon_impl.ReconstructionLossConfig()
    for p in PARAMETERS:
        assert getattr(default, p.field) == p.default, p.field
        rule = RULES[p.rule]
        bad = -1.0 if p.rule == "non-negative" else 0.0
        with pytest.raises(ValueError) as raised:
            recon_impl.ReconstructionLossConfig(**{p.field: bad})
        assert p.field in str(raised.value) and rule.text in str(raised.value)
        if p.flag is not None:
            assert RECONSTRUCTION_FLAGS[p.flag][0] == p.field
            parser = argparse.ArgumentParser()
            recon_impl.add_reconstruction_loss_arguments(parser)
            assert getattr(parser.parse_args([p.flag, "0.5"]), p.field) == 0.5
        else:
            assert p.field not in {name for name, _ in RECONSTRUCTION_FLAGS.values()}
