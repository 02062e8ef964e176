"""What the API invariants draw: config values, invalid values, argv, loss cases with
auxiliary terms. Every record here is a frozen dataclass of plain values (the example
database saves them as JSON) and shrinks to a small, readable case: default fields left
out, flags with the value 1, auxiliary terms of 1.0.

The vocabulary (classes, fields, defaults, rules, flags, auxiliary terms) is the seed's,
from ``spec.api``; the loss cases are ``properties.strategies``'.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache, partial
from typing import Any

import numpy
import torch
from hypothesis import strategies as st

from properties.api.probe import Build, literal
from properties.cases import LossCase, format_mix, round_to
from properties.config import ReconstructionLossConfig
from properties.strategies import (
    DEFAULT_DOMAIN,
    Domain,
    configs,
    loss_cases,
    mix_coefficients,
    weights,
)
from properties.tolerances import computation_dtype
from spec.api import (
    AUXILIARY_NAMES,
    AUXILIARY_TERMS,
    CONFIG_CLASSES,
    DISENTANGLEMENT_CONFIG,
    DISENTANGLEMENT_FIELDS,
    FLAGS,
    NESTED_FIELD,
    RECONSTRUCTION_CONFIG,
    RECONSTRUCTION_DEFAULTS,
    RECONSTRUCTION_FIELDS,
    REMOVED_FLAG,
    ROUTER_SUPPORT_SWITCH,
    TOTAL_LOSS,
    ConfigField,
    effective_weights,
)
from spec.parameters import RULES
from spec.terms import TERM_NAMES, TOTAL_NAME

#: the DisentanglementLossConfig fields beside the nested one, with the seed's defaults
OUTER_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in DISENTANGLEMENT_FIELDS if f.name != NESTED_FIELD
}


def recon_values(config: ReconstructionLossConfig) -> dict[str, float]:
    """Every ``ReconstructionLossConfig`` field of the seed, by name."""
    return {f.name: getattr(config, f.name) for f in RECONSTRUCTION_FIELDS}


def _changed(values: dict[str, Any], defaults: dict[str, Any]) -> str:
    return ", ".join(
        f"{name}={literal(value)}" for name, value in values.items() if value != defaults[name]
    )


# --- valid configs -------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigValues:
    """Valid values of every field of both classes: ``reconstruction`` holds the nested
    ones (the suite's config record, ``properties.config``), ``outer`` the fields of
    ``DisentanglementLossConfig`` that differ from the seed's defaults."""

    reconstruction: ReconstructionLossConfig
    outer: tuple[tuple[str, Any], ...] = ()

    def values(self, class_name: str) -> dict[str, Any]:
        """Every field of ``class_name`` (the nested config as its own values)."""
        if class_name == RECONSTRUCTION_CONFIG:
            return recon_values(self.reconstruction)
        return {NESTED_FIELD: recon_values(self.reconstruction), **self.outer_values()}

    def outer_values(self) -> dict[str, Any]:
        return {**OUTER_DEFAULTS, **dict(self.outer)}

    def build(self, class_name: str) -> Build:
        """The construction with every field given explicitly (whatever the module's
        defaults: a changed default is another invariant's finding)."""
        nested = Build.of(RECONSTRUCTION_CONFIG, recon_values(self.reconstruction))
        if class_name == RECONSTRUCTION_CONFIG:
            return nested
        return Build.of(DISENTANGLEMENT_CONFIG, {NESTED_FIELD: nested, **self.outer_values()})

    def describe(self, class_name: str = DISENTANGLEMENT_CONFIG) -> str:
        """The config of ``class_name`` as a constructor call naming the non-default fields."""
        inner = _changed(recon_values(self.reconstruction), RECONSTRUCTION_DEFAULTS)
        if class_name == RECONSTRUCTION_CONFIG:
            return f"{RECONSTRUCTION_CONFIG}({inner})"
        outer = _changed(self.outer_values(), OUTER_DEFAULTS)
        return (
            f"{DISENTANGLEMENT_CONFIG}(reconstruction={RECONSTRUCTION_CONFIG}({inner})"
            f"{', ' if outer else ''}{outer})"
        )

    def __repr__(self) -> str:
        return self.describe()


@st.composite
def outer_values(draw: st.DrawFn) -> tuple[tuple[str, Any], ...]:
    """The auxiliary weights (0 and 1 first) and the router-support switch (True first)."""
    chosen: dict[str, Any] = {}
    for name, default in OUTER_DEFAULTS.items():
        value = (not draw(st.booleans())) if name == ROUTER_SUPPORT_SWITCH else draw(weights())
        if value != default:
            chosen[name] = value
    return tuple(chosen.items())


@st.composite
def config_values(draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN) -> ConfigValues:
    return ConfigValues(draw(configs(domain)), draw(outer_values()))


# --- invalid values (MATH.md, "Errors") ----------------------------------------------------


@dataclass(frozen=True)
class InvalidValue:
    """A construction with one invalid value: ``class_name(field=value)``, and why."""

    class_name: str
    field: str
    value: Any
    why: str

    def build(self) -> Build:
        return Build.of(self.class_name, {self.field: self.value})

    def __repr__(self) -> str:
        return f"{self.class_name}({self.field}={literal(self.value)})  # {self.why}"


#: values no number field accepts, of any type, and why (MATH.md, "Errors"; API.md, "Number
#: types"); an integer too large for a float may be refused with Python's OverflowError too
NOT_REAL: tuple[tuple[Any, str], ...] = (
    ("1.0", "a string, not a number"),
    (None, "None, not a number"),
    (True, "a bool, not a number"),
    (False, "a bool, not a number"),
    (10**400, "an integer too large for a float"),
    (-(10**400), "an integer too large for a float"),
    (numpy.True_, "a numpy bool, not a number"),
    (numpy.False_, "a numpy bool, not a number"),
    (torch.tensor(True), "a bool tensor, not a number"),
)
#: NaN and the infinities, as Python floats and as the other kinds of number (a conversion
#: to float keeps them: converting is no check)
NON_FINITE: tuple[tuple[Any, str], ...] = (
    (math.nan, "not finite"),
    (math.inf, "not finite"),
    (-math.inf, "not finite"),
    (numpy.float32(math.nan), "not finite"),
    (numpy.float32(math.inf), "not finite"),
    (torch.tensor(math.nan), "not finite"),
)
NOT_POSITIVE: tuple[tuple[Any, str], ...] = (
    (0.0, "not > 0"),
    (-0.0, "not > 0"),
    (0, "not > 0"),
    (numpy.float32(0.0), "not > 0"),
)
NOT_BOOL: tuple[tuple[Any, str], ...] = (
    ("false", "a string, not a bool (and truthy)"),
    (1, "an int, not a bool"),
    (0, "an int, not a bool"),
    (None, "None, not a bool"),
    (numpy.True_, "a numpy bool, not a bool (the run metadata's JSON cannot hold it)"),
    (torch.tensor(True), "a 0-dim tensor, not a bool"),
)
NOT_NESTED: tuple[tuple[Any, str], ...] = (
    (None, f"None, not a {RECONSTRUCTION_CONFIG}"),
    (f"{RECONSTRUCTION_CONFIG}()", f"a string, not a {RECONSTRUCTION_CONFIG}"),
    (1.0, f"a number, not a {RECONSTRUCTION_CONFIG}"),
)


@cache
def _invalid_for(rule: str) -> st.SearchStrategy[tuple[Any, str]]:
    negative = st.one_of(
        st.sampled_from([-1.0, -0.5, -1e-300, numpy.int64(-1), torch.tensor(-0.5)]),
        st.floats(-1e6, -1e-6),
    ).map(lambda v: (v, "negative"))
    if rule == "bool":
        return st.sampled_from(NOT_BOOL)
    if rule == "nested":
        return st.sampled_from(NOT_NESTED)
    fixed = NON_FINITE + NOT_REAL + (NOT_POSITIVE if rule == "positive" else ())
    return st.one_of(negative, st.sampled_from(fixed))


@st.composite
def invalid_values(draw: st.DrawFn) -> InvalidValue:
    class_name = draw(st.sampled_from(list(CONFIG_CLASSES)))
    chosen: ConfigField = draw(st.sampled_from(CONFIG_CLASSES[class_name]))
    value, why = draw(_invalid_for(chosen.rule))
    return InvalidValue(class_name, chosen.name, value, why)


# --- real numbers of other types -----------------------------------------------------------

#: the types a number field is tried with besides float (API.md, "Number types"), as makers
#: from a Python number; no float64 tensor or numpy.float64, which a reproduction's literal
#: would make as a float32 tensor and a Python float
NUMBER_TYPES: tuple[Callable[[Any], Any], ...] = (
    int,
    numpy.float32,
    numpy.float16,
    numpy.int64,
    numpy.int32,
    partial(torch.tensor, dtype=torch.float32),
    partial(torch.tensor, dtype=torch.int64),
)


def plain_number(value: Any) -> Any:
    """The Python int or float that a number of ``NUMBER_TYPES`` holds exactly."""
    if isinstance(value, (numpy.generic, torch.Tensor)):
        return value.item()
    return value


def _whole(kind: Callable[[Any], Any]) -> bool:
    """Whether ``kind`` holds whole numbers only (``torch.tensor(1)`` is an int64 tensor)."""
    return isinstance(plain_number(kind(1)), int)


@dataclass(frozen=True)
class OtherNumber:
    """A construction with one number field given as another type of real number."""

    class_name: str
    field: str
    value: Any

    @property
    def python_int(self) -> bool:
        """Whether the value is a Python int, which every number field must take."""
        return type(self.value) is int

    def build(self) -> Build:
        return Build.of(self.class_name, {self.field: self.value})

    def __repr__(self) -> str:
        return f"{self.class_name}({self.field}={literal(self.value)})"


@st.composite
def other_numbers(draw: st.DrawFn) -> OtherNumber:
    class_name = draw(st.sampled_from(list(CONFIG_CLASSES)))
    numeric = [f for f in CONFIG_CLASSES[class_name] if f.rule in ("non-negative", "positive")]
    chosen: ConfigField = draw(st.sampled_from(numeric))
    kind = draw(st.sampled_from(NUMBER_TYPES))
    whole = _whole(kind)
    value = draw(st.integers(1, 1000)) if whole else draw(st.sampled_from([0.5, 2.0, 1e-3, 7.25]))
    return OtherNumber(class_name, chosen.name, kind(value))


# --- assignments to a frozen config --------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    """``config.field = value`` on a config built from ``values`` (``value`` a valid one;
    for ``reconstruction``, the values of a new nested config)."""

    class_name: str
    field: str
    value: Any
    values: ConfigValues

    def __repr__(self) -> str:
        value = (
            f"{RECONSTRUCTION_CONFIG}(...)"
            if isinstance(self.value, ReconstructionLossConfig)
            else literal(self.value)
        )
        return f"config = {self.values!r}; config.{self.field} = {value}  # on {self.class_name}"


@st.composite
def assignments(draw: st.DrawFn) -> Assignment:
    class_name = draw(st.sampled_from(list(CONFIG_CLASSES)))
    chosen: ConfigField = draw(st.sampled_from(CONFIG_CLASSES[class_name]))
    if chosen.rule == "nested":
        value: Any = draw(configs())
    elif chosen.rule == "bool":
        value = not chosen.default
    elif chosen.rule == "positive":
        value = draw(st.sampled_from([2.0, 0.5, 10.0]))
    else:
        value = draw(st.sampled_from([2.0, 0.0, 0.5, 10.0]))
    return Assignment(class_name, chosen.name, value, draw(config_values()))


# --- flags ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlagValue:
    """``flag value`` (two words) or ``flag=value`` (one)."""

    flag: str
    text: str
    joined: bool = False

    def words(self) -> tuple[str, ...]:
        return (f"{self.flag}={self.text}",) if self.joined else (self.flag, self.text)


def argv_of(values: tuple[FlagValue, ...]) -> tuple[str, ...]:
    return tuple(word for value in values for word in value.words())


@dataclass(frozen=True)
class FlagValues:
    """An argv of some of the trainer flags, each with a valid value."""

    given: tuple[FlagValue, ...]

    def argv(self) -> tuple[str, ...]:
        return argv_of(self.given)

    def expected(self) -> dict[str, float]:
        """Every field of ``ReconstructionLossConfig``: ``float(text)`` where its flag is
        given, the seed's default elsewhere."""
        return {**RECONSTRUCTION_DEFAULTS, **{FLAGS[v.flag]: float(v.text) for v in self.given}}

    def __repr__(self) -> str:
        return f"argv={list(self.argv())!r}"


