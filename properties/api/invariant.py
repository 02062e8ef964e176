"""The record of an API invariant: an ``Invariant`` that checks an API module.

It is the same record as a stack invariant's (id, group, statement, spec references, drawn
inputs, named edge cases), run by the same runner (search, shrinking, the example
database, bounded shrinking, reports), with two differences: its check calls the module
through an ``ApiProbe``, and it ``needs`` some of the five public names. Where the module
lacks one, the invariant is *not checked* (and the run exits 2) unless ``--skip NAME``
left it out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from properties.api.module import missing_names
from properties.api.probe import ApiProbe
from properties.invariant import Invariant

#: the groups of the API invariants, in report order
API_GROUPS: tuple[str, ...] = ("config", "flags", "total-loss", "logits")


@dataclass(frozen=True)
class ApiInvariant(Invariant):
    kind: ClassVar[str] = "api"
    known_groups: ClassVar[tuple[str, ...]] = API_GROUPS
    #: the public names (``spec.api.PUBLIC_NAMES``) its check uses
    needs: tuple[str, ...] = ()

    def probe(self, implementation: Any, observer: Any = None) -> ApiProbe:
        return ApiProbe(implementation, observer)

    def unavailable(self, implementation: Any) -> str | None:
        missing = missing_names(implementation, self.needs)
        if not missing:
            return None
        names = ", ".join(missing)
        skips = " ".join(f"--skip {name}" for name in missing)
        return (
            f"not checked: the module has no {names} (this invariant needs "
            f"{', '.join(self.needs)}); add it, or pass {skips} to leave out what needs it"
        )
