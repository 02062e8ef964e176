"""token_nll_from_logits: per-token cross-entropy, the mask, the causal-LM shift, precision."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from recon_impl import logits as logits_module
from recon_impl import token_nll_from_logits

HALF = (torch.bfloat16, torch.float16)
ALL_DTYPES = (*HALF, torch.float32, torch.float64)


def sample(dtype=torch.float64, batch=3, length=6, vocab=11, seed=0):
    generator = torch.Generator().manual_seed(seed)
    logits = (torch.randn(batch, length, vocab, generator=generator) * 3).to(dtype)
    labels = torch.randint(0, vocab, (batch, length), generator=generator)
    labels[1, 4:] = -100
    labels[-1, :2] = -100
    return logits, labels


def reference(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Float64 cross-entropy of the logits' exact values, 0 at ignored positions."""
    log_p = torch.log_softmax(logits.double(), dim=-1)
    nll = -log_p.gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    return torch.where(targets != -100, nll, 0.0)


def loss_tolerance(dtype: torch.dtype, logits: torch.Tensor) -> float:
    # The losses are computed in float32 at least: a log-sum-exp over V terms and one
    # subtraction, each rounding relative to |z| + log V.
    eps = torch.finfo(torch.promote_types(dtype, torch.float32)).eps
    return 16 * eps * (logits.double().abs().max().item() + math.log(logits.shape[-1]) + 1)


def test_matches_log_softmax() -> None:
    logits, targets = sample()
    token_nll, mask = token_nll_from_logits(logits, targets)
    assert torch.equal(mask, targets != -100)
    torch.testing.assert_close(token_nll, reference(logits, targets))
    assert token_nll[~mask].eq(0).all()
    assert token_nll.shape == (3, 6) and token_nll.dtype == torch.float64


def test_custom_ignore_index_and_gradient() -> None:
    logits = torch.zeros(1, 3, 4, requires_grad=True)
    targets = torch.tensor([[0, 9, 3]])
    token_nll, mask = token_nll_from_logits(logits, targets, ignore_index=9)
    assert mask.tolist() == [[True, False, True]]
    token_nll.sum().backward()
    assert logits.grad[0, 1].eq(0).all()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_losses_are_float32_or_better(dtype: torch.dtype) -> None:
    logits, labels = sample(dtype)
    token_nll, mask = token_nll_from_logits(logits, labels)
    assert token_nll.dtype == torch.promote_types(dtype, torch.float32)
    expected = reference(logits, labels)
    error = (token_nll.double() - expected).abs().max().item()
    assert error <= loss_tolerance(dtype, logits), error
    assert token_nll[~mask].eq(0).all()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_autocast_changes_nothing(dtype: torch.dtype) -> None:
    logits, labels = sample(dtype)
    outside, _ = token_nll_from_logits(logits, labels, shift=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside, _ = token_nll_from_logits(logits, labels, shift=True)
    assert inside.dtype == outside.dtype == torch.promote_types(dtype, torch.float32)
    torch.testing.assert_close(inside, outside, rtol=0, atol=loss_tolerance(dtype, logits))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_precision_gradient(dtype: torch.dtype) -> None:
    logits, labels = sample(dtype, seed=1)
    leaf = logits.clone().requires_grad_(True)
    upstream = torch.randn(labels.shape, generator=torch.Generator().manual_seed(2))
    token_nll, _ = token_nll_from_logits(leaf, labels)
    (token_nll * upstream).sum().backward()
    exact = logits.double().requires_grad_(True)
    (reference(exact, labels) * upstream.double()).sum().backward()
    assert leaf.grad.dtype == dtype
    # One rounding to the logits' dtype, on top of a float32 computation.
    allowed = torch.finfo(dtype).eps * exact.grad.abs() + loss_tolerance(dtype, logits)
    assert torch.all((leaf.grad.double() - exact.grad).abs() <= allowed)
    assert leaf.grad[labels == -100].eq(0).all()


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_precision_blocks_give_the_same_result(monkeypatch, dtype: torch.dtype) -> None:
    logits, labels = sample(dtype, batch=4, length=5, vocab=7)
    whole, _ = token_nll_from_logits(logits, labels)
    monkeypatch.setattr(logits_module, "_CPU_BLOCK_ELEMENTS", 3 * 7)  # 3 rows a block, 20 rows
    leaf = logits.clone().requires_grad_(True)
    blocked, _ = token_nll_from_logits(leaf, labels)
    assert torch.equal(blocked, whole)
    blocked.sum().backward()
    unblocked = logits.clone().requires_grad_(True)
    monkeypatch.setattr(logits_module, "_CPU_BLOCK_ELEMENTS", 1 << 20)
    token_nll_from_logits(unblocked, labels)[0].sum().backward()
    assert torch.equal(leaf.grad, unblocked.grad)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_precision_keeps_no_float32_copy_of_the_logits(dtype: torch.dtype) -> None:
    logits, labels = sample(dtype, batch=2, length=8, vocab=64)
    leaf = logits.clone().requires_grad_(True)
    saved: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        token_nll_from_logits(leaf, labels)
    big = [t for t in saved if t.numel() >= logits.shape[0] * logits.shape[1] * 2]
    # Of [B, T, V] size: only the logits themselves (a view, no copy); the rest is [B*T].
    assert big and all(t.data_ptr() == leaf.data_ptr() and t.dtype == dtype for t in big)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_shift_is_the_causal_lm_convention(dtype: torch.dtype) -> None:
    logits, labels = sample(dtype)
    shifted, shifted_mask = token_nll_from_logits(logits, labels, shift=True)
    sliced, sliced_mask = token_nll_from_logits(logits[:, :-1], labels[:, 1:])
    assert shifted.shape == shifted_mask.shape == (3, 5)
    assert torch.equal(shifted_mask, sliced_mask)
    torch.testing.assert_close(shifted, sliced, rtol=0, atol=0)

    # The gradient too, and the last position's logits get none.
    leaf = logits.clone().requires_grad_(True)
    token_nll_from_logits(leaf, labels, shift=True)[0].sum().backward()
    sliced_leaf = logits[:, :-1].clone().requires_grad_(True)
    token_nll_from_logits(sliced_leaf, labels[:, 1:])[0].sum().backward()
    torch.testing.assert_close(leaf.grad[:, :-1], sliced_leaf.grad, rtol=0, atol=0)
    assert leaf.grad[:, -1].eq(0).all()


def test_shift_never_reads_the_first_label() -> None:
    logits, labels = sample()
    first_garbage = labels.clone()
    first_garbage[:, 0] = 12345  # out of range, but never a target
    out, mask = token_nll_from_logits(logits, first_garbage, shift=True)
    expected, expected_mask = token_nll_from_logits(logits, labels, shift=True)
    assert torch.equal(out, expected) and torch.equal(mask, expected_mask)


@pytest.mark.parametrize("length", [0, 1])
def test_shift_of_a_short_sequence(length: int) -> None:
    logits, labels = torch.zeros(2, length, 5), torch.zeros(2, length, dtype=torch.long)
    token_nll, mask = token_nll_from_logits(logits, labels, shift=True)
    assert token_nll.shape == mask.shape == (2, max(length - 1, 0))


def test_inputs_are_not_modified() -> None:
    for dtype in ALL_DTYPES:
        logits, labels = sample(dtype)
        before = (logits.clone(), labels.clone())
        token_nll_from_logits(logits.requires_grad_(True), labels, shift=True)[0].sum().backward()
        assert torch.equal(logits.detach(), before[0]) and torch.equal(labels, before[1])


def test_matches_hugging_face_style_loss() -> None:
    # HF's causal-LM loss: shift the logits and labels, mean over the valid targets.
    logits, labels = sample(torch.float64)
    token_nll, mask = token_nll_from_logits(logits, labels, shift=True)
    expected = F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)
    )
    torch.testing.assert_close(token_nll[mask].mean(), expected)


