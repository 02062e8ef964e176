"""A target that ends its own process (os._exit(0), no error) on its fourth call."""

import os

from properties.default_target import reconstruction_losses

calls = 0


def losses(token_nll, zfree_token_nll, mask, config):
    global calls
    calls += 1
    if calls == 4:
        os._exit(0)
    return reconstruction_losses(token_nll, zfree_token_nll, mask, config)
