"""The invariant catalog: every property an implementation of the stack must have.

One module per group; ``INVARIANTS`` lists them all in report order, ``by_id`` finds one.
"""

from __future__ import annotations

from properties.invariant import GROUPS, Invariant
from properties.invariants import (
    algebra,
    contract,
    gradients,
    identities,
    invariance,
    numerics,
    scale,
    validation,
    values,
)

INVARIANTS: tuple[Invariant, ...] = tuple(
    sorted(
        (
            *contract.INVARIANTS,
            *values.INVARIANTS,
            *identities.INVARIANTS,
            *algebra.INVARIANTS,
            *invariance.INVARIANTS,
            *gradients.INVARIANTS,
            *numerics.INVARIANTS,
            *scale.INVARIANTS,
            *validation.INVARIANTS,
        ),
        key=lambda invariant: GROUPS.index(invariant.group),
    )
)

_BY_ID = {invariant.id: invariant for invariant in INVARIANTS}
assert len(_BY_ID) == len(INVARIANTS), "invariant ids must be unique"


def by_id(invariant_id: str) -> Invariant:
    try:
        return _BY_ID[invariant_id]
    except KeyError:
        raise KeyError(f"no invariant {invariant_id!r}; known: {', '.join(_BY_ID)}") from None


def select(names: list[str] | None = None, *, include_opt_in: bool = False) -> list[Invariant]:
    """Invariants by id or group name; all default ones when ``names`` is empty."""
    if not names:
        return [i for i in INVARIANTS if include_opt_in or not i.opt_in]
    chosen: list[Invariant] = []
    for name in names:
        matches = [i for i in INVARIANTS if i.group == name] if name in GROUPS else [by_id(name)]
        chosen.extend(i for i in matches if i not in chosen)
    return chosen
