"""The stack against the spec's oracle: values, each term's gradient, masking, validation.

The reference is ``spec.evaluate_details``, the high-precision oracle, on the inputs
rounded to the dtype under test; a term's own gradient is the oracle's closed-form
gradient of a config that weights that term alone. Agreement is within the project's
tolerance table, for every term and its gradient.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import recon_impl.reconstruction as reconstruction
import spec
from properties.tolerances import output_tolerance
from recon_impl import (
    RECONSTRUCTION_LOSS_NAMES,
    RECONSTRUCTION_TERM_NAMES,
    ReconstructionLossConfig,
    reconstruction_losses,
)
from recon_impl.terms import CONCENTRATION, TERMS
from tests.impl.configs import EVERY_WEIGHT, TERM_WEIGHT_FIELDS, WEIGHT_FIELDS, with_parameters

NAN, INF = math.nan, math.inf


def config(alpha: float, epsilon: float = 0.1, **weights: float) -> ReconstructionLossConfig:
    return ReconstructionLossConfig(
        **{**EVERY_WEIGHT, **weights},
        **with_parameters(
            token_weight_alpha=alpha,
            example_inverse_surprisal_epsilon=epsilon,
            zfree_reference_scale=3.0,
        ),
    )


def awkward_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float64 l, b, mask: padded junk, an empty row, an all-zero-b row (uniform fallback),
    zero and -0.0 surprisals, a row of tiny b, signed l."""
    generator = torch.Generator().manual_seed(seed)
    l = torch.randn(6, 7, generator=generator, dtype=torch.float64) * 3
    b = torch.rand(6, 7, generator=generator, dtype=torch.float64) * 5
    mask = torch.rand(6, 7, generator=generator) > 0.3
    mask[:, 0] = True
    mask[1] = False  # dropped example
    b[2] = 0.0  # no share mass: uniform shares, kappa = 1
    b[3, 1] = 0.0
    b[3, 2] = -0.0
    b[4] = b[4] * 1e-300  # tiny in float64, 0 in float32 (then also a row without share mass)
    junk = torch.tensor([NAN, INF, -INF, 1e30, -7.0], dtype=torch.float64)
    fill = junk[torch.arange(l.numel()) % len(junk)].view_as(l)
    return torch.where(mask, l, fill), torch.where(mask, b, fill.flip(1)), mask


def alone(cfg: ReconstructionLossConfig, field: str) -> ReconstructionLossConfig:
    """``cfg`` with weight 1 on ``field`` and 0 on the other four: its J is that term."""
    return dataclasses.replace(cfg, **{f: float(f == field) for f in WEIGHT_FIELDS})


def oracle(l, b, mask, cfg, dtype):
    """The oracle's values, the gradients of each term and of the total (``"total"``), and
    the values on |l| (the scale of each output), by name, on the inputs rounded to
    ``dtype``."""
    l64, b64 = l.detach().to(dtype).double(), b.to(dtype).double()
    details = spec.evaluate_details(l64, b64, mask, cfg)
    values = {name: details.values[name] for name in RECONSTRUCTION_LOSS_NAMES}
    grads = {
        name: torch.tensor(spec.evaluate_details(l64, b64, mask, alone(cfg, f)).token_gradient)
        for name, f in TERM_WEIGHT_FIELDS.items()
    }
    grads["total"] = torch.tensor(details.token_gradient)
    scale = spec.evaluate(l64.abs(), b64, mask, cfg)
    return values, grads, {name: scale[name] for name in RECONSTRUCTION_LOSS_NAMES}


def assert_agrees(l, b, mask, cfg, input_dtype=torch.float64) -> None:
    low = l.to(input_dtype).requires_grad_()
    losses = reconstruction_losses(low, b.to(input_dtype), mask, cfg)
    expected, expected_grads, scale = oracle(l, b, mask, cfg, input_dtype)
    tolerance = output_tolerance(input_dtype, length=l.shape[1], alpha=cfg.token_weight_alpha)
    for name in RECONSTRUCTION_LOSS_NAMES:
        observed = losses[name].item()
        assert tolerance.allows(observed, expected[name], scale[name]), (
            name,
            observed,
            expected[name],
        )
    outputs = {**{name: losses[name] for name in RECONSTRUCTION_TERM_NAMES}}
    outputs["total"] = losses.total_reconstruction_loss
    for name, output in outputs.items():
        expected_grad = expected_grads[name]
        (grad,) = torch.autograd.grad(output, low, retain_graph=True)
        assert grad.dtype == input_dtype
        assert torch.all(grad[~mask] == 0), name
        # entries are >= 0 (weights >= 0, b >= 0); one far below the largest may underflow,
        # and the gradient is rounded to the input dtype
        rtol = tolerance.rtol + torch.finfo(input_dtype).eps
        scale = expected_grad.abs().max().item()
        torch.testing.assert_close(grad.double(), expected_grad, rtol=rtol, atol=rtol * scale)


