"""Under torch.compile: one graph (no break) with validate=False, and the eager values.

One small compile (forward and backward together) for each branch of the shares (alpha 0,
0.5, 1 and a power); skipped where torch.compile cannot run, for instance without a C
compiler for the inductor backend.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys

import pytest
import torch

from properties.tolerances import output_tolerance
from recon_impl import (
    RECONSTRUCTION_LOSS_NAMES,
    reconstruction_losses,
)
from tests.impl.configs import EVERY_TERM_CONFIG

HAS_C_COMPILER = any(shutil.which(cc) for cc in ("cc", "gcc", "clang", "c++", "g++"))

pytestmark = pytest.mark.skipif(
    not hasattr(torch, "compile") or sys.platform == "win32" or not HAS_C_COMPILER,
    reason="torch.compile (inductor) is unavailable on this platform",
)


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, EVERY_TERM_CONFIG.token_weight_alpha])
def test_compiled_values_and_gradient_match_eager(alpha: float) -> None:
    config = dataclasses.replace(EVERY_TERM_CONFIG, token_weight_alpha=alpha)

    def stack(token_nll, zfree_token_nll, mask):
        return reconstruction_losses(token_nll, zfree_token_nll, mask, config, validate=False)

    torch._dynamo.reset()
    generator = torch.Generator().manual_seed(0)
    l = torch.rand(4, 6, generator=generator) * 5
    b = torch.rand(4, 6, generator=generator) * 5
    mask = torch.rand(4, 6, generator=generator) > 0.3
    mask[:, 0] = True
    b[1] = 0.0  # no share mass: uniform shares
    junk = torch.full_like(l, float("nan"))
    l_junk, b_junk = torch.where(mask, l, junk), torch.where(mask, b, -junk)

    # fullgraph=True: a graph break on this path is an error, not a fallback
    compiled = torch.compile(stack, fullgraph=True, dynamic=False)
    compiled_leaf = l_junk.clone().requires_grad_()
    compiled_losses = compiled(compiled_leaf, b_junk, mask)
    compiled_losses.total_reconstruction_loss.backward()

    eager_leaf = l_junk.clone().requires_grad_()
    eager_losses = stack(eager_leaf, b_junk, mask)
    eager_losses.total_reconstruction_loss.backward()

    tolerance = output_tolerance(torch.float32, length=6, alpha=alpha)
    scale_losses = stack(l.abs(), b, mask)
    for name in RECONSTRUCTION_LOSS_NAMES:
        observed, expected = compiled_losses[name].item(), eager_losses[name].item()
        assert tolerance.allows(observed, expected, scale_losses[name].item()), (
            name,
            observed,
            expected,
        )
    scale = eager_leaf.grad.abs().max().item()
    torch.testing.assert_close(
        compiled_leaf.grad, eager_leaf.grad, rtol=tolerance.rtol, atol=tolerance.rtol * scale
    )
    assert torch.all(compiled_leaf.grad[~mask] == 0)


@pytest.mark.heavy
@pytest.mark.slow
def test_an_invalid_value_raises_the_eager_value_error() -> None:
    # Dynamo itself (backend "eager" is the quickest; inductor and aot_eager share it) once
    # turned the message of a negative zfree_token_nll into a TypeError.
    def stack(token_nll, zfree_token_nll, mask):
        return reconstruction_losses(token_nll, zfree_token_nll, mask, EVERY_TERM_CONFIG)

    torch._dynamo.reset()
    l = torch.full((3, 5), 2.0)
    b = torch.full((3, 5), 1.5)
    b[1, 2] = -0.5  # a finite float: dynamic=True traces it as a symbolic float
    mask = torch.ones(3, 5, dtype=torch.bool)
    pattern = r"^zfree_token_nll must be >= 0 .* found -0\.5 at \[1, 2\]"
    with pytest.raises(ValueError, match=pattern) as eager:
        stack(l, b, mask)
    with pytest.raises(ValueError, match=pattern) as compiled:
        torch.compile(stack, dynamic=True, backend="eager")(l, b, mask)
    assert str(compiled.value) == str(eager.value)
