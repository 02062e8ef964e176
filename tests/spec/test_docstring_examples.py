"""The examples in the spec's docstrings run and print what they show."""

from __future__ import annotations

import doctest

import pytest

import spec
import spec.parameters


@pytest.mark.parametrize("module", [spec, spec.parameters], ids=lambda m: m.__name__)
def test_docstring_examples(module) -> None:
    failures, tried = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failures == 0