# 0: uniform, 0.5: x * rsqrt(x), 1: x itself, 2: pow's square, 1.3 and 2.5: pow, 40: tail
# shares below float32's smallest normal, 1e30: all weight on the max.
ALPHAS = [0.0, 0.5, 1.0, 2.0, 1.3, 2.5, 40.0, 1e30]


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("input_dtype", [torch.float64, torch.float32])
def test_values_and_each_terms_gradient_match_the_oracle(
    alpha: float, input_dtype: torch.dtype
) -> None:
    for seed in range(3):
        l, b, mask = awkward_batch(seed)
        assert_agrees(l, b, mask, config(alpha), input_dtype)


@pytest.mark.parametrize(("alpha", "tail"), [(2.0, 1e-14), (2.5, 1e-11), (27.5, 0.5)])
def test_a_tail_share_far_below_the_largest_keeps_its_relative_accuracy(
    alpha: float, tail: float
) -> None:
    # Only the tail token carries loss; its share, about 1e-30, is a normal float32 number.
    # Scaled by the row sum instead of the maximum, (b/sum b)^alpha would underflow first
    # (for alpha = 27.5, R_tok came out 0).
    l = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    b = torch.tensor([[6.0, 6.0, 6.0, 6.0, tail]], dtype=torch.float64)
    mask = torch.ones(1, 5, dtype=torch.bool)
    cfg = config(alpha)
    losses = reconstruction_losses(l.float(), b.float(), mask, cfg)
    expected, _, scale = oracle(l, b, mask, cfg, torch.float32)
    tolerance = output_tolerance(torch.float32, length=5, alpha=alpha)
    name = "token_weighted_reconstruction_loss"
    assert 1e-32 < expected[name] < 1e-29
    assert tolerance.allows(losses[name].item(), expected[name], scale[name])


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0, 5.0])
def test_subnormal_surprisals(alpha: float) -> None:
    # float32 rows whose valid b are all subnormal, their sum too: the shares are scaled by
    # a division there, not by a reciprocal, which would overflow. (The products p*b are
    # subnormal as well, so kappa and what depends on it are only roughly right; the
    # shares themselves, and so R_tok, are exact to rounding.)
    l, b, mask = awkward_batch(2)
    b = b.clone()
    b[0] = b[0] * 1e-42
    b[3] = torch.where(torch.arange(7) % 2 == 0, 3e-45, 1e-40).double()
    low_l, low_b = l.float().requires_grad_(), b.float()
    assert low_b[0][mask[0]].abs().max() < torch.finfo(torch.float32).tiny
    losses = reconstruction_losses(low_l, low_b, mask, config(alpha))
    expected, _, scale = oracle(l, b, mask, config(alpha), torch.float32)
    tolerance = output_tolerance(torch.float32, length=7, alpha=alpha)
    # the terms that do not divide by kappa (rough here) are exact to rounding
    exact = [term.name for term in TERMS if term.divisor is not CONCENTRATION]
    for name in RECONSTRUCTION_LOSS_NAMES:
        assert math.isfinite(losses[name].item()), name
        if name in exact:
            assert tolerance.allows(losses[name].item(), expected[name], scale[name]), name
    losses.total_reconstruction_loss.backward()
    assert torch.isfinite(low_l.grad).all()


@pytest.mark.parametrize("input_dtype", [torch.float16, torch.bfloat16])
def test_low_precision_inputs(input_dtype: torch.dtype) -> None:
    l, b, mask = awkward_batch(1)
    assert_agrees(l.clamp(-60, 60), b.clamp(0, 60), mask, config(1.0), input_dtype)


