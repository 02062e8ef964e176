"""token_nll_from_logits: per-token cross-entropy and the mask from ignore_index."""

from __future__ import annotations

import pytest
import torch

from recon_impl import token_nll_from_logits


def test_matches_log_softmax() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 7, generator=generator, dtype=torch.float64)
    targets = torch.randint(0, 7, (2, 5), generator=generator)
    targets[1, 3:] = -100
    token_nll, mask = token_nll_from_logits(logits, targets)
    expected = -torch.log_softmax(logits, dim=-1).gather(-1, targets.clamp(min=0)[..., None])[
        ..., 0
    ]
    assert torch.equal(mask, targets != -100)
    torch.testing.assert_close(token_nll[mask], expected[mask])
    assert token_nll[~mask].eq(0).all()
    assert token_nll.shape == (2, 5) and token_nll.dtype == torch.float64


def test_custom_ignore_index_and_gradient() -> None:
    logits = torch.zeros(1, 3, 4, requires_grad=True)
    targets = torch.tensor([[0, 9, 3]])
    token_nll, mask = token_nll_from_logits(logits, targets, ignore_index=9)
    assert mask.tolist() == [[True, False, True]]
    token_nll.sum().backward()
    assert logits.grad[0, 1].eq(0).all()


def test_low_precision_logits_are_not_upcast_here() -> None:
    logits = torch.randn(2, 3, 5).to(torch.bfloat16)
    token_nll, _ = token_nll_from_logits(logits, torch.zeros(2, 3, dtype=torch.long))
    assert token_nll.dtype == torch.bfloat16


@pytest.mark.parametrize(
    ("logits", "targets", "pattern"),
    [
        (torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long), r"logits must be a 3-D"),
        (torch.zeros(2, 3, 4, dtype=torch.long), torch.zeros(2, 3).long(), r"floating dtype"),
        (torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long), r"targets must be a \[B, T\]"),
        (torch.zeros(2, 3, 4), torch.zeros(2, 3), r"targets must have an integer dtype"),
        (torch.zeros(2, 3, 4), torch.full((2, 3), 4), r"targets must lie in \[0, 4\)"),
        (torch.zeros(2, 3, 4), torch.full((2, 3), -1), r"found -1"),
    ],
)
def test_bad_input(logits, targets, pattern) -> None:
    with pytest.raises(ValueError, match=pattern):
        token_nll_from_logits(logits, targets)
