"""Every case of MATH.md "Errors": a ValueError that names the argument and the rule."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from recon_impl import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    TrainingStep,
    compute_total_loss,
    reconstruction_losses,
)
from tests.impl.configs import NON_NEGATIVE_PARAMETERS, POSITIVE_PARAMETERS, WEIGHT_FIELDS

GOOD_L = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
GOOD_B = torch.tensor([[1.0, 2.0], [0.5, 0.5]])
GOOD_MASK = torch.tensor([[True, True], [True, False]])


def call(l=GOOD_L, b=GOOD_B, mask=GOOD_MASK, config=None):
    return reconstruction_losses(l, b, mask, config or ReconstructionLossConfig())


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"l": torch.ones(4)}, r"token_nll must be 2-D"),
        ({"b": torch.ones(2, 2, 1)}, r"zfree_token_nll must be 2-D"),
        ({"mask": torch.ones(2, dtype=torch.bool)}, r"mask must be 2-D"),
        ({"b": torch.ones(2, 3)}, r"must have the same shape"),
        ({"mask": torch.ones(3, 2, dtype=torch.bool)}, r"must have the same shape"),
        ({"l": torch.ones(2, 2, dtype=torch.long)}, r"token_nll must have a floating dtype"),
        ({"b": torch.ones(2, 2, dtype=torch.int32)}, r"zfree_token_nll must have a floating"),
        ({"mask": torch.ones(2, 2)}, r"mask must be bool or an integer 0/1 tensor"),
        ({"mask": torch.tensor([[1, 2], [0, 1]])}, r"mask must hold only 0 and 1"),
        ({"b": torch.ones(2, 2, device="meta")}, r"must be on the same device"),
        ({"l": [[1.0, 2.0]]}, r"token_nll must be a torch.Tensor"),
        (
            {"config": {"raw_weight": 1.0}},
            r"config must be a recon_impl\.config\.ReconstructionLossConfig, got dict; convert "
            r"it with recon_impl\.ReconstructionLossConfig\(\*\*config\)$",
        ),
    ],
)
def test_bad_tensors(kwargs, pattern) -> None:
    with pytest.raises(ValueError, match=pattern):
        call(**kwargs)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("argument", ["token_nll", "zfree_token_nll"])
def test_non_finite_at_a_valid_position(argument: str, bad: float) -> None:
    tensor = (GOOD_L if argument == "token_nll" else GOOD_B).clone()
    tensor[1, 0] = bad
    kwargs = {"l": tensor} if argument == "token_nll" else {"b": tensor}
    with pytest.raises(ValueError, match=rf"{argument} must be finite .* at \[1, 0\]"):
        call(**kwargs)


def test_negative_surprisal_at_a_valid_position() -> None:
    b = GOOD_B.clone()
    b[0, 1] = -0.25
    for alpha in (0.0, 1.0, 2.5):
        with pytest.raises(ValueError, match=r"zfree_token_nll must be >= 0 .* -0.25 at \[0, 1\]"):
            call(b=b, config=ReconstructionLossConfig(token_weight_alpha=alpha))


def test_negative_surprisal_at_a_padded_position_is_ignored() -> None:
    b = GOOD_B.clone()
    b[1, 1] = -5.0
    call(b=b)


@pytest.mark.parametrize("mask", [torch.zeros(2, 2, dtype=torch.bool), torch.zeros(0, 2).bool()])
def test_no_valid_token(mask) -> None:
    shape = mask.shape
    with pytest.raises(ValueError, match=r"mask must select at least one valid token"):
        call(l=torch.ones(shape), b=torch.ones(shape), mask=mask)


def test_epsilon_zero_with_a_zero_surprisal_example() -> None:
    b = torch.tensor([[1.0, 2.0], [0.0, 7.0]])  # example 1: its only valid b is 0
    config = ReconstructionLossConfig(example_inverse_surprisal_epsilon=0.0)
    with pytest.raises(ValueError, match=r"example_inverse_surprisal_epsilon = 0 .* example 1"):
        call(b=b, config=config)
    # a positive epsilon makes it well defined
    call(b=b, config=ReconstructionLossConfig(example_inverse_surprisal_epsilon=1e-3))


@pytest.mark.parametrize("argument", ["token_nll", "zfree_token_nll"])
def test_a_sum_that_overflows_the_compute_dtype_is_an_error(argument: str) -> None:
    # finite float32 values whose per-example sum overflows float32: their mean (3e38)
    # cannot be computed in float32, and the checks say so rather than return inf
    big, ones, mask = torch.full((1, 2), 3e38), torch.ones(1, 2), torch.ones(1, 2).bool()
    l, b = (big, ones) if argument == "token_nll" else (ones, big)
    with pytest.raises(ValueError, match=rf"{argument} is too large .* float32 .* example 0"):
        call(l=l, b=b, mask=mask)
    # without the checks the overflow shows as inf or NaN, never as an error
    out = reconstruction_losses(l, b, mask, ReconstructionLossConfig(), validate=False)
    assert not all(math.isfinite(v.item()) for v in out.values())


@pytest.mark.parametrize("field", [*WEIGHT_FIELDS, *NON_NEGATIVE_PARAMETERS])
@pytest.mark.parametrize(
    ("value", "rule"),
    [(-1.0, ">= 0"), (math.nan, "finite"), (math.inf, "finite"), (-math.inf, "finite")],
)
def test_config_rejects_non_finite_or_negative(field: str, value: float, rule: str) -> None:
    with pytest.raises(ValueError, match=rf"ReconstructionLossConfig\.{field} must be {rule}"):
        ReconstructionLossConfig(**{field: value})


@pytest.mark.parametrize("field", POSITIVE_PARAMETERS)  # the reference scale c
@pytest.mark.parametrize(
    ("value", "rule"), [(0.0, "> 0"), (-2.0, "> 0"), (math.nan, "finite"), (math.inf, "finite")]
)
def test_config_rejects_bad_reference_scale(field: str, value: float, rule: str) -> None:
    with pytest.raises(ValueError, match=rf"ReconstructionLossConfig\.{field} must be {rule}"):
        ReconstructionLossConfig(**{field: value})


@pytest.mark.parametrize("value", [True, "1.0", None, 1j])
def test_config_rejects_non_numbers(value) -> None:
    with pytest.raises(ValueError, match=r"raw_weight must be a real number"):
        ReconstructionLossConfig(raw_weight=value)


def test_disentanglement_config_rejects_bad_fields() -> None:
    with pytest.raises(ValueError, match=r"DisentanglementLossConfig\.beta must be >= 0"):
        DisentanglementLossConfig(beta=-1.0)
    with pytest.raises(ValueError, match=r"posterior_entropy_weight must be finite"):
        DisentanglementLossConfig(posterior_entropy_weight=math.nan)
    with pytest.raises(ValueError, match=r"reconstruction must be a recon_impl\.config\.Recons"):
        DisentanglementLossConfig(reconstruction={"raw_weight": 1.0})
    with pytest.raises(ValueError, match=r"enable_router_support_loss must be a bool"):
        DisentanglementLossConfig(enable_router_support_loss=1)


#: another package's config record with recon_impl's class name and fields, as the
#: conformance suite's properties.config.ReconstructionLossConfig (not imported here)
ForeignReconstructionLossConfig = dataclasses.make_dataclass(
    "ReconstructionLossConfig",
    [
        (f.name, float, dataclasses.field(default=f.default))
        for f in dataclasses.fields(ReconstructionLossConfig)
    ],
    frozen=True,
)
ForeignReconstructionLossConfig.__module__ = "elsewhere.config"
#: the same for the total loss's config, holding the foreign record
ForeignDisentanglementLossConfig = dataclasses.make_dataclass(
    "DisentanglementLossConfig",
    [
        (f.name, object, dataclasses.field(default=getattr(DisentanglementLossConfig(), f.name)))
        for f in dataclasses.fields(DisentanglementLossConfig)
        if f.name != "reconstruction"
    ]
    + [("reconstruction", object, dataclasses.field(default=None))],
)
ForeignDisentanglementLossConfig.__module__ = "elsewhere.config"


def test_a_config_of_another_class_of_the_same_name_names_both_modules() -> None:
    foreign = ForeignReconstructionLossConfig(raw_weight=2.0, token_weight_alpha=0.5)
    expected = (
        "config must be a recon_impl.config.ReconstructionLossConfig, got "
        "elsewhere.config.ReconstructionLossConfig (another class of the same name); convert "
        "it with recon_impl.ReconstructionLossConfig(**dataclasses.asdict(config))"
    )
    with pytest.raises(ValueError) as error:
        call(config=foreign)
    assert str(error.value) == expected
    # the conversion the message gives works and keeps every value
    converted = ReconstructionLossConfig(**dataclasses.asdict(foreign))
    assert dataclasses.asdict(converted) == dataclasses.asdict(foreign)
    with pytest.raises(ValueError) as error:
        DisentanglementLossConfig(reconstruction=foreign)
    assert str(error.value) == expected.replace(
        "config must", "DisentanglementLossConfig.reconstruction must"
    ).replace("asdict(config)", "asdict(reconstruction)")


@pytest.mark.parametrize(
    "use",
    [lambda c: compute_total_loss(GOOD_L, GOOD_B, GOOD_MASK, c), lambda c: TrainingStep(c, [1])],
)
def test_a_total_loss_config_of_another_class_names_both_modules(use) -> None:
    foreign = ForeignDisentanglementLossConfig(
        reconstruction=ForeignReconstructionLossConfig(), enable_router_support_loss=False
    )
    # no conversion is offered: dataclasses.asdict turns the nested config into a dict
    expected = (
        "config must be a recon_impl.config.DisentanglementLossConfig, got "
        "elsewhere.config.DisentanglementLossConfig (another class of the same name)"
    )
    with pytest.raises(ValueError) as error:
        use(foreign)
    assert str(error.value) == expected


RECONSTRUCTION_FIELDS = [f.name for f in dataclasses.fields(ReconstructionLossConfig)]
# the numbers of DisentanglementLossConfig (not the nested config, not the bool switch)
DISENTANGLEMENT_FIELDS = [
    f.name for f in dataclasses.fields(DisentanglementLossConfig) if f.type == "float"
]


@pytest.mark.parametrize(
    "value", [10**400, -(10**400), Fraction(10**400, 3)], ids=["1e400", "-1e400", "fraction"]
)
@pytest.mark.parametrize(
    ("owner", "field"),
    [(ReconstructionLossConfig, f) for f in RECONSTRUCTION_FIELDS]
    + [(DisentanglementLossConfig, f) for f in DISENTANGLEMENT_FIELDS],
)
def test_config_rejects_a_number_too_large_for_a_float(owner, field: str, value) -> None:
    # float() of these raises OverflowError; the config names the field instead
    with pytest.raises(ValueError, match=rf"{owner.__name__}\.{field} must be finite"):
        owner(**{field: value})


@pytest.mark.parametrize("field", RECONSTRUCTION_FIELDS)
def test_config_takes_numbers_that_convert_to_finite_floats(field: str) -> None:
    for value, expected in [
        (np.float32(0.5), 0.5),
        (np.float64(2.0), 2.0),
        (np.int64(3), 3.0),
        (Fraction(1, 4), 0.25),
        (10**300, 1e300),
    ]:
        stored = getattr(ReconstructionLossConfig(**{field: value}), field)
        assert stored == expected and type(stored) is float
    for value in (np.float64("nan"), np.float32("inf"), np.True_):
        with pytest.raises(ValueError, match=rf"ReconstructionLossConfig\.{field} must be"):
            ReconstructionLossConfig(**{field: value})
