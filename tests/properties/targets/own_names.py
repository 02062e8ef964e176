"""A correct stack under a team's own names: its arguments are nll, ref_nll and valid, its
epsilon is eps, and its result keys are its own (``recon/raw``, ...). ``losses`` declares
them (docs/GUIDE.md, "Your own names"); ``undeclared`` is the same code
without the declaration, which the validation group rejects: its errors name none of the
spec's arguments."""

from __future__ import annotations

import re

from properties.default_target import reconstruction_losses
from spec.terms import LOSS_NAMES

#: the spec's names -> this team's
ARGUMENTS = {"token_nll": "nll", "zfree_token_nll": "ref_nll", "mask": "valid", "epsilon": "eps"}
KEYS = {name: "recon/" + name.removesuffix("_reconstruction_loss") for name in LOSS_NAMES}


def _team_stack(nll, ref_nll, valid, config):
    try:
        out = reconstruction_losses(nll, ref_nll, valid, config)
    except ValueError as error:
        text = str(error)
        for spec_name, own in sorted(ARGUMENTS.items(), key=lambda kv: -len(kv[0])):
            text = re.sub(rf"\b{spec_name}\b", own, text)
        raise ValueError(text.replace("zfree_", "")) from None
    return {KEYS[name]: value for name, value in out.items()}


def losses(token_nll, zfree_token_nll, mask, config):
    return _team_stack(token_nll, zfree_token_nll, mask, config)


losses.argument_names = ARGUMENTS
losses.output_names = KEYS


def undeclared(token_nll, zfree_token_nll, mask, config):
    out = _team_stack(token_nll, zfree_token_nll, mask, config)
    return {name: out[KEYS[name]] for name in LOSS_NAMES}
