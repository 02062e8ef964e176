"""Where failures are kept between runs: hypothesis's example database, one key per check.

The minimal input of a failure is saved in the database under ``.hypothesis/examples`` in
the working directory the run starts in (or ``$HYPOTHESIS_STORAGE_DIRECTORY/examples``,
hypothesis's own setting), under the key ``recon-spec <invariant id> <target>`` (with
`` on <device>`` for a device other than the CPU), and tried before anything else on the
next run of that invariant against that target on that device, whatever that run's profile
or seed: a failure a nightly run found keeps failing in CI until it is fixed, then is
dropped. A saved input that the run's domain leaves out (a narrower ``--max-loss``, other
``--dtypes``) is neither tried nor dropped; an entry that is not an input (a hand-edited
file) is dropped.

What is saved is the input itself, as JSON (``encode``): the same minimal input comes back,
whatever hypothesis version or strategy reads it, and loading it runs no code (no pickle).

``--no-database`` writes nothing at all: nothing is saved, and hypothesis's other files
(its cache of constants) go to a temporary directory of the run (``run_storage``), removed
at its end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy
import torch
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

#: hypothesis's own environment variable for its storage directory (default ``.hypothesis``)
STORAGE_VARIABLE = "HYPOTHESIS_STORAGE_DIRECTORY"
#: the packages whose records a saved input may hold
_RECORD_PACKAGES = ("properties.",)


def storage_directory() -> Path:
    """Hypothesis's storage directory: ``$HYPOTHESIS_STORAGE_DIRECTORY`` or ``.hypothesis``."""
    return Path(os.environ.get(STORAGE_VARIABLE) or ".hypothesis")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        fields = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"record": f"{kind.__module__}:{kind.__qualname__}", "fields": fields}
    if isinstance(value, tuple):
        return {"tuple": [_plain(v) for v in value]}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, numpy.generic):  # an invalid config value: numpy.True_, ...
        return {"numpy": type(value).__name__, "item": value.item()}
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        return {"tensor": value.item(), "of": str(value.dtype).removeprefix("torch.")}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot save a {type(value).__name__} in the example database")


def _value(data: Any) -> Any:
    if isinstance(data, list):
        return [_value(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "tuple" in data:
        return tuple(_value(v) for v in data["tuple"])
    if "dtype" in data:
        return _dtype(data["dtype"])
    if "numpy" in data:
        kind = getattr(numpy, data["numpy"])
        if not (isinstance(kind, type) and issubclass(kind, numpy.generic)):
            raise ValueError(f"not a numpy scalar type: {data['numpy']}")
        return kind(data["item"])
    if "tensor" in data:
        return torch.tensor(data["tensor"], dtype=_dtype(data["of"]))
    module, _, name = data["record"].partition(":")
    if not module.startswith(_RECORD_PACKAGES):
        raise ValueError(f"not a record of this suite: {data['record']}")
    kind = getattr(importlib.import_module(module), name)
    if not dataclasses.is_dataclass(kind):
        raise ValueError(f"not a record: {data['record']}")
    return kind(**{field: _value(v) for field, v in data["fields"].items()})


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"not a dtype: {name}")
    return dtype


def encode(value: Any) -> bytes:
    """An input the strategies drew, as bytes for the database."""
    return json.dumps(_plain(value), sort_keys=True).encode()


def decode(data: bytes) -> Any:
    """The input ``encode`` wrote (ValueError for anything else: valid JSON that is not a
    record of this suite, a record whose tensors cannot be made)."""
    try:
        value = _value(json.loads(data))
    except (KeyError, TypeError, AttributeError, ImportError, json.JSONDecodeError) as error:
        raise ValueError(f"not a saved input: {error}") from error
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        raise ValueError(f"not a saved input: a {type(value).__name__}, not a record")
    _check_cases(value)
    return value


def _check_cases(value: Any) -> None:
    """ValueError unless every ``LossCase`` in ``value`` makes its tensors."""
    from properties.cases import LossCase

    if isinstance(value, LossCase):
        try:
            value.tensors()
        except Exception as error:  # a hand-edited entry: any error of torch.tensor
            raise ValueError(f"not a saved input: {type(error).__name__}: {error}") from error
    elif isinstance(value, (tuple, list)):
        for item in value:
            _check_cases(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _check_cases(getattr(value, f.name))


class FailureStore:
    """The saved minimal failing inputs of one invariant against one target."""

    def __init__(self, use_database: bool, invariant_id: str, target: str, device: str = "cpu"):
        self.database: ExampleDatabase | None = None
        if use_database:
            self.database = DirectoryBasedExampleDatabase(storage_directory() / "examples")
        # the inputs of a --device cuda run are made there: another run's are not theirs
        on = "" if device == "cpu" else f" on {device}"
        self.key = f"recon-spec {invariant_id} {target}{on}".encode()

    def load(self) -> list[Any]:
        """Every saved input that still reads back (others are dropped)."""
        if self.database is None:
            return []
        inputs = []
        for data in self.database.fetch(self.key):
            try:
                inputs.append(decode(data))
            except ValueError:
                self.database.delete(self.key, data)
        return inputs

    def save(self, value: Any) -> bool:
        """Save ``value``; whether it is there now (hypothesis's database swallows the
        errors of a directory that cannot be written)."""
        if self.database is None:
            return False
        data = encode(value)
        self.database.save(self.key, data)
        return data in set(self.database.fetch(self.key))

    def forget(self, value: Any) -> None:
        """Drop a saved input that no longer fails."""
        if self.database is not None:
            self.database.delete(self.key, encode(value))


@contextlib.contextmanager
def run_storage(use_database: bool) -> Iterator[dict[str, str]]:
    """The environment a run's worker processes get: with the database on, the storage
    directory as an absolute path; without it, a temporary one, removed afterwards."""
    if use_database:
        # absolute: a target that changes the working directory must not move it
        yield {STORAGE_VARIABLE: str(storage_directory().resolve())}
        return
    folder = tempfile.mkdtemp(prefix="recon-spec-")
    try:
        yield {STORAGE_VARIABLE: folder}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
