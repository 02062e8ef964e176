"""A target whose raw term is off by 1 the first time it sees an input, and right on every
later call with the same values: hypothesis' replay of a failing input passes (Flaky)."""

from properties.default_target import reconstruction_losses

seen: set = set()


def losses(token_nll, zfree_token_nll, mask, config):
    out = dict(reconstruction_losses(token_nll, zfree_token_nll, mask, config))
    key = (repr(token_nll.tolist()), repr(zfree_token_nll.tolist()), repr(mask.tolist()), config)
    if key not in seen:
        seen.add(key)
        out["reconstruction_loss"] = out["reconstruction_loss"] + 1.0
    return out
