"""A target whose module ends the process while it is being imported."""

import sys

sys.exit(7)


def losses(token_nll, zfree_token_nll, mask, config):  # never reached
    raise AssertionError