def test_mixed_upstream_gradients() -> None:
    # backward through a combination of single terms and the total
    l, b, mask = awkward_batch(2)
    cfg = config(2.0)
    leaf = l.clone().requires_grad_()
    losses = reconstruction_losses(leaf, b, mask, cfg)
    combined = (
        0.7 * losses.reconstruction_loss
        + 1.3 * losses.normalized_concentration_corrected_token_weighted_reconstruction_loss
        + 0.5 * losses.total_reconstruction_loss
        - 0.25 * losses.example_inverse_surprisal_weighted_reconstruction_loss
    )
    combined.backward()
    _, grads, _ = oracle(l, b, mask, cfg, torch.float64)
    grad = grads
    expected = (
        0.7 * grad["reconstruction_loss"]
        + 1.3 * grad["normalized_concentration_corrected_token_weighted_reconstruction_loss"]
        + 0.5 * grad["total"]
        - 0.25 * grad["example_inverse_surprisal_weighted_reconstruction_loss"]
    )
    rtol = output_tolerance(torch.float64, length=7, alpha=2.0).rtol
    torch.testing.assert_close(leaf.grad, expected, rtol=rtol, atol=rtol * expected.abs().max())
    assert torch.all(leaf.grad[~mask] == 0)


def test_gradcheck() -> None:
    l, b, mask = awkward_batch(3)
    cfg = config(1.3)

    def terms(token_nll):
        losses = reconstruction_losses(token_nll, b, mask, cfg)
        return tuple(
            losses[name] for name in (*RECONSTRUCTION_TERM_NAMES, "total_reconstruction_loss")
        )

    leaf = torch.where(mask, l, 0.0).requires_grad_()
    assert torch.autograd.gradcheck(terms, (leaf,), eps=1e-6, atol=1e-8)


def test_diagnostics_and_zfree_carry_no_gradient() -> None:
    l, b, mask = awkward_batch(0)
    leaf = l.clone().requires_grad_()
    zfree = b.clone().requires_grad_()
    losses = reconstruction_losses(leaf, zfree, mask, config(1.0))
    assert not losses.token_weighted_base_loss.requires_grad
    assert not losses.token_concentration_factor.requires_grad
    assert all(losses[name].requires_grad for name in RECONSTRUCTION_TERM_NAMES)
    losses.total_reconstruction_loss.backward()
    assert zfree.grad is None
    # only the z-free losses requiring grad: nothing requires grad
    only_b = reconstruction_losses(l, zfree, mask, config(1.0))
    assert not any(value.requires_grad for value in only_b.values())


def test_backward_twice_with_retain_graph_and_no_grad_calls() -> None:
    l, b, mask = awkward_batch(0)
    leaf = l.clone().requires_grad_()
    total = reconstruction_losses(leaf, b, mask, config(2.0)).total_reconstruction_loss
    total.backward(retain_graph=True)
    first = leaf.grad.clone()
    total.backward()
    torch.testing.assert_close(leaf.grad, 2 * first)
    with torch.no_grad():
        values = reconstruction_losses(leaf, b, mask, config(2.0))
    assert not values.total_reconstruction_loss.requires_grad
    with torch.inference_mode():
        reconstruction_losses(l, b, mask, config(2.0))


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 2.0])
def test_the_totals_gradient_is_the_weighted_sum_of_the_terms(alpha: float) -> None:
    l, b, mask = awkward_batch(1)
    cfg = config(alpha)
    leaf = l.clone().requires_grad_()
    losses = reconstruction_losses(leaf, b, mask, cfg)
    (total,) = torch.autograd.grad(losses.total_reconstruction_loss, leaf, retain_graph=True)
    expected = sum(
        getattr(cfg, field) * torch.autograd.grad(losses[name], leaf, retain_graph=True)[0]
        for name, field in TERM_WEIGHT_FIELDS.items()
    )
    rtol = output_tolerance(torch.float64, length=7, alpha=alpha).rtol
    torch.testing.assert_close(total, expected, rtol=rtol, atol=rtol * expected.abs().max())
    (scaled,) = torch.autograd.grad(3.0 * losses.total_reconstruction_loss, leaf)
    torch.testing.assert_close(scaled, 3.0 * total, rtol=rtol, atol=0.0)
    assert torch.all(total[~mask] == 0) and torch.all(scaled[~mask] == 0)


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0])
def test_the_gradient_is_differentiable_and_its_derivative_in_l_is_zero(alpha: float) -> None:
    # Every term is linear in l: the gradient is a function of b and the upstream gradient
    # alone, differentiable in the latter (create_graph=True), with no path back to l.
    l, b, mask = awkward_batch(0)
    leaf = l.clone().requires_grad_()
    total = reconstruction_losses(leaf, b, mask, config(alpha)).total_reconstruction_loss
    weight = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(weight * total, leaf, create_graph=True)
    (plain,) = torch.autograd.grad(2.0 * total, leaf, retain_graph=True)
    assert grad.requires_grad and not plain.requires_grad
    torch.testing.assert_close(plain, grad.detach(), rtol=0, atol=0)
    second_l, second_weight = torch.autograd.grad(grad.sum(), (leaf, weight), allow_unused=True)
    assert second_l is None
    torch.testing.assert_close(second_weight, plain.sum() / 2.0)


