"""The seven trainer flags: defaults, round trip, usage errors, the removed flag."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from recon_impl import (
    ReconstructionLossConfig,
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
)
from recon_impl.trainer_flags import RECONSTRUCTION_FLAGS

FLAGS = {
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


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="train", exit_on_error=True)
    add_reconstruction_loss_arguments(parser)
    return parser


def test_exactly_the_seven_flags_of_the_design() -> None:
    assert {flag: name for flag, (name, _) in RECONSTRUCTION_FLAGS.items()} == FLAGS


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
    # the scale has no flag: it comes from the base config
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
    for flag in FLAGS:
        assert flag in text
    assert "weight on token_weighted_reconstruction_loss" in text
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


def test_removed_flag_names_its_replacement(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(["--normalize-reconstruction-loss"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--normalize-reconstruction-loss was removed" in err
    assert "--distribution-normalized-reconstruction-weight" in err
