"""Two real processes in a gloo group on the CPU: the estimator and DDP against one process.

One test spawns two ranks (``multiprocessing`` "spawn", rendezvous through a file in
``tmp_path``); each rank estimates c from its own shard of batches and trains a DDP model on
its own micro-batches (once with ``weighted_shard_losses`` by hand, once with
``TrainingStep`` through ``compute_total_loss`` with every auxiliary term), and writes what
it saw to a file; the parent compares every rank with a single process that holds the
union. A rank that hangs in a collective fails the test after ``TIMEOUT_S`` instead of
blocking CI.
"""

from __future__ import annotations

import contextlib
import math
import pickle
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from properties.tolerances import output_tolerance
from recon_impl import (
    AUXILIARY_TERM_NAMES,
    RECONSTRUCTION_LOSS_NAMES,
    TOTAL_LOSS_NAMES,
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    TrainingStep,
    compute_total_loss,
    estimate_zfree_reference_scale,
    kept_example_count,
    reconstruction_losses,
    shard_weights,
    weighted_shard_losses,
)
from recon_impl.distributed import collective_device, process_group_in_use
from tests.impl.configs import distinct_weights, with_parameters
from tests.impl.test_zfree_reference_scale import Terminal, exact_scale, random_batches

pytestmark = pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(), reason="needs the gloo backend"
)

WORLD_SIZE = 2
TIMEOUT_S = 180.0  # a whole two-rank run; a healthy one takes 10 to 20 s on two CPU cores
NAN = math.nan


def run_ranks(tmp_path: Path, worker: Callable[[int], Any]) -> list[Any]:
    """Run ``worker(rank)`` in ``WORLD_SIZE`` spawned processes; return their results."""
    context = mp.get_context("spawn")
    init_method = (tmp_path / "rendezvous").as_uri()
    processes = [
        context.Process(
            target=_rank_main, args=(worker, rank, init_method, str(tmp_path)), daemon=True
        )
        for rank in range(WORLD_SIZE)
    ]
    for process in processes:
        process.start()
    deadline = time.monotonic() + TIMEOUT_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    hung = [rank for rank, process in enumerate(processes) if process.is_alive()]
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join()
    if hung:
        pytest.fail(f"rank(s) {hung} still running after {TIMEOUT_S:.0f} s: a collective hung")
    results = []
    for rank, process in enumerate(processes):
        error = tmp_path / f"rank{rank}.error"
        if error.exists():
            pytest.fail(f"rank {rank} failed:\n{error.read_text()}")
        assert process.exitcode == 0, f"rank {rank} exited with {process.exitcode}"
        results.append(pickle.loads((tmp_path / f"rank{rank}.pickle").read_bytes()))
    return results


