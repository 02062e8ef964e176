"""The two questions every collective of recon_impl asks torch.distributed.

* ``process_group_in_use``: reduce over a group, or work on this process's data alone?
* ``collective_device``: where must a tensor live for an all-reduce over the group?
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def process_group_in_use(group: Any) -> bool:
    """True when ``group`` is given or torch.distributed is initialized (default group).

    Raises ``ValueError`` for a ``group`` given while torch.distributed is not initialized.
    """
    initialized = dist.is_available() and dist.is_initialized()
    if group is not None and not initialized:
        raise ValueError(
            "group was given but torch.distributed is not initialized: call "
            "torch.distributed.init_process_group first, or pass group=None"
        )
    return initialized


def collective_device(group: Any) -> torch.device:
    """The device of a tensor all-reduced over ``group``: CPU for gloo and mpi (and for a
    group with a ``cpu:`` backend), the current CUDA device for nccl, the current
    accelerator for other device backends."""
    backend = str(dist.get_backend(group)).lower()
    if backend in ("gloo", "mpi") or "cpu:" in backend:
        return torch.device("cpu")
    if "nccl" in backend:
        return torch.device("cuda", torch.cuda.current_device())
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6: xccl, hccl, ...
    if accelerator is not None and accelerator.is_available():
        kind = accelerator.current_accelerator().type
        return torch.device(kind, accelerator.current_device_index())
    return torch.device("cpu")