@pytest.mark.parametrize(
    ("logits", "targets", "kwargs", "pattern"),
    [
        (torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long), {}, r"logits must be a 3-D"),
        (torch.zeros(2, 3, 4, dtype=torch.long), torch.zeros(2, 3).long(), {}, r"floating dtype"),
        (torch.zeros(2, 3, 4), torch.zeros(2, 4).long(), {}, r"labels must be a \[B, T\]"),
        (torch.zeros(2, 3, 4), torch.zeros(2, 3), {}, r"labels must have an integer dtype"),
        (torch.zeros(2, 3, 4), torch.full((2, 3), 4), {}, r"labels must lie in \[0, 4\)"),
        (torch.zeros(2, 3, 4), torch.full((2, 3), -1), {}, r"found -1"),
        (torch.zeros(2, 3, 4), torch.full((2, 3), 4), {"shift": True}, r"found 4"),
        (torch.zeros(2, 3, 4), torch.zeros(2, 3).long(), {"shift": 1}, r"shift must be a bool"),
        (torch.zeros(2, 3, 4), torch.zeros(2, 3).long(), {"ignore_index": 1.0}, r"ignore_index"),
        (torch.zeros(2, 3, 4), torch.zeros(2, 3).long(), {"ignore_index": True}, r"ignore_index"),
    ],
)
def test_bad_input(logits, targets, kwargs, pattern) -> None:
    with pytest.raises(ValueError, match=pattern):
        token_nll_from_logits(logits, targets, **kwargs)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32], ids=str)
@pytest.mark.parametrize("vocab", [200, 256])
@pytest.mark.parametrize("shift", [False, True])
def test_every_integer_label_dtype_gives_the_int64_result(dtype, vocab, shift) -> None:
    # -100 in uint8 is 156, and a vocabulary of 256 is 0 there: labels compare as integers
    logits = torch.randn(2, 4, vocab, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([[156, 3, 199, 0], [199, 156, 7, 1]])
    nll, mask = token_nll_from_logits(logits, labels.to(dtype), shift=shift)
    nll64, mask64 = token_nll_from_logits(logits, labels, shift=shift)
    assert torch.equal(mask, mask64) and bool(mask.all())
    torch.testing.assert_close(nll, nll64, rtol=0, atol=0)
