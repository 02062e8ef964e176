"""The term registry (``spec/terms.py``): one record per output, and the vocabulary that
``recon_impl`` (which imports nothing of the spec) writes down on its own agrees with it."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
import sympy as sp

import recon_impl
import spec
from recon_impl.trainer_flags import RECONSTRUCTION_FLAGS
from spec import symbols, terms
from spec.definitions import CONFIG_FIELDS, OUTPUT_SYMBOLS, SYMBOLIC
from spec.family import FAMILY_INSTANCES


def test_every_output_has_one_record_and_the_vocabulary_derives_from_them() -> None:
    assert [o.name for o in terms.OUTPUTS] == list(spec.LOSS_NAMES)
    assert tuple(o.name for o in terms.OUTPUTS if o.kind == "term") == spec.TERM_NAMES
    assert tuple(o.name for o in terms.OUTPUTS if o.kind == "diagnostic") == spec.DIAGNOSTIC_NAMES
    assert [o.kind for o in terms.OUTPUTS].count("total") == 1
    assert {o.name: o.symbol for o in terms.OUTPUTS} == OUTPUT_SYMBOLS
    assert list(SYMBOLIC.weights()) == list(spec.TERM_NAMES)
    assert [instance.term for instance in FAMILY_INSTANCES] == list(spec.TERM_NAMES)
    for term in terms.TERMS:
        assert CONFIG_FIELDS[str(term.weight)] == term.weight_field
        assert term.policy in ("uniform", "shares") and term.omega and term.scale
    for output in terms.OUTPUTS:
        assert output.summary and output.latex
        names = [variant.name for variant in output.variants]
        assert len(names) == len(set(names)), output.name


def test_recon_impl_writes_the_same_names_fields_and_flags() -> None:
    assert recon_impl.RECONSTRUCTION_TERM_NAMES == terms.TERM_NAMES
    assert recon_impl.DIAGNOSTIC_NAMES == terms.DIAGNOSTIC_NAMES
    assert recon_impl.RECONSTRUCTION_LOSS_NAMES == terms.LOSS_NAMES
    bundle = [f.name for f in dataclasses.fields(recon_impl.ReconstructionLosses)]
    assert bundle == list(terms.LOSS_NAMES)
    config = [f.name for f in dataclasses.fields(recon_impl.ReconstructionLossConfig)]
    assert config[: len(terms.TERMS)] == list(terms.WEIGHT_FIELDS)
    assert set(CONFIG_FIELDS.values()) == set(config)
    for term in terms.TERMS:
        assert RECONSTRUCTION_FLAGS[term.flag][0] == term.weight_field
    parser = argparse.ArgumentParser()
    recon_impl.add_reconstruction_loss_arguments(parser)
    for term in terms.TERMS:
        assert getattr(parser.parse_args([term.flag, "0.5"]), term.weight_field) == 0.5


def test_the_registry_latex_is_the_notation_of_math_md() -> None:
    assert symbols.latex(terms.RAW.symbol) == r"R_{\mathrm{raw}}"
    assert symbols.latex(terms.CC.weight * terms.CC.symbol) == (r"R_{\mathrm{cc}} w_{\mathrm{cc}}")
    assert isinstance(terms.TOTAL.symbol, sp.Symbol)


def test_distinct_weights_weight_every_term_differently_or_say_why_not() -> None:
    weights = terms.distinct_weights((3.0, 2.0, 1.0, 0.5, 0.25, 0.125, 4.0, 5.0))
    assert list(weights) == list(terms.WEIGHT_FIELDS)
    assert len(set(weights.values())) == len(weights) and 0 not in weights.values()
    count = len(terms.WEIGHT_FIELDS)
    for values in (
        tuple(float(v + 1) for v in range(count - 1)),  # one short
        (1.0,) * count,  # not distinct
        tuple(float(v) for v in range(count)),  # a zero
    ):
        with pytest.raises(ValueError, match=r"values: .* distinct non-zero weights"):
            terms.distinct_weights(values)