def _rank_main(worker, rank: int, init_method: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    out = Path(out_dir)
    try:
        dist.init_process_group(
            "gloo",
            init_method=init_method,
            rank=rank,
            world_size=WORLD_SIZE,
            timeout=timedelta(seconds=90),
        )
        try:
            result = worker(rank)
        finally:
            dist.destroy_process_group()
        (out / f"rank{rank}.pickle").write_bytes(pickle.dumps(result))
    except BaseException:
        (out / f"rank{rank}.error").write_text(traceback.format_exc())
        sys.exit(1)


# --- the estimator ------------------------------------------------------------------------


def estimator_shards() -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Rank 0 streams eight batches, rank 1 four, of different sizes, lengths and masks."""
    return [random_batches(20, count=7), random_batches(21, count=3)]


NO_ERROR = "no error was raised"


def _error_of(call: Callable[[], Any]) -> str:
    try:
        call()
    except ValueError as error:
        return str(error)
    return NO_ERROR


def _estimator_worker(rank: int) -> dict[str, Any]:
    shard = estimator_shards()[rank]
    padding_only = [(torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.bool))]
    bad = [
        (torch.ones(1, 2), torch.ones(1, 2).bool()),
        (torch.tensor([[NAN]]), torch.ones(1, 1).bool()),
    ]
    group = dist.new_group(list(range(WORLD_SIZE)))
    terminal, stderr = Terminal(), sys.stderr
    sys.stderr = terminal  # both ranks on a terminal: only rank 0 draws
    try:
        estimate_zfree_reference_scale(shard)
    finally:
        sys.stderr = stderr
    return {
        "progress": terminal.getvalue(),
        "default group": estimate_zfree_reference_scale(shard),
        "explicit group, a generator": estimate_zfree_reference_scale(iter(shard), group=group),
        "rank 1 streams nothing": estimate_zfree_reference_scale(shard if rank == 0 else []),
        "no valid token on any rank": _error_of(
            lambda: estimate_zfree_reference_scale(padding_only)
        ),
        "rank 1 has a bad batch": _error_of(
            lambda: estimate_zfree_reference_scale(shard if rank == 0 else bad)
        ),
        "after the errors": estimate_zfree_reference_scale(shard),
    }


def check_estimator(results: list[dict[str, Any]]) -> None:
    """Every rank's estimate is the single-process estimate of the union, and errors reach
    every rank."""
    shards = estimator_shards()
    union = [batch for shard in shards for batch in shard]
    single = estimate_zfree_reference_scale(union)
    exact = float(exact_scale(union))
    tolerance = output_tolerance(torch.float64, length=12, alpha=0.0)
    assert tolerance.allows(single, exact, exact)

    for name in ("default group", "explicit group, a generator", "after the errors"):
        values = [result[name] for result in results]
        assert values[0] == values[1], f"{name}: the ranks disagree: {values}"
        assert tolerance.allows(values[0], single, single), f"{name}: {values[0]} != {single}"
        assert tolerance.allows(values[0], exact, exact), f"{name}: {values[0]} != {exact}"
    only_rank_0 = estimate_zfree_reference_scale(shards[0])
    for result in results:
        observed = result["rank 1 streams nothing"]
        assert tolerance.allows(observed, only_rank_0, only_rank_0)
        assert result["no valid token on any rank"].startswith(
            "the union of all ranks' batches must hold at least one valid token"
        )
    assert "8/8 batches (100%)" in results[0]["progress"] and results[1]["progress"] == ""
    assert results[0]["rank 1 has a bad batch"].startswith("1 other rank(s) of the process group")
    assert results[1]["rank 1 has a bad batch"].startswith(
        "batch 1: zfree_token_nll must be finite at every position where mask is True"
    )


# --- data parallel training ---------------------------------------------------------------

CONFIG = ReconstructionLossConfig(
    **distinct_weights((0.5, 1.5, 0.75, 2.0, 1.25, 0.625, 2.5, 0.375)),
    **with_parameters(
        token_weight_alpha=1.5, example_inverse_surprisal_epsilon=0.05, zfree_reference_scale=1.7
    ),
)


class TokenLossModel(torch.nn.Module):
    """token_nll = exp(log_scale) * x + shift^2 * y: two parameters, each of whose
    gradients is a sum of same-signed parts (x, y >= 0), so no cancellation is blamed."""

    def __init__(self) -> None:
        super().__init__()
        self.log_scale = torch.nn.Parameter(torch.tensor(0.3, dtype=torch.float64))
        self.shift = torch.nn.Parameter(torch.tensor(-0.7, dtype=torch.float64))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.log_scale.exp() * x + self.shift.square() * y


def micro_batch(seed: int, rows: int, length: int, *, empty_rows: int = 0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(rows, length, generator=generator, dtype=torch.float64) * 3
    y = torch.rand(rows, length, generator=generator, dtype=torch.float64)
    b = torch.rand(rows, length, generator=generator, dtype=torch.float64) * 4
    mask = torch.rand(rows, length, generator=generator) < 0.6
    mask[:, 0] = True
    mask[rows - empty_rows :] = False
    return x, y, torch.where(mask, b, NAN), mask


def ddp_steps() -> list[list[list[tuple[torch.Tensor, ...]]]]:
    """Per step, per rank, the micro-batches: different lengths, empty rows, and shards
    with no kept example (the second step: rank 1 holds nothing but padding)."""
    return [
        [
            [micro_batch(0, 3, 5), micro_batch(1, 4, 9, empty_rows=2)],
            [micro_batch(2, 2, 3), micro_batch(3, 2, 6, empty_rows=2)],
        ],
        [[micro_batch(4, 5, 7)], [micro_batch(5, 3, 4, empty_rows=3)]],
    ]


def _ddp_worker(rank: int) -> list[dict[str, Any]]:
    model = torch.nn.parallel.DistributedDataParallel(TokenLossModel())
    out = []
    for step in ddp_steps():
        model.zero_grad(set_to_none=True)
        micro_batches = step[rank]
        weights = shard_weights([kept_example_count(mask) for *_, mask in micro_batches])
        logged = torch.zeros(len(RECONSTRUCTION_LOSS_NAMES), dtype=torch.float64)
        for k, ((x, y, b, mask), weight) in enumerate(zip(micro_batches, weights, strict=True)):
            last = k == len(micro_batches) - 1
            with contextlib.nullcontext() if last else model.no_sync():
                parts = weighted_shard_losses(model(x, y), b, mask, CONFIG, weight=weight)
                # DDP averages gradients over the ranks: undo it.
                (WORLD_SIZE * parts["total_reconstruction_loss"]).backward()
            logged += torch.stack([parts[name].detach() for name in RECONSTRUCTION_LOSS_NAMES])
        dist.all_reduce(logged)
        out.append(
            {
                "weights": weights,
                "gradients": {n: p.grad.item() for n, p in model.module.named_parameters()},
                "logged": dict(zip(RECONSTRUCTION_LOSS_NAMES, logged.tolist(), strict=True)),
            }
        )
    return out


def full_batch(step) -> tuple[dict[str, float], dict[str, float]]:
    """Gradients and values of one process on the union of every rank's micro-batches."""
    micro_batches = [batch for rank in step for batch in rank]
    length = max(x.shape[1] for x, *_ in micro_batches)

    def cat(index: int, value) -> torch.Tensor:
        return torch.cat(
            [
                torch.nn.functional.pad(
                    batch[index], (0, length - batch[index].shape[1]), value=value
                )
                for batch in micro_batches
            ]
        )

    model = TokenLossModel()
    x, y, b, mask = cat(0, 0.0), cat(1, 0.0), cat(2, NAN), cat(3, False)
    losses = reconstruction_losses(model(x, y), b, mask, CONFIG)
    losses.total_reconstruction_loss.backward()
    gradients = {name: p.grad.item() for name, p in model.named_parameters()}
    return gradients, {name: value.item() for name, value in losses.items()}


def check_ddp(results: list[list[dict[str, Any]]]) -> None:
    """DDP with kept-example weights gives the full-batch gradient and values."""
    tolerance = output_tolerance(torch.float64, length=9, alpha=CONFIG.token_weight_alpha)
    for index, step in enumerate(ddp_steps()):
        gradients, values = full_batch(step)
        per_rank = [result[index] for result in results]
        assert math.isclose(sum(w for r in per_rank for w in r["weights"]), 1.0)
        assert per_rank[0]["gradients"] == per_rank[1]["gradients"]
        for name, expected in gradients.items():
            observed = per_rank[0]["gradients"][name]
            assert tolerance.allows(observed, expected, expected), (index, name, observed)
        for rank_result in per_rank:
            for name, expected in values.items():
                observed = rank_result["logged"][name]
                assert tolerance.allows(observed, expected, expected), (index, name, observed)
    assert results[1][1]["weights"] == [0.0]  # a rank of padding only took part with weight 0


# --- data parallel training through compute_total_loss: TrainingStep ----------------------

TOTAL_CONFIG = DisentanglementLossConfig(
    reconstruction=CONFIG,
    beta=0.5,
    router_support_weight=0.25,
    posterior_entropy_weight=0.125,
    posterior_variance_weight=0.75,
    router_marginal_kl_to_prior_weight=1.5,
    router_supervision_weight=2.0,
    inter_latent_divergence_weight=0.375,
)


class LatentTokenLossModel(TokenLossModel):
    """TokenLossModel, plus auxiliary term j of example i = exp(a_j) f_ij, averaged over the
    micro-batch's kept examples (NaN for a micro-batch without one; gradient 0 there)."""

    def __init__(self) -> None:
        super().__init__()
        self.aux_log_scale = torch.nn.Parameter(
            torch.linspace(-0.5, 0.5, len(AUXILIARY_TERM_NAMES), dtype=torch.float64)
        )

    def forward(self, x, y, features, mask):
        kept = mask.any(dim=1)
        terms = (features[kept] * self.aux_log_scale.exp()).mean(dim=0)
        return super().forward(x, y), dict(zip(AUXILIARY_TERM_NAMES, terms.unbind(), strict=True))


def features_of(batch) -> torch.Tensor:
    """Per-example auxiliary features of a micro-batch, drawn from its values."""
    x, _, _, mask = batch
    seed = int(x.nansum().item() * 1000) + mask.shape[0]
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(mask.shape[0], len(AUXILIARY_TERM_NAMES), generator=generator).double()


def _training_step_worker(rank: int) -> list[dict[str, Any]]:
    model = torch.nn.parallel.DistributedDataParallel(LatentTokenLossModel())
    out = []
    for step_batches in ddp_steps():
        model.zero_grad(set_to_none=True)
        micro_batches = step_batches[rank]
        step = TrainingStep(TOTAL_CONFIG, [kept_example_count(mask) for *_, mask in micro_batches])
        for batch in micro_batches:
            x, y, b, mask = batch
            with step.gradient_sync(model):
                token_nll, aux = model(x, y, features_of(batch), mask)
                step.backward(token_nll, b, mask, **aux)
        out.append(
            {
                "weights": step.weights,
                "gradients": {
                    n: p.grad.flatten().tolist() for n, p in model.module.named_parameters()
                },
                "logged": step.log(prefix="train/"),
            }
        )
    return out


def full_batch_total(step) -> tuple[dict[str, list[float]], dict[str, float]]:
    """compute_total_loss of one process on the union of every rank's micro-batches."""
    micro_batches = [batch for rank in step for batch in rank]
    length = max(x.shape[1] for x, *_ in micro_batches)

    def cat(index: int, value) -> torch.Tensor:
        return torch.cat(
            [
                torch.nn.functional.pad(
                    batch[index], (0, length - batch[index].shape[1]), value=value
                )
                for batch in micro_batches
            ]
        )

    model = LatentTokenLossModel()
    x, y, b, mask = cat(0, 0.0), cat(1, 0.0), cat(2, NAN), cat(3, False)
    features = torch.cat([features_of(batch) for batch in micro_batches])
    token_nll, aux = model(x, y, features, mask)
    out = compute_total_loss(token_nll, b, mask, TOTAL_CONFIG, **aux)
    out["total_loss"].backward()
    gradients = {name: p.grad.flatten().tolist() for name, p in model.named_parameters()}
    return gradients, {name: value.item() for name, value in out.items()}


def check_training_step(results: list[list[dict[str, Any]]]) -> None:
    """DDP through TrainingStep gives the full-batch gradient and values of the total loss,
    the same on both ranks, with a rank of padding only in the second step."""
    tolerance = output_tolerance(torch.float64, length=9, alpha=CONFIG.token_weight_alpha)
    for index, step in enumerate(ddp_steps()):
        gradients, values = full_batch_total(step)
        per_rank = [result[index] for result in results]
        assert math.isclose(sum(w for r in per_rank for w in r["weights"]), 1.0)
        assert per_rank[0]["gradients"] == per_rank[1]["gradients"]
        assert per_rank[0]["logged"] == per_rank[1]["logged"]
        for name, expected in gradients.items():
            for observed, wanted in zip(per_rank[0]["gradients"][name], expected, strict=True):
                assert tolerance.allows(observed, wanted, wanted), (index, name, observed)
        logged = per_rank[0]["logged"]
        assert list(logged) == [f"train/{name}" for name in TOTAL_LOSS_NAMES]
        for name, expected in values.items():
            observed = logged[f"train/{name}"]
            assert tolerance.allows(observed, expected, expected), (index, name, observed)
    assert results[1][1]["weights"] == [0.0]


# --- the two ranks, spawned once for all checks -------------------------------------------


def _partial_term_worker(rank: int) -> str:
    """Rank 0 gives posterior_entropy (weight 0), rank 1 does not: log() fails on both."""
    config = DisentanglementLossConfig(enable_router_support_loss=False, beta=0.0)
    x, _, b, mask = micro_batch(rank, 2, 3)
    step = TrainingStep(config, [kept_example_count(mask)])
    token_nll = x.clone().requires_grad_()
    extra = {"posterior_entropy": torch.tensor(0.5)} if rank == 0 else {}
    step.backward(token_nll, b, mask, **extra)
    return _error_of(step.log)


def _two_rank_worker(rank: int) -> dict[str, Any]:
    return {
        "estimator": _estimator_worker(rank),
        "ddp": _ddp_worker(rank),
        "training step": _training_step_worker(rank),
        "a term on one rank only": _partial_term_worker(rank),
    }


@pytest.mark.heavy
@pytest.mark.slow
def test_two_ranks_match_one_process_holding_the_union(tmp_path: Path) -> None:
    # One spawn for all checks: starting the ranks (torch, gloo, DDP) is most of the time.
    results = run_ranks(tmp_path, _two_rank_worker)
    check_estimator([result["estimator"] for result in results])
    check_ddp([result["ddp"] for result in results])
    check_training_step([result["training step"] for result in results])
    for result in results:
        assert "posterior_entropy is given on some ranks" in result["a term on one rank only"]


# --- choosing the group and the device ----------------------------------------------------


def test_single_process_use_reduces_nothing() -> None:
    assert not process_group_in_use(None)
    with pytest.raises(ValueError, match=r"group was given but torch.distributed is not init"):
        process_group_in_use(object())


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        ("gloo", torch.device("cpu")),
        ("mpi", torch.device("cpu")),
        ("nccl", torch.device("cuda", 3)),
        ("cpu:gloo,cuda:nccl", torch.device("cpu")),
    ],
)
def test_collective_device(monkeypatch: pytest.MonkeyPatch, backend: str, expected) -> None:
    monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert collective_device(None) == expected
