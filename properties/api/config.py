"""The two config dataclasses (seed 001, "Reconstruction config"; API.md, "Config" and
"Validation"): frozen, exactly the seed's fields in its order with its defaults, the nested
reconstruction config, no shim of the old API, validation, run metadata."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from properties.api.invariant import ApiInvariant
from properties.api.probe import ApiProbe, Build, literal, qualified, same_value, short
from properties.api.strategies import (
    NOT_BOOL,
    NOT_REAL,
    NUMBER_TYPES,
    Assignment,
    ConfigValues,
    InvalidValue,
    OtherNumber,
    assignments,
    config_values,
    invalid_values,
    other_numbers,
    plain_number,
)
from properties.config import ReconstructionLossConfig
from properties.invariant import InvariantViolation, NamedInput
from properties.messages import naming
from spec.api import (
    CONFIG_CLASSES,
    DISENTANGLEMENT_CONFIG,
    LEGACY_FIELDS,
    RECONSTRUCTION_CONFIG,
    ROUTER_SUPPORT_SWITCH,
)
from spec.parameters import ALPHA, C

BOTH = (RECONSTRUCTION_CONFIG, DISENTANGLEMENT_CONFIG)
CONFIG_REFS = ("API.md#config",)


def _violation(message: str, drawn: Any, *failing: str) -> InvariantViolation:
    return InvariantViolation(message, case=drawn, failing=failing)


def _is_default_nested(probe: ApiProbe, value: Any) -> str | None:
    """Why ``value`` is not a default ``ReconstructionLossConfig`` of the module (or None).

    Field by field, not with ``==``: a config declared with ``eq=False`` compares by
    identity, and equality is no part of the seed's contract (API.md, "Config")."""
    nested_class = probe.attribute(RECONSTRUCTION_CONFIG)
    if not isinstance(value, nested_class):
        return f"a {qualified(type(value))}, not the module's {RECONSTRUCTION_CONFIG}"
    default = nested_class()
    differing = [
        f"{f.name}={literal(getattr(value, f.name))}"
        for f in dataclasses.fields(nested_class)
        if not same_value(getattr(value, f.name), getattr(default, f.name))
    ]
    if differing:
        return f"a {RECONSTRUCTION_CONFIG} with {', '.join(differing)}, not the default"
    return None


# --- config-fields -------------------------------------------------------------------------


