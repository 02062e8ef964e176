"""The API module under check: naming it and importing it.

An API module exposes, under ``recon_impl``'s public names, the five objects of seed 001
(``spec.api.PUBLIC_NAMES``): usually a small adapter that re-exports a trainer's own
objects. It is named as ``MODULE`` (a dotted name) or ``path/to/file.py``, never as
``MODULE:CALLABLE``; ``recon_impl`` is the default. Like a stack target, it is imported
only in worker processes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from types import ModuleType

from properties.target import TargetLoadError, import_module_named, is_file_target
from spec.api import PUBLIC_NAMES

DEFAULT_API = "recon_impl"
API_ENVIRONMENT_VARIABLE = "RECON_API"
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def api_module_name(given: str | None, environment: Mapping[str, str] = os.environ) -> str:
    """The module to check: ``given``, else ``$RECON_API``, else ``recon_impl``.

    An empty or malformed name is an error, never the default (``RECON_API=`` in a CI
    configuration that was never filled in must not check ``recon_impl`` instead).
    """
    if given is None:
        given = environment.get(API_ENVIRONMENT_VARIABLE)
        if given is None:
            return DEFAULT_API
        if not given.strip():
            raise TargetLoadError(
                f"${API_ENVIRONMENT_VARIABLE} is set but empty: set it to a module name, or "
                f"unset it to check {DEFAULT_API}"
            )
    if not given.strip():
        raise TargetLoadError("the API module is an empty name: give MODULE or path/to/file.py")
    if ":" in given and not is_file_target(given):
        raise TargetLoadError(
            f"the API module must be a module (MODULE or path/to/file.py) exposing "
            f"{', '.join(PUBLIC_NAMES)}, not MODULE:CALLABLE: got {given!r}"
        )
    if not is_file_target(given) and not _DOTTED.fullmatch(given):
        raise TargetLoadError(f"not a module name: {given!r} (give MODULE or path/to/file.py)")
    return given


def load_api_module(name: str) -> ModuleType:
    """Import the module ``api_module_name`` accepted (``TargetLoadError`` if it fails)."""
    return import_module_named(api_module_name(name))


def missing_names(module: object, names: tuple[str, ...] = PUBLIC_NAMES) -> list[str]:
    """The names of ``names`` that ``module`` lacks (or holds as something not callable)."""
    return [name for name in names if not callable(getattr(module, name, None))]
