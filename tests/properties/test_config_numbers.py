"""What a config's number fields may do with numbers of other types (docs/API.md, "Number
types"), one value at a time: each correct choice is accepted by ``config-number-types`` or
``config-rejects-invalid`` on its own, and each defect is rejected, by the check functions
themselves (``test_api_zoo.py`` runs the whole invariants)."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from typing import Any

import numpy
import pytest
import torch

from properties.api.config import check_other_numbers, check_rejects_invalid
from properties.api.probe import ApiProbe
from properties.api.strategies import InvalidValue, OtherNumber
from properties.invariant import InvariantViolation
from properties.zoo.api import seed_dataclasses
from properties.zoo.api.correct import api
from spec.api import (
    DISENTANGLEMENT_CONFIG,
    DISENTANGLEMENT_FIELDS,
    RECONSTRUCTION_CONFIG,
    RECONSTRUCTION_FIELDS,
)
from spec.parameters import C

#: the first weight of each config
WEIGHT = RECONSTRUCTION_FIELDS[0].name
BETA = next(f.name for f in DISENTANGLEMENT_FIELDS if f.rule == "non-negative")
HUGE = 10**400


def number(module: Any, value: Any, class_name: str = RECONSTRUCTION_CONFIG) -> None:
    """``config-number-types``'s check of ``value`` given to a weight of ``class_name``."""
    field_name = WEIGHT if class_name == RECONSTRUCTION_CONFIG else BETA
    check_other_numbers(ApiProbe(module), OtherNumber(class_name, field_name, value))


def invalid(module: Any, value: Any, field_name: str = WEIGHT) -> None:
    """``config-rejects-invalid``'s check of ``value`` given to a reconstruction field."""
    drawn = InvalidValue(RECONSTRUCTION_CONFIG, field_name, value, "refused")
    check_rejects_invalid(ApiProbe(module), drawn)


@pytest.mark.parametrize("class_name", [RECONSTRUCTION_CONFIG, DISENTANGLEMENT_CONFIG])
def test_an_int_stored_as_the_int_it_is_is_accepted(class_name) -> None:
    # seed 001's float field takes an int: raw_weight=1 may hold the int 1 (plain JSON)
    for module in (api(choice="ints-stored-as-given"), seed_dataclasses):
        config = module.ReconstructionLossConfig(**{WEIGHT: 1})
        assert type(getattr(config, WEIGHT)) is int
        number(module, 1, class_name)
    number(api(), 1, class_name)  # or as the float it equals


@pytest.mark.parametrize(
    "value", [numpy.float32(0.5), numpy.int64(2), numpy.float16(7.25), torch.tensor(0.5)]
)
def test_another_type_of_number_refused_with_a_value_error_naming_the_field_is_accepted(
    value,
) -> None:
    refusing = api(choice="numpy-scalars-refused")
    with pytest.raises(ValueError, match=WEIGHT):
        refusing.ReconstructionLossConfig(**{WEIGHT: value})
    number(refusing, value)
    number(seed_dataclasses, value)
    # or stored as the plain number it equals
    converting = api(choice="tensors-accepted")
    assert type(getattr(converting.ReconstructionLossConfig(**{WEIGHT: value}), WEIGHT)) is float
    number(converting, value)


def test_the_configs_written_from_the_seed_keep_what_they_are_given() -> None:
    config = seed_dataclasses.DisentanglementLossConfig(
        reconstruction=seed_dataclasses.ReconstructionLossConfig(**{WEIGHT: 1}), beta=2
    )
    assert json.loads(json.dumps(asdict(config)))[BETA] == 2


@pytest.mark.parametrize(
    ("mistake", "value", "says"),
    [
        ("numbers-stored-as-given", numpy.float32(0.5), "stored as numpy.float32(0.5)"),
        ("numbers-stored-as-given", numpy.int64(3), "stored as numpy.int64(3)"),
        ("tensors-stored-as-given", torch.tensor(0.5), "stored as torch.tensor(0.5)"),
        ("numbers-refused-with-type-error", numpy.float32(0.5), "refused with TypeError"),
    ],
)
def test_a_number_stored_as_given_or_refused_with_another_error_is_rejected(
    mistake, value, says
) -> None:
    with pytest.raises(InvariantViolation, match=re.escape(says)):
        number(api(mistake), value)


def test_a_numpy_or_tensor_bool_accepted_as_a_number_is_rejected() -> None:
    converting = api("float-conversion-validation")  # float(numpy.True_) is 1.0
    for value in (numpy.True_, torch.tensor(True)):
        with pytest.raises(InvariantViolation, match="accepted"):
            invalid(converting, value)
        invalid(api(), value)
        invalid(seed_dataclasses, value)


def test_a_refused_number_must_name_its_field() -> None:
    unnamed = api("error-without-field-name")  # ValueError('invalid config')
    with pytest.raises(InvariantViolation, match=f"must name {WEIGHT}"):
        invalid(unnamed, numpy.True_)


def test_an_integer_too_large_for_a_float_is_refused_by_either_error() -> None:
    # math.isfinite(10**400) raises OverflowError: Python's own refusal, at construction
    with pytest.raises(OverflowError):
        seed_dataclasses.ReconstructionLossConfig(**{WEIGHT: HUGE})
    for field_name in (WEIGHT, C.field):
        for value in (HUGE, -HUGE):
            invalid(seed_dataclasses, value, field_name)
            invalid(api(), value, field_name)  # a ValueError naming the field
    # accepted, it is an int that no float weight holds
    with pytest.raises(InvariantViolation, match="accepted"):
        invalid(api("sign-only-validation"), HUGE)


def test_an_overflow_error_refuses_only_an_integer_too_large_for_a_float() -> None:
    class Overflowing:
        """A config whose validation raises OverflowError for every value."""

        def __init__(self, **values: Any) -> None:
            raise OverflowError("math range error")

    module = type("module", (), {RECONSTRUCTION_CONFIG: Overflowing})
    invalid(module, HUGE)
    with pytest.raises(InvariantViolation, match="expected a ValueError naming"):
        invalid(module, float("nan"))