#: the rule each flag's value keeps (``spec.parameters.RULES``), by flag
FLAG_RULES: dict[str, str] = {f.flag: f.rule for f in RECONSTRUCTION_FIELDS if f.flag}


@cache
def flag_texts(rule: str) -> st.SearchStrategy[str]:
    """Valid values (finite, keeping ``rule``) as a user types them: 1 first, then others."""
    positive = not RULES[rule].holds(0.0)
    typed = [
        t for t in ("1", "0", "0.5", "2", "1e-3", "0.25", "3.0") if RULES[rule].holds(float(t))
    ]
    return st.one_of(
        st.sampled_from(typed),
        st.floats(0.0, 1e6, exclude_min=positive, allow_subnormal=False).map(repr),
        st.floats(1e-3 if positive else 0.0, 1e3, allow_subnormal=False).map(lambda v: f"{v:g}"),
    )


@st.composite
def flag_values(draw: st.DrawFn, *, min_size: int = 1) -> FlagValues:
    flags = draw(st.lists(st.sampled_from(list(FLAGS)), min_size=min_size, unique=True))
    return FlagValues(
        tuple(
            FlagValue(flag, draw(flag_texts(FLAG_RULES[flag])), draw(st.booleans()))
            for flag in flags
        )
    )


#: values no flag may take (each would make an invalid config)
INVALID_FLAG_TEXTS: tuple[str, ...] = (
    "-1",
    "-0.5",
    "nan",
    "inf",
    "-inf",
    "1e400",
    "abc",
    "",
    "true",
    "1,5",
)
#: numbers at the edge of a rule, invalid for the flags whose rule they break ("1e-400" is 0)
_EDGE_FLAG_TEXTS: tuple[str, ...] = ("0", "0.0", "-0.0", "1e-400")


