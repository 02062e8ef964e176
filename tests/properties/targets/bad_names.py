"""A correct target whose declaration of its own names names an argument the spec lacks."""

from properties.default_target import reconstruction_losses


def losses(token_nll, zfree_token_nll, mask, config):
    return reconstruction_losses(token_nll, zfree_token_nll, mask, config)


losses.argument_names = {"nll": "token_loss"}
