"""The examples in the docstrings of the training-side modules run and print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "recon_impl.batch_decomposition",
    "recon_impl.logits",
    "recon_impl.total_loss",
    "recon_impl.trainer_flags",
    "recon_impl.training_step",
    "recon_impl.zfree_reference_scale",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    failures, tried = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failures == 0
