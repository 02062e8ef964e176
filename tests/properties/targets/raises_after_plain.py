"""A target that answers the plain input, then raises what ``$RAISES`` names on every
later call (on half-precision inputs only with ``$RAISES_ONLY_HALF``): a skip, hypothesis's
own exceptions, an exit. None of them is an answer: each must give a non-zero verdict."""

import os
import sys
import unittest

import hypothesis
import pytest
import torch

from properties.default_target import reconstruction_losses

calls = 0


def _raise() -> None:
    kind = os.environ["RAISES"]
    if kind == "SkipTest":
        raise unittest.SkipTest("not supported")
    if kind == "pytest.skip":
        pytest.skip("not supported")
    if kind == "assume":
        hypothesis.assume(False)
    if kind == "Flaky":
        raise hypothesis.errors.Flaky("flaky")
    if kind == "SystemExit":
        sys.exit(3)
    if kind == "KeyboardInterrupt":
        raise KeyboardInterrupt
    raise AssertionError(f"unknown RAISES={kind}")


def losses(token_nll, zfree_token_nll, mask, config):
    global calls
    calls += 1
    half = token_nll.dtype in (torch.float16, torch.bfloat16)
    if calls > 1 and (half or not os.environ.get("RAISES_ONLY_HALF")):
        _raise()
    return reconstruction_losses(token_nll, zfree_token_nll, mask, config)
