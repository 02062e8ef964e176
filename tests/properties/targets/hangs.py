"""A target that never returns when alpha is 0, and is the bundled stack otherwise.

When the environment variable HANG_MARKER names a file, it is created as the hang begins.
"""

import os
import time
from pathlib import Path

from properties.default_target import reconstruction_losses


def losses(token_nll, zfree_token_nll, mask, config):
    if config.token_weight_alpha == 0:
        if os.environ.get("HANG_MARKER"):
            Path(os.environ["HANG_MARKER"]).touch()
        while True:
            time.sleep(1)
    return reconstruction_losses(token_nll, zfree_token_nll, mask, config)
