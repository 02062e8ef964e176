"""The examples in the spec's docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest

import spec

#: every module of the spec whose docstrings show an example (spec.plots needs matplotlib)
MODULES = [
    module
    for info in pkgutil.iter_modules(spec.__path__, "spec.")
    if info.name != "spec.plots"
    and ">>>" in inspect.getsource(module := importlib.import_module(info.name))
]


def test_the_modules_with_examples_are_found() -> None:
    assert {"spec.parameters", "spec.statistics"} <= {m.__name__ for m in MODULES}


@pytest.mark.parametrize("module", [spec, *MODULES], ids=lambda m: m.__name__)
def test_docstring_examples(module) -> None:
    failures, tried = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failures == 0
