"""TrainingStep: gradient accumulation through compute_total_loss equals the full batch.

Micro-batches of different lengths keep 3, 2, 0 and 1 examples (one has empty rows and an
integer mask, one is padding only, with NaN and inf where it is padded); every
reconstruction term and every auxiliary term is weighted. The logged values and the
gradients of every parameter must equal one call of compute_total_loss on the union, to a
bound of a few float64 roundings per operation: every quantity compared is a sum of
non-negative parts, so no cancellation is blamed.
"""

from __future__ import annotations

import math

import numpy
import pytest
import torch

from recon_impl import (
    AUXILIARY_TERM_NAMES,
    RECONSTRUCTION_LOSS_NAMES,
    TOTAL_LOSS_NAMES,
    DisentanglementLossConfig,
    TrainingStep,
    compute_total_loss,
    kept_example_count,
)
from tests.impl.configs import EVERY_TERM_CONFIG

NAN, INF = math.nan, math.inf
EPS = torch.finfo(torch.float64).eps
# A value is a weighted sum of four shards' values, each a mean of means: a few dozen
# roundings, each relative (every part non-negative).
RELATIVE_BOUND = 16 * EPS

CONFIG = DisentanglementLossConfig(
    reconstruction=EVERY_TERM_CONFIG,
    beta=0.5,
    router_support_weight=0.25,
    posterior_entropy_weight=0.125,
    posterior_variance_weight=0.75,
    router_marginal_kl_to_prior_weight=1.5,
    router_supervision_weight=2.0,
    inter_latent_divergence_weight=0.375,
)


class LatentModel(torch.nn.Module):
    """token_nll = exp(s) x + u^2 y per token; auxiliary term j of example i is
    exp(a_j) f_ij, and the micro-batch's term is its mean over the kept examples."""

    def __init__(self) -> None:
        super().__init__()
        self.log_scale = torch.nn.Parameter(torch.tensor(0.3, dtype=torch.float64))
        self.shift = torch.nn.Parameter(torch.tensor(-0.7, dtype=torch.float64))
        self.aux_log_scale = torch.nn.Parameter(
            torch.linspace(-0.5, 0.5, len(AUXILIARY_TERM_NAMES), dtype=torch.float64)
        )

    def forward(self, x, y, features, mask):
        token_nll = self.log_scale.exp() * x + self.shift.square() * y
        kept = mask.bool().any(dim=1)
        # A mean over no example is NaN; its gradient (through the selection) is 0.
        terms = (features[kept] * self.aux_log_scale.exp()).mean(dim=0)
        return token_nll, dict(zip(AUXILIARY_TERM_NAMES, terms.unbind(), strict=True))


def micro_batch(generator, rows, length, *, empty_rows=0, integer_mask=False):
    x = torch.rand(rows, length, generator=generator, dtype=torch.float64) * 3
    y = torch.rand(rows, length, generator=generator, dtype=torch.float64)
    b = torch.rand(rows, length, generator=generator, dtype=torch.float64) * 4 + 0.1
    features = torch.rand(rows, len(AUXILIARY_TERM_NAMES), generator=generator).double()
    mask = torch.rand(rows, length, generator=generator) < 0.6
    mask[:, 0] = True
    mask[rows - empty_rows :] = False
    padding = torch.tensor([NAN, INF])[torch.randint(0, 2, (rows, length), generator=generator)]
    b = torch.where(mask, b, padding)  # the model's x stays finite: d(token_nll)/d(theta)
    return x, y, b, features, mask.long() if integer_mask else mask


