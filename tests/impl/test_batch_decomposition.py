"""The batch-decomposition identity: shards weighted by kept examples give the union exactly.

Four shards of different lengths T: one with two empty rows and NaN/inf padding and an
integer mask, one with no kept example at all. The union is their rows padded (with NaN)
to the longest T. Every value, and the gradient of every term, must match the union's to
the project's float64 output tolerance.
"""

from __future__ import annotations

import math

import pytest
import torch

from properties.tolerances import output_tolerance
from recon_impl import (
    DIAGNOSTIC_NAMES,
    RECONSTRUCTION_LOSS_NAMES,
    RECONSTRUCTION_TERM_NAMES,
    ReconstructionLossConfig,
    kept_example_count,
    reconstruction_losses,
    shard_weights,
    weighted_shard_losses,
)
from tests.impl.configs import EVERY_WEIGHT, TERM_WEIGHT_FIELDS, with_parameters
from tests.impl.test_zfree_reference_scale import guide_examples

NAN, INF = math.nan, math.inf
WEIGHT_FIELDS = TERM_WEIGHT_FIELDS
ALL_WEIGHTS = EVERY_WEIGHT


def shard(generator, rows: int, length: int, *, empty_rows: int = 0, integer_mask=False):
    l = torch.rand(rows, length, generator=generator, dtype=torch.float64) * 6 - 1
    b = torch.rand(rows, length, generator=generator, dtype=torch.float64) * 4
    b[torch.rand(rows, length, generator=generator) < 0.1] = 0.0
    mask = torch.rand(rows, length, generator=generator) < 0.6
    mask[:, 0] = True
    mask[rows - empty_rows :] = False
    padding = torch.tensor([NAN, INF, -INF])[
        torch.randint(0, 3, (rows, length), generator=generator)
    ]
    l, b = torch.where(mask, l, padding), torch.where(mask, b, padding)
    return l, b, mask.long() if integer_mask else mask


def shards(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return [
        shard(generator, 3, 5),
        shard(generator, 5, 9, empty_rows=2, integer_mask=True),
        shard(generator, 2, 4, empty_rows=2),  # no kept example
        shard(generator, 1, 7),
    ]


def union(parts):
    length = max(l.shape[1] for l, _, _ in parts)

    def pad(tensor, value):
        return torch.nn.functional.pad(tensor, (0, length - tensor.shape[1]), value=value)

    return (
        torch.cat([pad(l, NAN) for l, _, _ in parts]),
        torch.cat([pad(b, NAN) for _, b, _ in parts]),
        torch.cat([pad(mask.bool(), False) for _, _, mask in parts]),
    )


def config(alpha: float, **weights) -> ReconstructionLossConfig:
    return ReconstructionLossConfig(
        **weights,
        **with_parameters(
            token_weight_alpha=alpha,
            example_inverse_surprisal_epsilon=0.05,
            zfree_reference_scale=1.7,
        ),
    )


def assert_close(observed: float, expected: float, scale: float, alpha: float, what: str):
    tolerance = output_tolerance(torch.float64, length=9, alpha=alpha)
    assert tolerance.allows(observed, expected, scale), f"{what}: {observed!r} != {expected!r}"


def test_kept_example_count() -> None:
    mask = torch.tensor([[1, 0, 0], [0, 0, 0], [0, 1, 1]])
    assert kept_example_count(mask) == 2
    assert kept_example_count(mask.bool()) == 2
    assert kept_example_count(torch.zeros(0, 3, dtype=torch.bool)) == 0
    with pytest.raises(ValueError, match=r"mask must be a 2-D \[B, T\] tensor"):
        kept_example_count(torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask must be bool or an integer 0/1 tensor"):
        kept_example_count(torch.ones(2, 2))


def test_shard_weights() -> None:
    assert shard_weights([3, 0, 1]) == [0.75, 0.0, 0.25]
    assert shard_weights([torch.tensor(2)]) == [1.0]
    with pytest.raises(ValueError, match=r"at least one kept example over all shards"):
        shard_weights([0, 0])
    with pytest.raises(ValueError, match=r"at least one kept example"):
        shard_weights([])
    with pytest.raises(ValueError, match=r"kept_counts\[1\] must be >= 0"):
        shard_weights([1, -1])
    with pytest.raises(
        ValueError, match=r"kept_counts\[0\] must be an integer \(a count of examples\), got bool"
    ):
        shard_weights([True])
    with pytest.raises(
        ValueError, match=r"kept_counts\[0\] must be an integer \(a count of examples\), got float"
    ):
        shard_weights([1.5])
    with pytest.raises(ValueError, match=r"kept_counts must be a sequence of .*, got int 2$"):
        shard_weights(2)
    with pytest.raises(ValueError, match=r"group was given but torch.distributed is not"):
        shard_weights([1], group=object())


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.5])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_value_of_the_union_is_the_kept_example_weighted_sum(seed, alpha) -> None:
    parts = shards(seed)
    cfg = config(alpha, **ALL_WEIGHTS)
    weights = shard_weights([kept_example_count(mask) for _, _, mask in parts])
    assert weights[2] == 0.0 and math.isclose(sum(weights), 1.0)
    weighted = [
        weighted_shard_losses(*part, cfg, weight=w) for part, w in zip(parts, weights, strict=True)
    ]
    expected = reconstruction_losses(*union(parts), cfg)
    l, b, mask = union(parts)
    magnitude = reconstruction_losses(l.abs(), b, mask, cfg)  # |l|: no cancellation blamed
    for name in RECONSTRUCTION_LOSS_NAMES:
        observed = sum(part[name].item() for part in weighted)
        scale = magnitude[name].item()
        assert_close(observed, expected[name].item(), scale, alpha, name)


