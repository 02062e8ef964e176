"""The two configs of seed 001 as a team writes them from the seed alone: a correct API.

The seed declares ``@dataclass(frozen=True)`` classes whose numbers are annotated ``float``.
A team that adds the validation of MATH.md, "Errors", to them in ``__post_init__`` checks
``isinstance(value, (int, float))`` (a bool refused: ``True`` is an int), then finiteness
with ``math.isfinite`` and the field's sign, each a ``ValueError`` naming the field, and keeps
the value as given. So ``raw_weight=1`` holds the int 1, ``numpy.float32(0.5)`` and a 0-dim
tensor are refused with a ``ValueError`` naming the field, and ``10**400`` is refused by the
``OverflowError`` of ``math.isfinite``: docs/API.md, "Number types", allows each, and
``recon-spec check-api properties.zoo.api.seed_dataclasses`` must pass. The rest of the API
(the flags, ``compute_total_loss``, ``token_nll_from_logits``) is
``properties.zoo.api.correct``'s, put around these classes by its ``api_of``, so that only the
configs differ from that API; the fields come from the spec's registries (``spec.api``).
"""

from __future__ import annotations

import math
from dataclasses import field, make_dataclass
from typing import Any

from properties.zoo.api.correct import api_of
from spec.api import CONFIG_CLASSES, DISENTANGLEMENT_CONFIG, RECONSTRUCTION_CONFIG, ConfigField
from spec.parameters import RULES


def check_field(owner: str, spec_field: ConfigField, value: Any) -> None:
    """A ``ValueError`` naming the field unless ``value`` keeps its rule."""
    where = f"{owner}.{spec_field.name}"
    if spec_field.rule == "nested":
        if not isinstance(value, ReconstructionLossConfig):
            kind = type(value).__name__
            raise ValueError(f"{where} must be a {RECONSTRUCTION_CONFIG}, got a {kind}")
    elif spec_field.rule == "bool":
        if not isinstance(value, bool):  # the string "false" is truthy
            raise ValueError(f"{where} must be True or False, got {value!r}")
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be an int or a float, got a {type(value).__name__}")
    elif not math.isfinite(value) or not RULES[spec_field.rule].holds(value):
        rule = RULES[spec_field.rule].text
        raise ValueError(f"{where} must be finite and {rule}, got {value!r}")


def declared(spec_field: ConfigField) -> tuple[str, type, Any]:
    """A field as the seed declares it: a ``float``, the ``bool`` switch, the nested config."""
    if spec_field.rule == "nested":
        return (
            spec_field.name,
            ReconstructionLossConfig,
            field(default_factory=ReconstructionLossConfig),
        )
    annotation = bool if spec_field.rule == "bool" else float
    return spec_field.name, annotation, field(default=spec_field.default)


def seed_dataclass(class_name: str) -> type:
    """``@dataclass(frozen=True) class <class_name>`` with the seed's fields, in its order, and
    a ``__post_init__`` that checks each."""

    def __post_init__(self: Any) -> None:
        for spec_field in CONFIG_CLASSES[class_name]:
            check_field(class_name, spec_field, getattr(self, spec_field.name))

    fields = [declared(spec_field) for spec_field in CONFIG_CLASSES[class_name]]
    namespace = {"__post_init__": __post_init__}
    cls = make_dataclass(class_name, fields, namespace=namespace, frozen=True)
    cls.__module__ = __name__
    return cls


ReconstructionLossConfig = seed_dataclass(RECONSTRUCTION_CONFIG)
DisentanglementLossConfig = seed_dataclass(DISENTANGLEMENT_CONFIG)

#: the other public names (spec.api.PUBLIC_NAMES) and the logits helper, the correct API's
globals().update(vars(api_of(ReconstructionLossConfig, DisentanglementLossConfig)))
