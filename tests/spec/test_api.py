"""The API facts of seed 001 (``spec/api.py``): they derive from the term registry where
they can, and ``recon_impl`` (which imports nothing of the spec) writes down the same."""

from __future__ import annotations

import argparse
import dataclasses
import doctest

import recon_impl
import spec.api
from recon_impl.total_loss import AUXILIARY_TERM_NAMES, auxiliary_term_weights
from recon_impl.trainer_flags import RECONSTRUCTION_FLAGS, REMOVED_FLAGS
from spec import api, terms
from spec.parameters import PARAMETERS


def test_docstring_examples() -> None:
    failures, tried = doctest.testmod(spec.api, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failures == 0


def test_the_weight_fields_and_flags_come_from_the_term_registry() -> None:
    fields = api.RECONSTRUCTION_FIELDS
    weights = fields[: len(terms.TERMS)]
    assert [f.name for f in weights] == list(terms.WEIGHT_FIELDS)
    assert [f.flag for f in weights] == [term.flag for term in terms.TERMS]
    assert list(api.FLAGS.values()) == [f.name for f in fields if f.flag]
    # the weights', and those of the parameters that have one (alpha's and epsilon's)
    assert len(api.FLAGS) == len(terms.TERMS) + sum(p.flag is not None for p in PARAMETERS)
    assert terms.DIST.flag == api.REPLACEMENT_FLAG
    assert api.BUNDLE_NAMES[: len(terms.LOSS_NAMES)] == terms.LOSS_NAMES


def test_recon_impl_writes_the_same_classes_defaults_and_flags() -> None:
    for cls, expected in (
        (recon_impl.ReconstructionLossConfig, api.RECONSTRUCTION_FIELDS),
        (recon_impl.DisentanglementLossConfig, api.DISENTANGLEMENT_FIELDS),
    ):
        declared = dataclasses.fields(cls)
        assert [f.name for f in declared] == [f.name for f in expected]
        instance = cls()
        for spec_field in expected:
            if spec_field.rule != "nested":
                assert getattr(instance, spec_field.name) == spec_field.default, spec_field.name
    assert recon_impl.DisentanglementLossConfig().reconstruction == (
        recon_impl.ReconstructionLossConfig()
    )
    assert {flag: name for flag, (name, _) in RECONSTRUCTION_FLAGS.items()} == api.FLAGS
    assert REMOVED_FLAGS == {api.REMOVED_FLAG: api.REPLACEMENT_FLAG}
    assert AUXILIARY_TERM_NAMES == api.AUXILIARY_NAMES
    assert recon_impl.TOTAL_LOSS_NAMES == api.BUNDLE_NAMES
    for switch in (True, False):
        config = recon_impl.DisentanglementLossConfig(
            beta=0.5, router_support_weight=2.0, enable_router_support_loss=switch
        )
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        assert auxiliary_term_weights(config) == api.effective_weights(values)
    parser = argparse.ArgumentParser()
    recon_impl.add_reconstruction_loss_arguments(parser)
    assert set(api.FLAGS) <= set(parser._option_string_actions)
