"""A target that never returns, on any input (the plain one it is first called on too)."""

import time


def losses(token_nll, zfree_token_nll, mask, config):
    while True:
        time.sleep(1)
