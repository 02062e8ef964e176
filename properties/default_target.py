"""The default target: the bundled ``recon_impl`` stack behind the adapter every target has.

A stack target receives the suite's own config record (``properties.config``); this adapter
converts it to ``recon_impl.ReconstructionLossConfig`` field by field (the spec's fields,
by name) and calls ``recon_impl.reconstruction_losses``. ``recon-spec check`` loads it for
the target ``recon_impl:reconstruction_losses``, named or the default
(``properties.target.load_target``), so naming it explicitly gets the same verdict.

This is the only module of ``properties`` that imports ``recon_impl``: the checker does not
depend on the implementation it checks (a test parses every other module's imports).

Example:
    >>> import torch
    >>> from properties.config import ReconstructionLossConfig
    >>> out = reconstruction_losses(torch.tensor([[2.0, 4.0]]), torch.tensor([[1.0, 3.0]]),
    ...                             torch.tensor([[True, True]]), ReconstructionLossConfig())
    >>> out["reconstruction_loss"].item()
    3.0
"""

from __future__ import annotations

from typing import Any

import recon_impl
from spec.api import RECONSTRUCTION_FIELDS


def recon_impl_config(config: Any) -> recon_impl.ReconstructionLossConfig:
    """``config`` (any object with the seed's fields) as recon_impl's config."""
    return recon_impl.ReconstructionLossConfig(
        **{f.name: getattr(config, f.name) for f in RECONSTRUCTION_FIELDS}
    )


def reconstruction_losses(
    token_nll: Any, zfree_token_nll: Any, mask: Any, config: Any, **options: Any
) -> Any:
    """``recon_impl.reconstruction_losses`` on the suite's config record (``options``, such
    as ``validate``, are passed on)."""
    return recon_impl.reconstruction_losses(
        token_nll, zfree_token_nll, mask, recon_impl_config(config), **options
    )
