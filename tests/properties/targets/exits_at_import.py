"""A target whose module calls sys.exit(7) while it is being imported."""

import sys

sys.exit(7)


def losses(token_nll, zfree_token_nll, mask, config):  # never reached
    raise AssertionError
