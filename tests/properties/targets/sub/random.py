"""A correct adapter in a file named like a standard module: it must not replace it."""

from properties.default_target import reconstruction_losses


def losses(token_nll, zfree_token_nll, mask, config):
    return reconstruction_losses(token_nll, zfree_token_nll, mask, config)
