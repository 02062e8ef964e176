"""examples/train_causal_lm.py: it runs, logs every value, and splitting a step into
micro-batches or ranks gives the full batch's values.

It needs transformers (the ``examples`` extra); without it these tests are skipped. CI
installs the extra, so nothing is skipped there.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from recon_impl import RECONSTRUCTION_LOSS_NAMES

pytest.importorskip("transformers", reason="the examples extra (transformers) is not installed")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_causal_lm.py"
FAST = ["--reference-steps", "10"]  # the reference's training is not what is tested here
LOGGED = ["step", *RECONSTRUCTION_LOSS_NAMES, "kl", "total_loss", "seconds"]
EPS32 = torch.finfo(torch.float32).eps


def load_example():
    spec = importlib.util.spec_from_file_location("train_causal_lm", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example():
    threads = torch.get_num_threads()  # the example sets its own
    yield load_example()
    torch.set_num_threads(threads)


def read_csv(path: Path) -> list[dict[str, float]]:
    with path.open(newline="") as file:
        return [{name: float(value) for name, value in row.items()} for row in csv.DictReader(file)]


def assert_rows_agree(observed, expected, bound: float, steps) -> None:
    for step in steps:
        for name in (*RECONSTRUCTION_LOSS_NAMES, "kl", "total_loss"):
            a, b = observed[step - 1][name], expected[step - 1][name]
            assert abs(a - b) <= bound * abs(b), f"step {step}, {name}: {a!r} != {b!r}"


@pytest.mark.heavy
def test_three_steps_log_every_value_to_csv(example, tmp_path: Path) -> None:
    out = tmp_path / "log.csv"
    rows = example.main(["--steps", "3", "--out", str(out), *FAST])
    with out.open(newline="") as file:
        header = next(csv.reader(file))
    assert header == LOGGED
    logged = read_csv(out)
    assert [row["step"] for row in logged] == [1.0, 2.0, 3.0]
    for row, returned in zip(logged, rows, strict=True):
        assert all(math.isfinite(value) for value in row.values())
        assert row == pytest.approx({name: float(value) for name, value in returned.items()})
        # the defaults: raw weight 1, beta 0.02, no router
        assert row["total_loss"] == pytest.approx(row["reconstruction_loss"] + 0.02 * row["kl"])


def test_the_measured_scale_and_the_flag_give_the_same_run(example, tmp_path, capsys) -> None:
    measured = example.main(["--steps", "1", *FAST])
    printed = capsys.readouterr().out
    c = float(printed.split("c = ", 1)[1].split()[0])
    assert "--zfree-reference-scale" in printed
    passed = example.main(["--steps", "1", "--zfree-reference-scale", repr(c), *FAST])
    assert "measured over" not in capsys.readouterr().out
    # c is printed to 6 decimals: the normalized term moves by no more than that rounding
    name = "distribution_normalized_reconstruction_loss"
    assert passed[0][name] == pytest.approx(measured[0][name], rel=1e-6)
    assert passed[0]["reconstruction_loss"] == measured[0]["reconstruction_loss"]


@pytest.mark.heavy
def test_micro_batches_give_the_full_batch(example, tmp_path: Path) -> None:
    # Before the first update the parameters are the same, so the first step's values
    # differ only by float32 rounding in batches of other shapes. (Later steps drift by
    # what AdamW makes of gradients that differ in their last bits.)
    common = ["--steps", "1", "--no-autocast", "--batch-size", "11", *FAST]
    full = example.main([*common, "--micro-batches", "1"])
    for micro_batches in ("2", "3"):
        split = example.main([*common, "--micro-batches", micro_batches])
        assert_rows_agree(split, full, 64 * EPS32, steps=[1])


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(), reason="needs the gloo backend"
)
def test_two_ranks_give_what_one_process_with_two_micro_batches_gives(example, tmp_path) -> None:
    # The same chunks of every step: one process with two micro-batches, or two ranks with
    # one each. The computations per chunk are the same, so the logged values agree to the
    # rounding of c (measured over shards batched differently), at every step.
    common = ["--steps", "2", "--batch-size", "10", *FAST]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    ranks_run = subprocess.run(
        [*launch, "--nproc_per_node", "2", str(EXAMPLE), *common, "--micro-batches", "1",
         "--out", str(tmp_path / "ranks.csv")],
        env=env, timeout=300, capture_output=True, text=True,
    )  # fmt: skip
    assert ranks_run.returncode == 0, ranks_run.stdout[-2000:] + ranks_run.stderr[-4000:]
    example.main([*common, "--micro-batches", "2", "--out", str(tmp_path / "one.csv")])
    ranks, one = read_csv(tmp_path / "ranks.csv"), read_csv(tmp_path / "one.csv")
    assert len(ranks) == len(one) == 2
    assert_rows_agree(ranks, one, 64 * EPS32, steps=[1, 2])