def invalid_flag_texts(rule: str) -> tuple[str, ...]:
    """What a flag of ``rule`` must refuse: the common ones, and the edges ``rule`` breaks."""
    edges = tuple(t for t in _EDGE_FLAG_TEXTS if not RULES[rule].holds(float(t)))
    return (*INVALID_FLAG_TEXTS, *edges)


@dataclass(frozen=True)
class InvalidFlag:
    """One flag with a value it must refuse, among valid others."""

    bad: FlagValue
    others: FlagValues

    def argv(self) -> tuple[str, ...]:
        return (*self.others.argv(), *self.bad.words())

    def __repr__(self) -> str:
        return f"argv={list(self.argv())!r}"


@st.composite
def invalid_flags(draw: st.DrawFn) -> InvalidFlag:
    flag = draw(st.sampled_from(list(FLAGS)))
    text = draw(st.sampled_from(invalid_flag_texts(FLAG_RULES[flag])))
    # "-inf" as a word of its own reads as an option to argparse: joined, it is a value
    joined = draw(st.booleans()) or (text.startswith("-") and not text[1:2].isdigit())
    others = draw(flag_values(min_size=0))
    others = FlagValues(tuple(v for v in others.given if v.flag != flag))
    return InvalidFlag(FlagValue(flag, text, joined), others)


