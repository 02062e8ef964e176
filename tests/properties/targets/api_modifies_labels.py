"""recon_impl's API whose token_nll_from_logits "cleans" the ignored labels in the caller's
tensor after computing on a copy: every value right, the caller's labels changed."""

from __future__ import annotations

import recon_impl
from recon_impl import *  # noqa: F403  (the rest of the API as it is)


def token_nll_from_logits(logits, labels, **keywords):
    out = recon_impl.token_nll_from_logits(logits, labels.clone(), **keywords)
    labels.clamp_(min=0)
    return out
