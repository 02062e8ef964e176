"""The API invariants: seed 001's whole surface, checked by ``recon-spec check-api MODULE``.

A module under check exposes, under ``recon_impl``'s public names, the two config
dataclasses, the trainer flags' two functions and ``compute_total_loss``
(``spec.api.PUBLIC_NAMES``). One module per group, as for the stack's invariants:

* ``properties.api.config`` — frozen dataclasses, the seed's fields and defaults, no
  legacy shim, validation, run metadata;
* ``properties.api.flags`` — the flags, their defaults, round trips, usage errors,
  the removed flag;
* ``properties.api.total_loss`` — the returned bundle, its values, the weighted total, the
  gradients of the total and of each term, the terms that must be given;
* ``properties.api.logits`` — opt-in (``--with-logits``): recon_impl's
  ``token_nll_from_logits`` beyond the seed, for a module that has one.

``INVARIANTS`` lists them in report order, ``by_id`` finds one, ``select`` picks by id or
group. The module is checked through ``properties.api.probe.ApiProbe``.
"""

from __future__ import annotations

from properties.api import config, flags, logits, total_loss
from properties.api.invariant import API_GROUPS, ApiInvariant
from spec.api import PUBLIC_NAMES

INVARIANTS: tuple[ApiInvariant, ...] = tuple(
    sorted(
        (*config.INVARIANTS, *flags.INVARIANTS, *total_loss.INVARIANTS, *logits.INVARIANTS),
        key=lambda invariant: API_GROUPS.index(invariant.group),
    )
)

_BY_ID = {invariant.id: invariant for invariant in INVARIANTS}
assert len(_BY_ID) == len(INVARIANTS), "invariant ids must be unique"


def by_id(invariant_id: str) -> ApiInvariant:
    try:
        return _BY_ID[invariant_id]
    except KeyError:
        raise KeyError(f"no API invariant {invariant_id!r}; known: {', '.join(_BY_ID)}") from None


def select(names: list[str] | None = None, *, include_opt_in: bool = False) -> list[ApiInvariant]:
    """API invariants by id or group name; all default ones (the opt-in ``logits`` group with
    ``include_opt_in``) when ``names`` is empty."""
    if not names:
        return [i for i in INVARIANTS if include_opt_in or not i.opt_in]
    chosen: list[ApiInvariant] = []
    for name in names:
        if name in API_GROUPS:
            matches = [i for i in INVARIANTS if i.group == name]
        else:
            matches = [by_id(name)]
        chosen.extend(i for i in matches if i not in chosen)
    return chosen


def skipped_by(invariant: ApiInvariant, skip: list[str] | tuple[str, ...]) -> list[str]:
    """The names of ``skip`` that ``invariant`` needs (it is left out when there is one)."""
    return [name for name in invariant.needs if name in skip]


__all__ = ["INVARIANTS", "PUBLIC_NAMES", "by_id", "select", "skipped_by"]