def shortest_unique_prefix(option: str, others: tuple[str, ...]) -> int:
    """The length of the shortest prefix of ``option`` that no other option starts with."""
    common = 0
    for other in others:
        n = 0
        while n < min(len(option), len(other)) and option[n] == other[n]:
            n += 1
        common = max(common, n)
    return min(common + 1, len(option))


#: the removed flag's shortest prefix that argparse takes for it among the seven and --help
REMOVED_PREFIX = shortest_unique_prefix(REMOVED_FLAG, (*FLAGS, "--help"))
#: how the removed boolean may be given: bare, with an explicit value, with a value word
REMOVED_SUFFIXES: tuple[tuple[str, ...], ...] = (
    (),
    ("=true",),
    ("=false",),
    ("=1",),
    ("=",),
    (" ", "true"),
    (" ", "0"),
)


@dataclass(frozen=True)
class RemovedSpelling:
    """The removed flag, spelt ``prefix`` of it plus ``suffix``, among valid flags."""

    length: int
    suffix: tuple[str, ...]
    before: FlagValues
    after: FlagValues

    @property
    def option(self) -> str:
        return REMOVED_FLAG[: self.length]

    def words(self) -> tuple[str, ...]:
        if self.suffix[:1] == (" ",):
            return (self.option, *self.suffix[1:])
        return (self.option + "".join(self.suffix),)

    def argv(self) -> tuple[str, ...]:
        return (*self.before.argv(), *self.words(), *self.after.argv())

    def __repr__(self) -> str:
        return f"argv={list(self.argv())!r}"