def micro_batches(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return [
        micro_batch(generator, 3, 5),
        micro_batch(generator, 4, 9, empty_rows=2, integer_mask=True),
        micro_batch(generator, 2, 4, empty_rows=2),  # padding only
        micro_batch(generator, 1, 7),
    ]


def union(parts):
    length = max(x.shape[1] for x, *_ in parts)

    def pad(tensor, value):
        return torch.nn.functional.pad(tensor, (0, length - tensor.shape[1]), value=value)

    x = torch.cat([pad(p[0], 0.0) for p in parts])
    y = torch.cat([pad(p[1], 0.0) for p in parts])
    b = torch.cat([pad(p[2], NAN) for p in parts])
    features = torch.cat([p[3] for p in parts])
    mask = torch.cat([pad(p[4].bool(), False) for p in parts])
    return x, y, b, features, mask


def accumulated(parts, config=CONFIG, prefix=""):
    model = LatentModel()
    step = TrainingStep(config, [kept_example_count(p[4]) for p in parts])
    for x, y, b, features, mask in parts:
        token_nll, aux = model(x, y, features, mask)
        step.backward(token_nll, b, mask, **aux)
    return step, model, step.log(prefix=prefix)


def full_batch(parts, config=CONFIG):
    model = LatentModel()
    x, y, b, features, mask = union(parts)
    token_nll, aux = model(x, y, features, mask)
    out = compute_total_loss(token_nll, b, mask, config, **aux)
    out["total_loss"].backward()
    return model, {name: value.item() for name, value in out.items()}


def assert_close(observed: float, expected: float, what: str) -> None:
    assert abs(observed - expected) <= RELATIVE_BOUND * abs(expected), (
        f"{what}: {observed!r} != {expected!r} (|diff| {abs(observed - expected):.3g})"
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_accumulation_equals_the_full_batch(seed: int) -> None:
    parts = micro_batches(seed)
    step, model, log = accumulated(parts)
    assert step.weights[2] == 0.0 and math.isclose(sum(step.weights), 1.0)
    full_model, expected = full_batch(parts)
    assert list(log) == list(TOTAL_LOSS_NAMES)
    for name in TOTAL_LOSS_NAMES:
        assert_close(log[name], expected[name], name)
    for (name, parameter), full_parameter in zip(
        model.named_parameters(), full_model.parameters(), strict=True
    ):
        observed_grad = parameter.grad.flatten().tolist()
        expected_grad = full_parameter.grad.flatten().tolist()
        for index, (observed, wanted) in enumerate(zip(observed_grad, expected_grad, strict=True)):
            assert_close(observed, wanted, f"gradient of {name}[{index}]")


def test_a_plain_mean_over_micro_batches_is_not_the_full_batch() -> None:
    # Why the weights count kept examples: 3, 2 and 1 here.
    parts = [p for p in micro_batches(0) if kept_example_count(p[4]) > 0]
    plain = 0.0
    for x, y, b, features, mask in parts:
        token_nll, aux = LatentModel()(x, y, features, mask)
        plain += compute_total_loss(token_nll, b, mask, CONFIG, **aux)["total_loss"].item() / 3
    _, expected = full_batch(parts)
    assert abs(plain - expected["total_loss"]) > 1e-3


def test_log_holds_floats_with_the_prefix_and_only_the_terms_given() -> None:
    config = DisentanglementLossConfig(
        reconstruction=EVERY_TERM_CONFIG, beta=0.5, enable_router_support_loss=False
    )
    parts = micro_batches(0)
    step = TrainingStep(config, [kept_example_count(p[4]) for p in parts])
    model = LatentModel()
    for x, y, b, features, mask in parts:
        token_nll, aux = model(x, y, features, mask)
        step.backward(token_nll, b, mask, kl=aux["kl"], posterior_entropy=aux["kl"])
    log = step.log(prefix="train/")
    expected = [*RECONSTRUCTION_LOSS_NAMES, "kl", "posterior_entropy", "total_loss"]
    assert list(log) == [f"train/{name}" for name in expected]
    assert all(type(value) is float for value in log.values())
    # posterior_entropy is logged (weight 0) but not added
    total = log["train/total_reconstruction_loss"] + 0.5 * log["train/kl"]
    assert abs(log["train/total_loss"] - total) <= RELATIVE_BOUND * total


def test_an_auxiliary_term_over_another_population() -> None:
    # A token-level term passed as (its sum over the micro-batch's valid tokens) / B'_k
    # accumulates to (the sum over the step's valid tokens) / B': the full batch's value.
    config = DisentanglementLossConfig(enable_router_support_loss=False, beta=1.0)
    parts = micro_batches(1)
    step = TrainingStep(config, [kept_example_count(p[4]) for p in parts])
    for x, _, b, _, mask in parts:
        kept = kept_example_count(mask)
        token_sum = torch.where(mask.bool(), x, 0.0).sum()
        kl = token_sum / kept if kept else torch.tensor(NAN)
        step.loss(x, b, mask, kl=kl)
    x, _, b, _, mask = union(parts)
    expected = torch.where(mask, x, 0.0).sum().item() / kept_example_count(mask)
    assert_close(step.log()["kl"], expected, "kl")


def test_a_micro_batch_without_a_kept_example_contributes_exactly_nothing() -> None:
    x, y, b, features, mask = micro_batches(0)[2]
    assert kept_example_count(mask) == 0
    model = LatentModel()
    step = TrainingStep(CONFIG, [0, 1])
    token_nll, aux = model(x, y, features, mask)
    assert all(math.isnan(term.item()) for term in aux.values())
    loss = step.loss(token_nll, b, mask, **aux)
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    # Every parameter is reached (DDP waits for all of them), each with gradient 0.
    for parameter in model.parameters():
        assert parameter.grad is not None and torch.all(parameter.grad == 0)


def test_gradient_sync_skips_the_all_reduce_until_the_last_micro_batch() -> None:
    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.entered = 0

        def no_sync(self):
            self.entered += 1
            return torch.no_grad()  # any context manager

    wrapper, config = Wrapper(), DisentanglementLossConfig(enable_router_support_loss=False)
    parts = micro_batches(0)
    step = TrainingStep(config, [kept_example_count(p[4]) for p in parts])
    kl = torch.tensor(0.0)
    for x, _, b, _, mask in parts:
        with step.gradient_sync(wrapper), step.gradient_sync(torch.nn.Linear(1, 1)):
            step.loss(x, b, mask, kl=kl)
    assert wrapper.entered == len(parts) - 1


def test_inputs_are_not_modified() -> None:
    parts = micro_batches(2)
    before = [[t.clone() for t in part] for part in parts]
    accumulated(parts)
    for part, original in zip(parts, before, strict=True):
        for tensor, copy in zip(part, original, strict=True):
            torch.testing.assert_close(tensor, copy, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize(
    "count",
    [2, numpy.int64(2), numpy.int32(2), torch.tensor(2), torch.tensor(2, dtype=torch.int32)],
)
def test_every_integer_scalar_is_a_kept_count(count) -> None:
    config = DisentanglementLossConfig(enable_router_support_loss=False, beta=0.0)
    step = TrainingStep(config, [count, 6])
    assert step.weights == [0.25, 0.75] and step.kept_counts == (2, 6)


@pytest.mark.parametrize(
    "count",
    [
        torch.tensor(2.7),  # int() would truncate it to 2
        torch.tensor(2.0),
        2.0,
        numpy.float64(2.0),
        torch.tensor([2]),
        torch.tensor(True),
        numpy.True_,
        True,
        "2",
    ],
)
def test_a_kept_count_that_is_not_an_integer_scalar_is_a_value_error(count) -> None:
    config = DisentanglementLossConfig(enable_router_support_loss=False, beta=0.0)
    with pytest.raises(ValueError, match=r"kept_counts\[0\] must be an integer \(a count"):
        TrainingStep(config, [count, 6])


@pytest.mark.parametrize("given_on", [0, 1])
def test_a_term_given_on_only_some_micro_batches_is_a_value_error(given_on: int) -> None:
    # a term of weight 0 need not be given; given on some micro-batches only, its logged
    # value would be a part of the step's
    config = DisentanglementLossConfig(enable_router_support_loss=False, beta=0.0)
    batches = micro_batches(0)[:2]
    step = TrainingStep(config, [kept_example_count(mask) for *_, mask in batches])
    for index, (x, _, b, _, mask) in enumerate(batches):
        extra = {"posterior_entropy": torch.tensor(0.5)} if index == given_on else {}
        if index == 1:
            with pytest.raises(ValueError, match=r"posterior_entropy is given on micro-batch"):
                step.loss(x, b, mask, **extra)
        else:
            step.loss(x, b, mask, **extra)


@pytest.mark.parametrize(
    ("kept_counts", "got"), [(3, "int 3"), (None, "NoneType None"), (torch.tensor(3), "Tensor")]
)
def test_kept_counts_that_are_not_a_sequence_are_a_value_error(kept_counts, got: str) -> None:
    config = DisentanglementLossConfig(enable_router_support_loss=False, beta=0.0)
    with pytest.raises(ValueError, match=rf"^kept_counts must be a sequence of kept-ex.*got {got}"):
        TrainingStep(config, kept_counts)


def test_misuse_is_a_value_error() -> None:
    config = DisentanglementLossConfig(enable_router_support_loss=False, beta=0.0)
    x, _, b, _, mask = micro_batches(0)[0]
    with pytest.raises(ValueError, match=r"config must be a recon_impl\.config\.Disentangle"):
        TrainingStep(EVERY_TERM_CONFIG, [1])
    with pytest.raises(ValueError, match=r"at least one kept example"):
        TrainingStep(config, [0, 0])
    with pytest.raises(ValueError, match=r"kept_counts\[0\] must be >= 0"):
        TrainingStep(config, [-1])
    with pytest.raises(ValueError, match=r"ranks_average_gradients must be a bool"):
        TrainingStep(config, [1], ranks_average_gradients=1)
    step = TrainingStep(config, [2])
    with pytest.raises(ValueError, match=r"micro-batch 0 keeps 3 examples, but kept_counts\[0\]"):
        step.loss(x, b, mask)
    step = TrainingStep(config, [3])
    with pytest.raises(ValueError, match=r"log\(\) needs every micro-batch: 0 of 1 given"):
        step.log()
    with pytest.raises(ValueError, match=r"unknown auxiliary term\(s\) \['kld'\]"):
        step.loss(x, b, mask, kld=torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"kl must be given: its weight is 1.0"):
        TrainingStep(DisentanglementLossConfig(enable_router_support_loss=False), [3]).loss(
            x, b, mask
        )
    step.loss(x, b, mask)
    with pytest.raises(ValueError, match=r"all 1 micro-batches of kept_counts were already"):
        step.loss(x, b, mask)
    with pytest.raises(ValueError, match=r"prefix must be a str"):
        step.log(prefix=1)


def test_a_plain_vae_call_needs_router_support_switched_off() -> None:
    # The default router_support_weight=1 with enable_router_support_loss=True weighs a
    # term a model without a router does not have.
    x, _, b, _, mask = micro_batches(0)[0]
    kl = torch.tensor(0.5, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"router_support must be given: its weight is 1.0"):
        TrainingStep(DisentanglementLossConfig(), [3]).loss(x, b, mask, kl=kl)
    for config in (
        DisentanglementLossConfig(enable_router_support_loss=False),
        DisentanglementLossConfig(router_support_weight=0.0),
    ):
        step = TrainingStep(config, [3])
        step.loss(x, b, mask, kl=kl)
        log = step.log()
        assert "router_support" not in log
        expected = log["total_reconstruction_loss"] + 0.5
        assert abs(log["total_loss"] - expected) <= RELATIVE_BOUND * expected
