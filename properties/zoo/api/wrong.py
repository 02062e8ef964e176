"""Wrong API objects: each is ``properties.zoo.api.correct.api`` with one mistake on.

Each mistake of ``correct.MISTAKES`` is an attribute here, spelt with ``_`` for ``-``, whose
value is the API object itself (a namespace, built when first asked for): point
``recon-spec check-api`` at one as ``properties.zoo.api.wrong:router_switch_ignored``.
``tests/properties/test_api_zoo.py`` checks that the invariant ``MISTAKES`` names for each
rejects it on its own, and that every API invariant rejects at least one of them.
"""

from __future__ import annotations

from types import SimpleNamespace

from properties.zoo.api.correct import MISTAKES, api

#: wrong API object's name -> its mistake
WRONG_APIS: dict[str, str] = {mistake.replace("-", "_"): mistake for mistake in MISTAKES}


def __getattr__(name: str) -> SimpleNamespace:
    if name not in WRONG_APIS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return api(WRONG_APIS[name])


def __dir__() -> list[str]:
    return sorted([*globals(), *WRONG_APIS])
