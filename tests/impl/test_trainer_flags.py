"""The trainer flags and the c flag: defaults, round trip, usage errors, the removed flag."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

import spec.api
from recon_impl import (
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
)
from recon_impl.trainer_flags import RECONSTRUCTION_FLAGS, ZFREE_REFERENCE_SCALE_FLAG

#: seed 001's seven flags ("CLI surface"), each with the field it sets
SEED_FLAGS = {
    "--raw-reconstruction-weight": "raw_weight",
    "--distribution-normalized-reconstruction-weight": "distribution_normalized_weight",
    "--example-inverse-surprisal-reconstruction-weight": "example_inverse_surprisal_weight",
    "--token-weighted-reconstruction-weight": "token_weighted_weight",
    "--normalized-concentration-corrected-token-weighted-reconstruction-weight": (
        "normalized_concentration_corrected_token_weighted_weight"
    ),
    "--token-weighted-reconstruction-alpha": "token_weight_alpha",
    "--example-inverse-surprisal-epsilon": "example_inverse_surprisal_epsilon",
}
#: every flag of the registries (the seed's and any a later term or parameter adds)
FLAGS = spec.api.FLAGS


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="train", exit_on_error=True)
    add_reconstruction_loss_arguments(parser)
    return parser


def test_exactly_the_flags_of_the_registries_the_seeds_spelt_as_it_spells_them() -> None:
    assert {flag: name for flag, (name, _) in RECONSTRUCTION_FLAGS.items()} == FLAGS
    assert SEED_FLAGS.items() <= FLAGS.items()


def test_defaults_are_the_dataclass_defaults() -> None:
    assert reconstruction_loss_config_from_args(parser().parse_args([])) == (
        ReconstructionLossConfig()
    )


def test_round_trip() -> None:
    argv, expected = [], {}
    for i, (flag, name) in enumerate(FLAGS.items()):
        argv += [flag, str(0.125 * (i + 1))]
        expected[name] = 0.125 * (i + 1)
    config = reconstruction_loss_config_from_args(parser().parse_args(argv))
    assert {name: getattr(config, name) for name in expected} == expected
    # without its flag, the scale comes from the base config
    base = ReconstructionLossConfig(zfree_reference_scale=2.5)
    config = reconstruction_loss_config_from_args(parser().parse_args(argv), base=base)
    assert config.zfree_reference_scale == 2.5
    assert dataclasses.replace(config, zfree_reference_scale=1.0) == (
        reconstruction_loss_config_from_args(parser().parse_args(argv))
    )


def test_help_says_what_each_flag_weighs(capsys) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in [*FLAGS, "--zfree-reference-scale C"]:
        assert flag in text
    assert "weight on token_weighted_reconstruction_loss" in text
    assert "as estimate_zfree_reference_scale measures it" in text
    assert "--normalize-reconstruction-loss" not in text


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "abc"])
@pytest.mark.parametrize("flag", list(FLAGS))
def test_invalid_value_is_a_usage_error(flag: str, value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args([flag, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: train")
    assert f"argument {flag}" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--normalize-reconstruction-loss"],
        ["--normalize-reconstruction-loss=true"],
        ["--normalize-reconstruction-loss=false"],
        ["--normalize-reconstruction-loss="],
        ["--normalize-reconstruction-loss", "true"],
        ["--normalize-rec"],  # a unique prefix
        ["--normalize-reconstruction=1"],
        ["--raw-reconstruction-weight", "0", "--normalize-reconstruction-loss"],
    ],
)
def test_removed_flag_names_its_replacement(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: train")
    assert "--normalize-reconstruction-loss was removed" in err
    assert "--distribution-normalized-reconstruction-weight" in err


def test_namespace_holds_the_flags_and_nothing_of_the_removed_one() -> None:
    names = {*FLAGS.values(), "zfree_reference_scale"}
    assert set(vars(parser().parse_args([]))) == names
    assert set(vars(parser().parse_args(["--zfree-reference-scale", "2"]))) == names


def test_the_c_flag_passes_the_measured_scale() -> None:
    assert ZFREE_REFERENCE_SCALE_FLAG == "--zfree-reference-scale"
    args = parser().parse_args(["--zfree-reference-scale", "2.65513"])
    assert args.zfree_reference_scale == 2.65513
    assert reconstruction_loss_config_from_args(args).zfree_reference_scale == 2.65513
    # the flag wins over the base config; left out, the base config's c stays
    base = ReconstructionLossConfig(zfree_reference_scale=7.0, raw_weight=0.0)
    assert reconstruction_loss_config_from_args(args, base=base).zfree_reference_scale == 2.65513
    absent = parser().parse_args([])
    assert absent.zfree_reference_scale is None
    assert reconstruction_loss_config_from_args(absent, base=base).zfree_reference_scale == 7.0
    assert reconstruction_loss_config_from_args(absent).zfree_reference_scale == 1.0
    # the other flags keep their defaults beside it
    assert reconstruction_loss_config_from_args(args) == dataclasses.replace(
        ReconstructionLossConfig(), zfree_reference_scale=2.65513
    )


def test_a_namespace_without_the_c_flag_keeps_the_base_scale() -> None:
    args = argparse.Namespace(**{name: 0.5 for name in FLAGS.values()})
    base = ReconstructionLossConfig(zfree_reference_scale=3.0)
    assert reconstruction_loss_config_from_args(args, base=base).zfree_reference_scale == 3.0


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "abc"])
def test_invalid_scale_is_a_usage_error(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(["--zfree-reference-scale", value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --zfree-reference-scale" in err