def test_the_identity_as_mathematics_states_it() -> None:
    # (B'_1 x_1 + B'_2 x_2 + ...) / (B'_1 + B'_2 + ...) over the shards that keep examples.
    parts = [part for part in shards(3) if kept_example_count(part[2]) > 0]
    cfg = config(1.0, **ALL_WEIGHTS)
    counts = [kept_example_count(mask) for _, _, mask in parts]
    values = [reconstruction_losses(*part, cfg) for part in parts]
    expected = reconstruction_losses(*union(parts), cfg)
    for name in (*RECONSTRUCTION_TERM_NAMES, *DIAGNOSTIC_NAMES):
        observed = sum(n * v[name].item() for n, v in zip(counts, values, strict=True)) / sum(
            counts
        )
        assert_close(observed, expected[name].item(), abs(expected[name].item()), 1.0, name)


def test_a_plain_mean_over_shards_is_not_the_union() -> None:
    # Why the weights count kept examples: the shards here keep 3, 3 and 1.
    parts = [part for part in shards(0) if kept_example_count(part[2]) > 0]
    cfg = config(1.0)
    plain = sum(reconstruction_losses(*p, cfg).reconstruction_loss.item() for p in parts) / 3
    expected = reconstruction_losses(*union(parts), cfg).reconstruction_loss.item()
    assert abs(plain - expected) > 1e-3


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.5])
@pytest.mark.parametrize("term", [*RECONSTRUCTION_TERM_NAMES, "every term"])
def test_accumulated_gradients_are_the_union_gradient(term: str, alpha: float) -> None:
    weights = ALL_WEIGHTS if term == "every term" else {"raw_weight": 0.0, WEIGHT_FIELDS[term]: 1.0}
    cfg = config(alpha, **weights)
    parts = [(l.clone().requires_grad_(True), b, mask) for l, b, mask in shards(1)]
    shard_weight = shard_weights([kept_example_count(mask) for _, _, mask in parts])
    for part, weight in zip(parts, shard_weight, strict=True):
        weighted_shard_losses(*part, cfg, weight=weight)["total_reconstruction_loss"].backward()

    l, b, mask = union([(l.detach(), b, mask) for l, b, mask in parts])
    l.requires_grad_(True)
    reconstruction_losses(l, b, mask, cfg).total_reconstruction_loss.backward()
    start = 0
    for shard_l, _, _ in parts:
        rows, length = shard_l.shape
        expected = l.grad[start : start + rows]
        assert torch.all(expected[:, length:] == 0)
        for observed_value, expected_value in zip(
            shard_l.grad.flatten().tolist(), expected[:, :length].flatten().tolist(), strict=True
        ):
            # Every token weight is a sum of non-negative parts: no cancellation.
            assert_close(observed_value, expected_value, expected_value, alpha, term)
        start += rows


def test_a_shard_without_kept_examples_gives_zeros_and_a_zero_gradient() -> None:
    l = torch.tensor([[NAN, INF], [1.0, -INF]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([[NAN, -1.0], [2.0, INF]], dtype=torch.float16)
    mask = torch.zeros(2, 2, dtype=torch.int64)
    out = weighted_shard_losses(l, b, mask, config(1.0, **ALL_WEIGHTS), weight=0.0)
    assert tuple(out) == RECONSTRUCTION_LOSS_NAMES
    for value in out.values():
        assert value.dim() == 0 and value.item() == 0.0 and value.dtype == torch.float64
    out["total_reconstruction_loss"].backward()
    assert torch.equal(l.grad, torch.zeros(2, 2, dtype=torch.float64))
    # Low-precision inputs: float32 results, as the stack gives.
    out = weighted_shard_losses(l.detach().half(), b, mask, config(1.0), weight=0.0)
    assert out["reconstruction_loss"].dtype == torch.float32


def test_a_shard_without_kept_examples_still_checks_its_tensors() -> None:
    with pytest.raises(ValueError, match=r"must have the same shape"):
        weighted_shard_losses(
            torch.ones(2, 2), torch.ones(2, 3), torch.zeros(2, 2).bool(), config(1.0), weight=0.0
        )


@pytest.mark.parametrize(
    ("weight", "pattern"),
    [
        (-0.5, r"weight must be >= 0"),
        (math.nan, r"finite"),
        (10**400, r"weight must be finite"),
        (True, r"real"),
        ("1", r"real"),
    ],
)
def test_bad_weight(weight, pattern: str) -> None:
    l, b, mask = shards(0)[0]
    with pytest.raises(ValueError, match=pattern):
        weighted_shard_losses(l, b, mask, config(1.0), weight=weight)


def test_inputs_are_not_modified() -> None:
    l, b, mask = shards(2)[1]
    before = (l.clone(), b.clone(), mask.clone())
    weighted_shard_losses(l, b, mask, config(1.0, **ALL_WEIGHTS), weight=0.5)
    for tensor, original in zip((l, b, mask), before, strict=True):
        torch.testing.assert_close(tensor, original, rtol=0, atol=0, equal_nan=True)


def test_guide_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = guide_examples("Data parallel and gradient accumulation")
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/GUIDE.md", "exec"), namespace)
