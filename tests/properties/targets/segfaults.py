"""A target that segfaults whenever alpha is 0, and is the bundled stack otherwise."""

import ctypes

from properties.default_target import reconstruction_losses


def losses(token_nll, zfree_token_nll, mask, config):
    if config.token_weight_alpha == 0:
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    return reconstruction_losses(token_nll, zfree_token_nll, mask, config)
