"""The stack's peak memory: at most four ``[B, T]`` buffers beyond its inputs.

Counted in bytes, not timed: the step (forward and backward) runs under ``torch.profiler``
with ``profile_memory=True``, which records every allocation and free of the CPU allocator
with its size; their running sum in time order is what the step holds above what was live
when it began (the inputs), and its maximum is the peak. The gradient the backward
returns counts as one of the buffers.
"""

from __future__ import annotations

import pytest
import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from recon_impl import ReconstructionLossConfig, reconstruction_losses
from tests.impl.configs import cycled_weights

B, T = 8, 8192
BUFFERS = 4
#: every term of the table weighted: each adds its own arithmetic to the peak
WEIGHTS = cycled_weights((1.0, 0.5, 0.25))


def peak_bytes(step) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    records = []
    nodes = list(prof.profiler.kineto_results.experimental_event_tree())
    while nodes:
        node = nodes.pop()
        nodes.extend(node.children)
        if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
            records.append((node.start_time_ns, node.extra_fields.alloc_size))
    running = peak = 0
    for _, size in sorted(records):
        running += size
        peak = max(peak, running)
    return peak


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 2.0, 1.3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_peak_memory_is_at_most_four_buffers(dtype: torch.dtype, alpha: float, validate: bool):
    generator = torch.Generator().manual_seed(0)
    l = (torch.rand(B, T, generator=generator) * 8).to(dtype)
    b = (torch.rand(B, T, generator=generator) * 8).to(dtype)
    mask = torch.rand(B, T, generator=generator) > 0.3
    config = ReconstructionLossConfig(**WEIGHTS, token_weight_alpha=alpha)
    leaf = l.requires_grad_()

    def step() -> None:
        losses = reconstruction_losses(leaf, b, mask, config, validate=validate)
        losses.total_reconstruction_loss.backward()

    # a buffer in the compute dtype (float32 at least); [B] vectors are far below the slack
    buffer = B * T * max(torch.finfo(dtype).bits, 32) // 8
    peak = peak_bytes(step)
    assert peak <= BUFFERS * buffer + buffer // 16, f"{peak / buffer:.3f} buffers"
    assert leaf.grad is not None
