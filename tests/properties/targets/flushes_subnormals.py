"""A correct stack that turns on flush-to-zero on its first call, for speed, as a library
built with -ffast-math does when it loads: the suite's own drawing must not meet that mode,
and every later call of the target must (it raises where it does not)."""

import torch

from properties.default_target import reconstruction_losses

calls = 0


def losses(token_nll, zfree_token_nll, mask, config):
    global calls
    calls += 1
    smallest = torch.finfo(torch.float64).tiny
    if calls > 1 and smallest / 2 != 0.0:
        raise RuntimeError("flush-to-zero, turned on by the first call, is off in this call")
    torch.set_flush_denormal(True)
    return reconstruction_losses(token_nll, zfree_token_nll, mask, config)