@st.composite
def removed_spellings(draw: st.DrawFn) -> RemovedSpelling:
    # the full name first (shrinks to it), then any unique prefix
    length = len(REMOVED_FLAG) - draw(st.integers(0, len(REMOVED_FLAG) - REMOVED_PREFIX))
    return RemovedSpelling(
        length,
        draw(st.sampled_from(REMOVED_SUFFIXES)),
        draw(flag_values(min_size=0)),
        draw(flag_values(min_size=0)),
    )


# --- compute_total_loss --------------------------------------------------------------------


@dataclass(frozen=True)
class TotalLossCase:
    """A call of ``compute_total_loss``: the stack's input (``case.config`` is the nested
    config), the other ``DisentanglementLossConfig`` fields that differ from the seed's
    defaults, and the auxiliary terms given, as (name, value) pairs."""

    case: LossCase
    outer: tuple[tuple[str, Any], ...] = ()
    auxiliary: tuple[tuple[str, float], ...] = ()

    def with_case(self, case: LossCase) -> TotalLossCase:
        """The same call on another stack input (of fewer cells: ``properties.runner``)."""
        return replace(self, case=case)

    @property
    def auxiliary_dtype(self) -> torch.dtype:
        """The auxiliary terms' dtype: what the stack computes in (float32 at least)."""
        return computation_dtype(self.case.dtype)

    def outer_values(self) -> dict[str, Any]:
        return {**OUTER_DEFAULTS, **dict(self.outer)}

    def effective(self) -> dict[str, float]:
        return effective_weights(self.outer_values())

    def build(self) -> Build:
        return ConfigValues(self.case.config, self.outer).build(DISENTANGLEMENT_CONFIG)

    def __repr__(self) -> str:
        outer = _changed(self.outer_values(), OUTER_DEFAULTS)
        given = ", ".join(f"{n}={literal(v)}" for n, v in self.auxiliary)
        return (
            f"TotalLossCase(case={self.case!r}, config={DISENTANGLEMENT_CONFIG}({outer}), "
            f"given=dict({given}))"
        )


@cache
def auxiliary_values() -> st.SearchStrategy[float]:
    """A model's auxiliary term: 1 first, signed (an entropy bonus is passed negated)."""
    return st.one_of(
        st.sampled_from([1.0, 0.5, 2.0, 0.0, -1.0]),
        st.floats(-1e3, 1e3, allow_subnormal=False),
    )


