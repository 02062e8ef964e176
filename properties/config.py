"""The suite's own config record: what a stack target receives as ``config``.

``ReconstructionLossConfig`` here is a frozen dataclass with every field of the seed's
config of that name, derived from the spec's registries: the weight field of each term of
``spec.terms`` and the field of each parameter of ``spec.parameters`` (``spec.api``'s
``RECONSTRUCTION_FIELDS``), in their order and with their defaults, validated by the spec's
rules (a ``ValueError`` naming the field and the rule). The attribute names are the seed's,
so an adapter that reads ``config.raw_weight`` or ``config.token_weight_alpha`` reads it
from this record as from any implementation's config. The checker owns its inputs: it
never depends on the implementation it checks (the bundled one gets its own config through
``properties/default_target.py``).

Example:
    >>> config = ReconstructionLossConfig(token_weighted_weight=0.5)
    >>> config.raw_weight, config.token_weighted_weight, config.zfree_reference_scale
    (1.0, 0.5, 1.0)
    >>> ReconstructionLossConfig(zfree_reference_scale=0.0)
    Traceback (most recent call last):
    ...
    ValueError: ReconstructionLossConfig.zfree_reference_scale must be > 0, got 0.0
"""

from __future__ import annotations

from dataclasses import field, fields, make_dataclass
from typing import Any

from spec.api import RECONSTRUCTION_CONFIG, RECONSTRUCTION_FIELDS
from spec.parameters import check_value

#: the rule of each field, by name
_RULES: dict[str, str] = {f.name: f.rule for f in RECONSTRUCTION_FIELDS}


def _validate(self: Any) -> None:
    # frozen: the checked value (a float) is set the way dataclasses set fields
    for name, rule in _RULES.items():
        value = check_value(f"{RECONSTRUCTION_CONFIG}.{name}", getattr(self, name), rule)
        object.__setattr__(self, name, value)


def _values(self: Any) -> dict[str, float]:
    return {f.name: getattr(self, f.name) for f in fields(self)}


ReconstructionLossConfig = make_dataclass(
    RECONSTRUCTION_CONFIG,
    [(f.name, float, field(default=f.default)) for f in RECONSTRUCTION_FIELDS],
    frozen=True,
    namespace={"__post_init__": _validate, "values": _values},
)
ReconstructionLossConfig.__module__ = __name__
ReconstructionLossConfig.__doc__ = """The seed's reconstruction config as the suite's record:
every weight field of ``spec.terms`` and every parameter of ``spec.parameters``, frozen,
validated by the spec's rules. ``values()``: every field by name."""
