"""The API under check: naming it and loading it.

An API object exposes, under ``recon_impl``'s public names, the five objects of seed 001
(``spec.api.PUBLIC_NAMES``): usually a small adapter module that re-exports a trainer's own
objects. It is named as

* ``MODULE`` (a dotted name) or ``path/to/file.py``: the module is the API object;
* ``MODULE:NAME`` or ``path/to/file.py:NAME``: the module's attribute ``NAME`` (dotted for a
  nested one). A callable (a function, a class) is called with no arguments and what it
  returns is the API object (a factory); anything else, a namespace or a module, is the API
  object as it is.

``recon_impl`` is the default. Like a stack target, it is imported only in worker processes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from properties.escapes import describe
from properties.options import API_ENVIRONMENT_VARIABLE
from properties.target import TargetLoadError, import_module_named, is_file_target, split_target
from spec.api import PUBLIC_NAMES

DEFAULT_API = "recon_impl"
#: how an API is named, for messages
API_FORMS = "MODULE, path/to/file.py, or either with :NAME"
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def api_parts(name: str) -> tuple[str, str | None]:
    """``(module, NAME)`` of ``MODULE:NAME`` (split at the last colon: a file path may hold
    colons, a name never), ``(module, None)`` of a plain module or file."""
    module, sep, attribute = split_target(name)
    if not sep or is_file_target(attribute):  # `runs/10:00/api.py`: a path, no name after it
        return name, None
    return module, attribute


def api_target_name(given: str | None, environment: Mapping[str, str] = os.environ) -> str:
    """The API to check: ``given``, else ``$RECON_API``, else ``recon_impl``.

    An empty or malformed name is an error, never the default (``RECON_API=`` in a CI
    configuration that was never filled in must not check ``recon_impl`` instead).
    """
    if given is None:
        given = environment.get(API_ENVIRONMENT_VARIABLE)
        if given is None:
            return DEFAULT_API
        if not given.strip():
            raise TargetLoadError(
                f"${API_ENVIRONMENT_VARIABLE} is set but empty: set it to {API_FORMS}, or "
                f"unset it to check {DEFAULT_API}"
            )
    if not given.strip():
        raise TargetLoadError(f"the API module is an empty name: give {API_FORMS}")
    module, attribute = api_parts(given)
    if attribute is not None and not _DOTTED.fullmatch(attribute):
        what = "nothing" if not attribute.strip() else repr(attribute)
        raise TargetLoadError(
            f"{given!r} names {what} after its last ':': give MODULE:NAME with NAME an "
            "attribute holding the API object or a function of no arguments returning it"
        )
    if not is_file_target(module) and not _DOTTED.fullmatch(module):
        raise TargetLoadError(f"not a module name: {module!r} in {given!r} (give {API_FORMS})")
    return given


def load_api(name: str) -> Any:
    """The API object ``api_target_name`` accepted (``TargetLoadError`` if it cannot be had).

    Runs the module, and a factory: call it in a worker process, never in the one that
    reports.
    """
    name = api_target_name(name)
    module_name, attribute = api_parts(name)
    value = import_module_named(module_name)
    if attribute is None:
        return value
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise TargetLoadError(f"{module_name!r} has no attribute {attribute!r}")
        value = getattr(value, part)
    if not callable(value):
        return value
    try:
        return value()
    except BaseException as error:  # a factory may fail in any way, as a module at import
        raise TargetLoadError(
            f"{name} is called with no arguments to give the API object (it is callable), "
            f"and that raised {describe(error)}"
        ) from error


def missing_names(api: object, names: tuple[str, ...] = PUBLIC_NAMES) -> list[str]:
    """The names of ``names`` that ``api`` lacks (or holds as something not callable)."""
    return [name for name in names if not callable(getattr(api, name, None))]