@st.composite
def total_loss_cases(
    draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN, *, need: str | None = None
) -> TotalLossCase:
    """Every term whose effective weight is not 0 is given; others now and then. ``need``
    names a term whose effective weight is forced to be non-zero."""
    case = draw(loss_cases(domain))
    outer = dict(draw(outer_values()))
    if need is not None:
        term = next(t for t in AUXILIARY_TERMS if t.name == need)
        if effective_weights({**OUTER_DEFAULTS, **outer})[need] == 0:
            outer[term.weight_field] = draw(st.one_of(st.just(1.0), st.floats(1e-3, 10.0)))
            if term.switch is not None:
                outer[term.switch] = True
        outer = {n: v for n, v in outer.items() if v != OUTER_DEFAULTS[n]}
    effective = effective_weights({**OUTER_DEFAULTS, **outer})
    dtype = computation_dtype(case.dtype)
    auxiliary = []
    for name in AUXILIARY_NAMES:
        if effective[name] != 0 or draw(st.booleans()):
            auxiliary.append((name, round_to(dtype, draw(auxiliary_values()))))
    return TotalLossCase(case, tuple(outer.items()), tuple(auxiliary))


@dataclass(frozen=True)
class MissingTerm:
    """A call of ``compute_total_loss`` that leaves out ``missing``, whose effective weight
    is not 0 (every other term with a non-zero effective weight is given)."""

    total: TotalLossCase
    missing: str

    @property
    def case(self) -> LossCase:
        return self.total.case

    def with_case(self, case: LossCase) -> MissingTerm:
        return replace(self, total=self.total.with_case(case))

    def __repr__(self) -> str:
        return f"{self.total!r} without {self.missing}"


@st.composite
def missing_terms(draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN) -> MissingTerm:
    missing = draw(st.sampled_from(AUXILIARY_NAMES))
    return MissingTerm(draw(total_loss_cases(domain, need=missing)), missing)


#: the entries of compute_total_loss a mix differentiates: the terms, J and total_loss
MIXED_ENTRIES: tuple[str, ...] = (*TERM_NAMES, TOTAL_NAME, TOTAL_LOSS)


@dataclass(frozen=True)
class TotalLossMix:
    """A call of ``compute_total_loss`` and the coefficient a_k of each differentiable entry
    (the terms, J and total_loss) in one mix, by name."""

    total: TotalLossCase
    coefficients: tuple[tuple[str, float], ...]

    @property
    def case(self) -> LossCase:
        return self.total.case

    def with_case(self, case: LossCase) -> TotalLossMix:
        return replace(self, total=self.total.with_case(case))

    def __repr__(self) -> str:
        return f"TotalLossMix(total={self.total!r}, mix={format_mix(self.coefficients)})"


@st.composite
def total_loss_mixes(draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN) -> TotalLossMix:
    """One entry alone (coefficient 1, the others 0), or a mix of them all with any real
    coefficients (zero and negative ones included)."""
    total = draw(total_loss_cases(domain))
    if draw(st.booleans()):
        coefficients = tuple((name, draw(mix_coefficients())) for name in MIXED_ENTRIES)
    else:
        alone = draw(st.sampled_from(MIXED_ENTRIES))
        coefficients = tuple((name, 1.0 if name == alone else 0.0) for name in MIXED_ENTRIES)
    return TotalLossMix(total, coefficients)


__all__ = [
    "MIXED_ENTRIES",
    "NUMBER_TYPES",
    "Assignment",
    "ConfigValues",
    "FlagValue",
    "FlagValues",
    "InvalidFlag",
    "InvalidValue",
    "MissingTerm",
    "OtherNumber",
    "RemovedSpelling",
    "TotalLossCase",
    "TotalLossMix",
    "assignments",
    "config_values",
    "flag_values",
    "invalid_flags",
    "invalid_values",
    "missing_terms",
    "other_numbers",
    "plain_number",
    "removed_spellings",
    "total_loss_cases",
    "total_loss_mixes",
]
