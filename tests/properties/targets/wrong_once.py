"""A target whose fifth call returns a raw term off by 1 and is the bundled stack otherwise:
an input that fails once and passes when tried again."""

from properties.default_target import reconstruction_losses

calls = 0


def losses(token_nll, zfree_token_nll, mask, config):
    global calls
    calls += 1
    out = dict(reconstruction_losses(token_nll, zfree_token_nll, mask, config))
    if calls == 5:
        out["reconstruction_loss"] = out["reconstruction_loss"] + 1.0
    return out