def test_non_contiguous_and_expanded_inputs() -> None:
    l, b, mask = awkward_batch(4)
    cfg = config(1.0)
    expected = reconstruction_losses(l, b, mask, cfg)
    transposed = reconstruction_losses(
        l.t().contiguous().t(), b.t().contiguous().t(), mask.t().contiguous().t(), cfg
    )
    strided = reconstruction_losses(
        torch.stack([l, l], -1)[..., 0], torch.stack([b, b], -1)[..., 1], mask, cfg
    )
    for name in RECONSTRUCTION_LOSS_NAMES:
        assert transposed[name].item() == expected[name].item()
        assert strided[name].item() == expected[name].item()
    row = reconstruction_losses(
        l[:1].expand(3, -1), b[:1].expand(3, -1), mask[:1].expand(3, -1), cfg
    )
    single = reconstruction_losses(l[:1], b[:1], mask[:1], cfg)
    torch.testing.assert_close(row.total_reconstruction_loss, single.total_reconstruction_loss)


@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_negative_zero_surprisal_counts_as_zero(alpha: float) -> None:
    l, b, mask = awkward_batch(0)
    b = b.abs()
    positive = reconstruction_losses(l, b, mask, config(alpha))
    b_negative_zero = torch.where(b == 0, -0.0, b)
    negative = reconstruction_losses(l, b_negative_zero, mask, config(alpha))
    for name in RECONSTRUCTION_LOSS_NAMES:
        assert negative[name].item() == positive[name].item()


class AtenLog(TorchDispatchMode):
    """Names of the aten ops whose inputs include a tensor of ``numel`` elements."""

    def __init__(self, numel: int) -> None:
        super().__init__()
        self.numel = numel
        self.full_passes: list[str] = []
        self.syncs = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        name = func.overloadpacket.__name__
        if name == "_local_scalar_dense":
            self.syncs += 1
        elif any(t.numel() == self.numel for t in inputs) and name not in (
            "view",
            "select",
            "slice",
            "detach",
            "alias",
            "unsqueeze",
            "expand",
            "empty",
            "empty_like",
            "new_empty",
        ):
            self.full_passes.append(name)
        return func(*args, **kwargs)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 2.0])
def test_validation_adds_only_the_row_minimum_and_one_sync(monkeypatch, alpha: float) -> None:
    # A host sync shows as _local_scalar_dense; the checks on [B] vectors are no full pass.
    def scan(*args, **kwargs):
        raise AssertionError("the data was scanned although the inputs are valid")

    monkeypatch.setattr(reconstruction, "raise_for_invalid_values", scan)
    generator = torch.Generator().manual_seed(0)
    l = torch.rand(8, 64, generator=generator)
    b = torch.rand(8, 64, generator=generator)
    mask = torch.rand(8, 64, generator=generator) > 0.2
    logs = {}
    for validate in (False, True):
        with AtenLog(l.numel()) as log:
            reconstruction_losses(l, b, mask, config(alpha), validate=validate)
        logs[validate] = log
    extra = list(logs[True].full_passes)
    for name in logs[False].full_passes:
        extra.remove(name)
    assert extra == ["amin"]
    assert logs[False].syncs == 0
    assert logs[True].syncs == 1