def check_fields(probe: ApiProbe, class_name: str) -> None:
    expected = CONFIG_CLASSES[class_name]
    want = [f.name for f in expected]
    try:
        declared = probe.fields(class_name, drawn=class_name)
    except TypeError as error:
        raise _violation(
            f"{class_name} is not a dataclass: {error}", class_name, "fields"
        ) from error
    names = [name for name, _ in declared]
    problems = []
    missing = [n for n in want if n not in names]
    extra = [n for n in names if n not in want]
    if missing:
        problems.append(f"lacks the field{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    if extra:
        problems.append(f"has fields the seed does not: {', '.join(extra)}")
    if not missing and not extra and names != want:
        problems.append(f"declares its fields in the order {names}; the seed's is {want}")
    defaults = dict(declared)
    for spec_field in expected:
        if spec_field.name not in defaults:
            continue
        default = defaults[spec_field.name]
        if default is dataclasses.MISSING:
            problems.append(f"{spec_field.name} has no default")
        elif spec_field.rule == "nested":
            why = _is_default_nested(probe, default)
            if why:
                problems.append(f"the default of {spec_field.name} is {why}")
        elif not same_value(default, spec_field.default):
            problems.append(
                f"the default of {spec_field.name} is {literal(default)}; the seed's is "
                f"{literal(spec_field.default)}"
            )
    if not problems:  # the defaults as declared; and as an instance holds them
        instance = probe.build(Build.of(class_name), drawn=class_name)
        for spec_field in expected:
            value = getattr(instance, spec_field.name)
            if spec_field.rule == "nested":
                why = _is_default_nested(probe, value)
                if why:
                    problems.append(f"{class_name}().{spec_field.name} is {why}")
            elif not same_value(value, spec_field.default):
                problems.append(
                    f"{class_name}().{spec_field.name} is {literal(value)}; the seed's "
                    f"default is {literal(spec_field.default)}"
                )
    if problems:
        raise _violation(f"{class_name}: " + "; ".join(problems), class_name, "fields")


# --- config-frozen -------------------------------------------------------------------------


def _new_value(probe: ApiProbe, drawn: Assignment) -> Any:
    if isinstance(drawn.value, ReconstructionLossConfig):
        values = ConfigValues(drawn.value)
        return probe.build(values.build(RECONSTRUCTION_CONFIG), drawn=drawn)
    return drawn.value


def check_frozen(probe: ApiProbe, drawn: Assignment) -> None:
    cls = probe.attribute(drawn.class_name)
    params = getattr(cls, "__dataclass_params__", None)
    if not dataclasses.is_dataclass(cls) or params is None or not params.frozen:
        raise _violation(
            f"{drawn.class_name} is not a frozen dataclass (the seed's "
            "@dataclass(frozen=True)): a config can be changed after it was validated and "
            "logged",
            drawn,
            "frozen",
        )
    instance = probe.build(drawn.values.build(drawn.class_name), drawn=drawn)
    before = getattr(instance, drawn.field)
    new = _new_value(probe, drawn)
    try:
        probe.assign(instance, drawn.field, new, drawn=drawn)
    except dataclasses.FrozenInstanceError:
        pass
    except Exception as error:
        raise _violation(
            f"assigning {drawn.class_name}.{drawn.field} raised {type(error).__name__}: "
            f"{short(str(error))}, not dataclasses.FrozenInstanceError",
            drawn,
            "frozen",
        ) from error
    else:
        probe.note("the assignment goes through")
        raise _violation(
            f"{drawn.class_name}.{drawn.field} can be assigned: the config is mutable",
            drawn,
            "frozen",
        )
    if not same_value(getattr(instance, drawn.field), before):
        raise _violation(
            f"the refused assignment changed {drawn.field} all the same", drawn, "frozen"
        )
    changed = probe.replace(instance, drawn.field, new, drawn=drawn)
    if getattr(changed, drawn.field) != new or not same_value(
        getattr(instance, drawn.field), before
    ):
        raise _violation(
            f"dataclasses.replace(config, {drawn.field}=...) must give a changed copy and "
            "leave the config as it was",
            drawn,
            "frozen",
        )


# --- config-no-legacy ----------------------------------------------------------------------


@dataclass(frozen=True)
class LegacyUse:
    """An old name tried on a class: as a field, an attribute, a constructor argument."""

    class_name: str
    name: str
    value: Any

    def __repr__(self) -> str:
        return f"{self.class_name}({self.name}={literal(self.value)})"


@st.composite
def legacy_uses(draw: st.DrawFn) -> LegacyUse:
    return LegacyUse(
        draw(st.sampled_from(BOTH)),
        draw(st.sampled_from(LEGACY_FIELDS)),
        draw(st.sampled_from([True, False, 1.0, 0.0])),
    )


def check_no_legacy(probe: ApiProbe, drawn: LegacyUse) -> None:
    cls = probe.attribute(drawn.class_name)
    names = [name for name, _ in probe.fields(drawn.class_name, drawn=drawn)]
    want = [f.name for f in CONFIG_CLASSES[drawn.class_name]]
    extra = [n for n in names if n not in want]
    if extra:
        raise _violation(
            f"{drawn.class_name} keeps fields beside the seed's: {', '.join(extra)} (a hard "
            "migration leaves no shim)",
            drawn,
            "legacy",
        )
    instance = probe.build(Build.of(drawn.class_name), drawn=drawn)
    for holder, what in ((cls, drawn.class_name), (instance, f"{drawn.class_name}()")):
        if hasattr(holder, drawn.name):
            raise _violation(
                f"{what} has an attribute {drawn.name} (a shim of the old API); the hard "
                "migration removes it",
                drawn,
                "legacy",
            )
    try:
        probe.build(Build.of(drawn.class_name, {drawn.name: drawn.value}), drawn=drawn)
    except Exception:  # refused, by whatever error: the old API does not live on
        return
    probe.note("accepted")
    raise _violation(
        f"{drawn.class_name}({drawn.name}=...) is accepted: the old API lives on as a "
        "constructor argument",
        drawn,
        "legacy",
    )


# --- config-rejects-invalid ----------------------------------------------------------------


def _other_fields(drawn: InvalidValue | OtherNumber) -> list[tuple[str, ...]]:
    """The fields of the drawn class but the drawn one: an error names none of them."""
    return [(f.name,) for f in CONFIG_CLASSES[drawn.class_name] if f.name != drawn.field]


def _misnamed(drawn: InvalidValue | OtherNumber, error: ValueError) -> str | None:
    """What is wrong with how ``error`` names the drawn field (API.md, "What an error names":
    the field as a whole word, and no other field of the class), or None."""
    return naming(str(error), (drawn.field,), _other_fields(drawn)).problem


def beyond_float(value: Any) -> bool:
    """Whether ``value`` is an int that no float holds (10**400), which the OverflowError of
    ``float(v)`` or ``math.isfinite(v)`` may refuse (API.md, "Number types")."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    try:
        float(value)
    except OverflowError:
        return True
    return False


def check_rejects_invalid(probe: ApiProbe, drawn: InvalidValue) -> None:
    try:
        built = probe.build(drawn.build(), drawn=drawn)
    except ValueError as error:
        problem = _misnamed(drawn, error)
        if problem is not None:
            raise _violation(
                f"{drawn!r}: the ValueError {problem}; it says: {short(str(error))}",
                drawn,
                "ValueError",
            ) from error
        return
    except Exception as error:
        if isinstance(error, OverflowError) and beyond_float(drawn.value):
            return  # refused at construction, in Python's words for an int no float holds
        raise _violation(
            f"{drawn!r}: expected a ValueError naming {drawn.field}, got "
            f"{type(error).__name__}: {short(str(error))}",
            drawn,
            "ValueError",
        ) from error
    probe.note("accepted")
    stored = getattr(built, drawn.field, "?")
    raise _violation(
        f"{drawn!r}: accepted ({drawn.field} holds {literal(stored)}); construction must raise "
        f"a ValueError naming {drawn.field}",
        drawn,
        "ValueError",
    )


# --- config-number-types -------------------------------------------------------------------

#: what a number field does with a real number of another type (API.md, "Number types")
OTHER_NUMBER_RULE = (
    "a number of another type than int and float is either stored as a plain Python int or "
    "float equal to it, or refused with a ValueError naming the field"
)


def _stored_problem(stored: Any, given: Any) -> str | None:
    """Why ``stored`` is no plain JSON number equal to ``given`` (as given or as the float
    it equals; a numpy.float64 is a Python float), or None."""
    exact = plain_number(given)
    if isinstance(stored, bool) or not isinstance(stored, (int, float)):
        return "the run metadata's JSON cannot hold it"
    try:
        read_back = json.loads(json.dumps(stored))
    except (TypeError, ValueError) as error:
        return f"json.dumps says {type(error).__name__}: {short(str(error))}"
    if read_back != exact and read_back != float(exact):
        return f"it was given {literal(exact)}"
    return None


def _refusal_problem(drawn: OtherNumber, error: Exception) -> str | None:
    """Why refusing ``drawn`` with ``error`` is wrong, or None where API.md allows it."""
    if drawn.python_int:
        return "a Python int is a valid value of a float field (the seed's annotation takes it)"
    if not isinstance(error, ValueError):
        return OTHER_NUMBER_RULE
    problem = _misnamed(drawn, error)
    return None if problem is None else f"the ValueError {problem}"


def check_other_numbers(probe: ApiProbe, drawn: OtherNumber) -> None:
    try:
        built = probe.build(drawn.build(), drawn=drawn)
    except Exception as error:
        problem = _refusal_problem(drawn, error)
        if problem is None:
            return
        raise _violation(
            f"{drawn!r}: refused with {type(error).__name__}: {short(str(error))}; {problem}",
            drawn,
            "accepted" if drawn.python_int else "ValueError",
        ) from error
    stored = getattr(built, drawn.field)
    problem = _stored_problem(stored, drawn.value)
    if problem is not None:
        probe.note(f"stores {literal(stored)}")
        raise _violation(
            f"{drawn!r}: {drawn.field} is stored as {literal(stored)}, not as a plain Python "
            f"int or float equal to it ({problem})",
            drawn,
            "stored",
        )


# --- config-run-metadata -------------------------------------------------------------------


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"reconstruction.token_weight_alpha": ..., ...}`` of a nested mapping; keys that are
    flattened already (with "." or "/") come out the same way."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{str(key).replace('/', '.')}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


@dataclass(frozen=True)
class Metadata:
    """A config of ``class_name`` built from ``values``, whose metadata is read."""

    class_name: str
    values: ConfigValues

    def __repr__(self) -> str:
        return self.values.describe(self.class_name)


@st.composite
def metadata_cases(draw: st.DrawFn) -> Metadata:
    return Metadata(draw(st.sampled_from(BOTH)), draw(config_values()))


def _missing_from(metadata: Any, expected: dict[str, Any], what: str) -> list[str]:
    if not isinstance(metadata, Mapping):
        return [f"{what} is a {type(metadata).__name__}, not a mapping"]
    found = flatten(metadata)
    problems = []
    for name, value in expected.items():
        if name not in found:
            problems.append(f"{what} lacks {name}")
        elif not same_value(found[name], value):
            problems.append(f"{what}[{name!r}] is {literal(found[name])}, the config's {value!r}")
    return problems


def check_metadata(probe: ApiProbe, drawn: Metadata) -> None:
    instance = probe.build(drawn.values.build(drawn.class_name), drawn=drawn)
    expected = flatten(drawn.values.values(drawn.class_name))
    problems = _missing_from(probe.as_dict(instance, drawn=drawn), expected, "asdict(config)")
    if callable(getattr(instance, "to_dict", None)):
        metadata = probe.to_dict(instance, drawn=drawn)
        problems += _missing_from(metadata, expected, "config.to_dict()")
    if problems:
        alpha = next((p for p in problems if ALPHA.field in p), None)
        raise _violation(
            "the run metadata must carry every field, token_weight_alpha included: "
            + "; ".join([alpha] if alpha else problems[:4]),
            drawn,
            "metadata",
        )


def _default_values() -> ConfigValues:
    return ConfigValues(ReconstructionLossConfig())


def _first_field(class_name: str, rule: str) -> str:
    return next(f.name for f in CONFIG_CLASSES[class_name] if f.rule == rule)


def _every_kind_on_each_class() -> tuple[NamedInput, ...]:
    """Each refused kind of value (``NOT_REAL``, ``NOT_BOOL``) on a field of each class:
    validation is often one function per class, and a kind tried on one class alone
    leaves the other's to the draws."""
    named = []
    for class_name in CONFIG_CLASSES:
        kinds = [(_first_field(class_name, "non-negative"), NOT_REAL)]
        if any(f.rule == "bool" for f in CONFIG_CLASSES[class_name]):
            kinds.append((_first_field(class_name, "bool"), NOT_BOOL))
        for field_name, values in kinds:
            for value, why in values:
                invalid = InvalidValue(class_name, field_name, value, why)
                named.append(
                    NamedInput(f"{class_name}.{field_name}={literal(value)}", why, invalid)
                )
    return tuple(named)


def _every_type_on_each_class() -> tuple[NamedInput, ...]:
    """Each type of number tried besides float (``NUMBER_TYPES``) on a field of each class."""
    return tuple(
        NamedInput(
            f"{class_name}.{field_name}={literal(kind(2))}",
            "a Python int: every number field takes it"
            if kind is int
            else f"{literal(kind(2))}: stored as the plain number it equals, or refused",
            OtherNumber(class_name, field_name, kind(2)),
        )
        for class_name in CONFIG_CLASSES
        for field_name in (_first_field(class_name, "non-negative"),)
        for kind in NUMBER_TYPES
    )


INVARIANTS = (
    ApiInvariant(
        id="config-fields",
        group="config",
        statement="both configs are dataclasses with exactly the seed's fields, in its order, "
        "with its defaults; reconstruction defaults to a default ReconstructionLossConfig",
        spec_refs=CONFIG_REFS,
        strategy=lambda domain: st.sampled_from(BOTH),
        check=check_fields,
        needs=BOTH,
    ),
    ApiInvariant(
        id="config-frozen",
        group="config",
        statement="both configs are frozen: assigning a field raises FrozenInstanceError; "
        "dataclasses.replace gives a changed copy",
        spec_refs=CONFIG_REFS,
        strategy=lambda domain: assignments(),
        check=check_frozen,
        needs=BOTH,
        examples=tuple(
            NamedInput(
                f"assign-{f}",
                "the field a trainer is most tempted to change in place",
                Assignment(c, f, 0.0, _default_values()),
            )
            for c, f in ((RECONSTRUCTION_CONFIG, "raw_weight"), (DISENTANGLEMENT_CONFIG, "beta"))
        ),
    ),
    ApiInvariant(
        id="config-no-legacy",
        group="config",
        statement="no field, attribute or constructor argument of the old API "
        "(normalize_reconstruction_loss, ...) and no field beyond the seed's: a hard migration",
        spec_refs=(*CONFIG_REFS, "API.md#trainer-flags"),
        strategy=lambda domain: legacy_uses(),
        check=check_no_legacy,
        needs=BOTH,
    ),
    ApiInvariant(
        id="config-rejects-invalid",
        group="config",
        statement="construction rejects every invalid value of MATH.md Errors (negative, "
        "NaN, inf, not a number, a bool, c <= 0, ...) with a ValueError naming the field",
        spec_refs=("MATH.md#errors", "API.md#validation", "API.md#number-types", *CONFIG_REFS),
        strategy=lambda domain: invalid_values(),
        check=check_rejects_invalid,
        needs=BOTH,
        examples=(
            NamedInput(
                "huge-integer",
                "no float holds 10**400: a check that never converts it lets it through",
                InvalidValue(
                    RECONSTRUCTION_CONFIG, "raw_weight", 10**400, "an integer too large for a float"
                ),
            ),
            NamedInput(
                "nan-weight",
                "NaN < 0 is False: a check of the sign alone lets NaN through",
                InvalidValue(
                    RECONSTRUCTION_CONFIG, "token_weighted_weight", float("nan"), "not finite"
                ),
            ),
            NamedInput(
                "true-weight",
                "bool is an int subclass: a weight of True is a typo, not 1.0",
                InvalidValue(DISENTANGLEMENT_CONFIG, "beta", True, "a bool, not a number"),
            ),
            NamedInput(
                "zero-scale",
                "c = 0 divides R_dist and R_cc by zero",
                InvalidValue(RECONSTRUCTION_CONFIG, C.field, 0.0, "not > 0"),
            ),
            NamedInput(
                "string-switch",
                'the string "false" is truthy: it switches router support on',
                InvalidValue(
                    DISENTANGLEMENT_CONFIG,
                    ROUTER_SUPPORT_SWITCH,
                    "false",
                    "a string, not a bool (and truthy)",
                ),
            ),
            *_every_kind_on_each_class(),
        ),
    ),
    ApiInvariant(
        id="config-number-types",
        group="config",
        statement="an int is accepted; a numpy scalar or 0-dim tensor is stored as the plain "
        "int or float it equals, or refused with a ValueError naming the field",
        spec_refs=("API.md#number-types", "API.md#validation", *CONFIG_REFS),
        strategy=lambda domain: other_numbers(),
        check=check_other_numbers,
        needs=BOTH,
        examples=_every_type_on_each_class(),
    ),
    ApiInvariant(
        id="config-run-metadata",
        group="config",
        statement="the run metadata (dataclasses.asdict, and to_dict() where defined) carries "
        "every field with its value, token_weight_alpha included",
        spec_refs=CONFIG_REFS,
        strategy=lambda domain: metadata_cases(),
        check=check_metadata,
        needs=BOTH,
    ),
)