def test_validation_still_finds_every_error() -> None:
    l, b, mask = awkward_batch(0)
    cfg = config(0.5)
    for bad_l, bad_b, pattern in [
        (
            l.masked_fill(~mask, 0).index_put(
                (torch.tensor([0]), torch.tensor([0])), torch.tensor(NAN, dtype=torch.float64)
            ),
            b,
            "token_nll must be finite",
        ),
        (
            l,
            b.index_put(
                (torch.tensor([0]), torch.tensor([0])), torch.tensor(INF, dtype=torch.float64)
            ),
            "zfree_token_nll must be finite",
        ),
        (
            l,
            b.index_put(
                (torch.tensor([0]), torch.tensor([0])), torch.tensor(-1e-40, dtype=torch.float64)
            ),
            "zfree_token_nll must be >= 0",
        ),
    ]:
        with pytest.raises(ValueError, match=pattern):
            reconstruction_losses(bad_l, bad_b, mask, cfg)
    zero_row = b.clone()
    zero_row[0] = 0.0
    with pytest.raises(ValueError, match="example_inverse_surprisal_epsilon = 0"):
        reconstruction_losses(l, zero_row, mask, config(0.5, epsilon=0.0))
    with pytest.raises(ValueError, match="at least one valid token"):
        reconstruction_losses(l, b, torch.zeros_like(mask), cfg)


def test_zero_length_batch_without_validation_gives_nan() -> None:
    for shape in [(0, 4), (3, 0)]:
        losses = reconstruction_losses(
            torch.ones(shape),
            torch.ones(shape),
            torch.ones(shape, dtype=torch.bool),
            config(2.0),
            validate=False,
        )
        assert all(math.isnan(v.item()) for v in losses.values())


def test_tiny_epsilon_keeps_values_and_gradients_finite() -> None:
    # bbar = 0 with eps = 5e-324: 1/(bbar + eps) overflows, so the stack divides by
    # bbar + eps (values and gradients) instead of multiplying by its reciprocal.
    l = torch.tensor([[0.0, 0.0], [2.0, 1.0]], dtype=torch.float64)
    b = torch.tensor([[0.0, 0.0], [1.0, 3.0]], dtype=torch.float64)
    mask = torch.ones(2, 2, dtype=torch.bool)
    for weight in (0.0, 1.0):
        cfg = config(1.0, epsilon=5e-324, example_inverse_surprisal_weight=weight)
        leaf = l.clone().requires_grad_()
        losses = reconstruction_losses(leaf, b, mask, cfg)
        expected = (0.0 + 1.5 / (2.0 + 5e-324)) / 2
        assert losses.example_inverse_surprisal_weighted_reconstruction_loss.item() == (
            pytest.approx(expected, rel=1e-15)
        )
        losses.total_reconstruction_loss.backward()
        assert torch.isfinite(leaf.grad[1]).all()
        if weight == 0.0:
            assert torch.isfinite(leaf.grad).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_alpha_below_the_smallest_normal_gives_zero_surprisal_no_share(dtype) -> None:
    cfg = config(1e-300, token_weighted_weight=1.0)
    l = torch.tensor([[1.0, 5.0, 7.0]], dtype=dtype, requires_grad=True)
    b = torch.tensor([[2.0, 0.0, 4.0]], dtype=dtype)
    losses = reconstruction_losses(l, b, torch.tensor([[True, True, False]]), cfg)
    assert losses.token_weighted_reconstruction_loss.item() == 1.0
    assert losses.token_concentration_factor.item() == 2.0
    losses.token_weighted_reconstruction_loss.backward()
    assert l.grad.tolist() == [[1.0, 0.0, 0.0]]


def test_torch_func_grad_and_vmap() -> None:
    l, b, mask = awkward_batch(0)
    cfg = config(1.3)

    def total(token_nll):
        return reconstruction_losses(token_nll, b, mask, cfg).total_reconstruction_loss

    grad = torch.func.grad(total)(l.clone())
    leaf = l.clone().requires_grad_()
    total(leaf).backward()
    rtol = output_tolerance(torch.float64, length=7, alpha=1.3).rtol
    torch.testing.assert_close(grad, leaf.grad, rtol=rtol, atol=1e-15)

    def row_total(l_row, b_row, mask_row):
        losses = reconstruction_losses(
            l_row[None], b_row[None], mask_row[None], cfg, validate=False
        )
        return losses.total_reconstruction_loss

    per_row = torch.func.vmap(row_total)(l, b, mask)
    expected = torch.stack([row_total(*row) for row in zip(l, b, mask, strict=True)])
    torch.testing.assert_close(per_row, expected, rtol=rtol, atol=1e-15, equal_nan=True)
