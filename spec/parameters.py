r"""The parameter registry: one declarative record per parameter of the stack.

Beside the term registry (``spec/terms.py``), each ``Parameter`` says everything the rest of
the project needs to know about one config value that is not a term's weight: its symbol
(with the assumptions MATH.md states for it), its LaTeX, its ``ReconstructionLossConfig``
field, its trainer flag, the seed's default, the rule a value must keep and the words of
the error that says so, what it means, how the conformance suite draws it, and how a drawn
input that the rule alone does not exclude is repaired.

Everything derives from ``PARAMETERS``: the symbols (``spec.symbols``), the expressions'
``Parameters`` (``spec.definitions``: ``p.alpha``, ``p.epsilon``, ``p.c``), the oracle's
arguments and its config check, ``config_mapping``, the API facts (``spec.api``), the
document's tables, and in the conformance suite the config record, the strategies' configs,
the edge cases and the validation corruptions.

Example:
    >>> BY_NAME["alpha"].field, BY_NAME["alpha"].default, BY_NAME["alpha"].edge_values
    ('token_weight_alpha', 1.0, (1.0, 0.0, 2.0, 0.5, 4.0))
    >>> RULES[EPSILON.rule].message("config.example_inverse_surprisal_epsilon", -1.0)
    'config.example_inverse_surprisal_epsilon must be >= 0, got -1.0'
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal

import sympy as sp

RuleName = Literal["non-negative", "positive"]


@dataclass(frozen=True)
class Rule:
    """What a real config value must be (MATH.md, "Errors"), and how an error says it."""

    name: RuleName
    #: the rule in an error message: "must be >= 0"
    text: str
    latex: str
    holds: Callable[[float], bool]

    def message(self, argument: str, value: Any) -> str:
        """The error's words: ``argument must be >= 0, got -1.0``."""
        return f"{argument} must be {self.text}, got {value!r}"


RULES: dict[str, Rule] = {
    "non-negative": Rule("non-negative", ">= 0", r"\ge 0", lambda value: value >= 0),
    "positive": Rule("positive", "> 0", "> 0", lambda value: value > 0),
}
#: the rule of every term weight
WEIGHT_RULE: RuleName = "non-negative"


@dataclass(frozen=True)
class Draw:
    """How the conformance suite draws a value (``properties/strategies.py``).

    Branches, each about as likely as the others, so that the values a run's first cases
    take (the run's cases cluster around them) are likely in every draw: ``edges`` (the
    first is the value a case shrinks to), then ``more_edges`` followed by the largest
    value drawn, then the range ``[low, near]``, then the whole range ``[low, high]``
    (``decades``: ``m * 10**k`` for integer ``k`` from ``log10(low)`` to ``log10(high)``,
    ``m`` in ``[1, 10)``). A branch is left out where it has nothing to draw.
    """

    edges: tuple[float, ...]
    low: float
    #: the largest value drawn, from the domain the inputs are drawn on (an object with
    #: ``max_alpha`` and ``max_loss``, properties' ``Domain``)
    high: Callable[[Any], float]
    more_edges: tuple[float, ...] | None = None
    near: float | None = None
    decades: bool = False


@dataclass(frozen=True)
class Repair:
    """A value the rule admits that is an error with some inputs (MATH.md, "Errors"): a
    random draw can hit it, so the suite's ``make_valid`` replaces it, and the validation
    invariant makes that error on purpose."""

    #: the value that is an error with such inputs
    value: float
    #: which inputs make it an error; the suite knows the condition by this name
    condition: str
    #: the error, as the validation invariant names its kind
    error: str
    #: what ``make_valid`` puts in its place
    replacement: float


@dataclass(frozen=True)
class Parameter:
    """One parameter of the stack: a config value beside the weights."""

    #: the attribute of ``spec.definitions.Parameters`` and the symbol's name
    name: str
    symbol: sp.Symbol
    latex: str
    #: the ``ReconstructionLossConfig`` field
    field: str
    #: the trainer flag that sets it (seed 001, "CLI surface"); None where there is none
    flag: str | None
    #: the seed's default
    default: float
    rule: RuleName
    #: what it is, in the seed's words ("Meaning of the config fields")
    summary: str
    draw: Draw
    repair: Repair | None = None

    @property
    def edge_values(self) -> tuple[float, ...]:
        """The values the suite draws on purpose (``draw``'s edges and ``near``), less the
        one that is an error with some inputs (``repair``): each valid with any input."""
        draw = self.draw
        values = (
            *draw.edges,
            *(draw.more_edges or ()),
            *(() if draw.near is None else (draw.near,)),
        )
        return tuple(v for v in values if self.repair is None or v != self.repair.value)


#: alpha is drawn up to this for comparisons with the oracle; beyond it the tolerance, which
#: grows with alpha (properties/tolerances.py), says little. Larger alphas are checked for
#: finiteness and concentration instead.
COMPARISON_MAX_ALPHA = 1e3
#: the smallest positive epsilon drawn: l/eps stays below 1e12 for losses up to 1e4, so
#: every exact output is representable in float32 (a smaller epsilon makes R_ex overflow,
#: which no implementation can help)
MIN_POSITIVE_EPSILON = 1e-8

ALPHA = Parameter(
    "alpha",
    sp.Symbol("alpha", nonnegative=True),
    r"\alpha",
    "token_weight_alpha",
    "--token-weighted-reconstruction-alpha",
    1.0,
    "non-negative",
    "tempering exponent used by both token-level terms",
    # exactly 1 (the default) and 0 first, then small and large values; no branch takes
    # fewer choices than the first (hypothesis shrinks towards fewer choices first)
    Draw(
        edges=(1.0, 0.0),
        low=0.0,
        high=lambda domain: min(domain.max_alpha, COMPARISON_MAX_ALPHA),
        more_edges=(2.0, 0.5),
        near=4.0,
    ),
)
EPSILON = Parameter(
    "epsilon",
    sp.Symbol("epsilon", nonnegative=True),
    r"\varepsilon",
    "example_inverse_surprisal_epsilon",
    "--example-inverse-surprisal-epsilon",
    1e-8,
    "non-negative",
    "denominator stabilizer for the example-level inverse-surprisal term",
    # the default, 0, and values up to larger than every loss
    Draw(
        edges=(MIN_POSITIVE_EPSILON, 0.0, 1.0),
        low=MIN_POSITIVE_EPSILON,
        high=lambda domain: max(10.0 * domain.max_loss, 1.0),
    ),
    Repair(
        value=0.0,
        condition="kept-example-without-surprisal",
        error="epsilon = 0 with an example whose bbar = 0",
        replacement=1e-8,
    ),
)
C = Parameter(
    "c",
    sp.Symbol("c", positive=True),
    "c",
    "zfree_reference_scale",
    None,
    1.0,
    "positive",
    "the fixed distribution-level z-free reference scale (c_base)",
    # 1 (the default), the extremes, and every order of magnitude between
    Draw(edges=(1.0, 1e-3, 1e3), low=1e-3, high=lambda domain: 1e3, decades=True),
)

#: every parameter, in the order of ``ReconstructionLossConfig``'s fields
PARAMETERS: tuple[Parameter, ...] = (ALPHA, EPSILON, C)
BY_NAME: dict[str, Parameter] = {p.name: p for p in PARAMETERS}
BY_FIELD: dict[str, Parameter] = {p.field: p for p in PARAMETERS}
#: the config fields of the parameters
PARAMETER_FIELDS: tuple[str, ...] = tuple(p.field for p in PARAMETERS)
#: the default of each parameter, by config field
PARAMETER_DEFAULTS: dict[str, float] = {p.field: p.default for p in PARAMETERS}


def check_value(argument: str, value: Any, rule: str) -> float:
    """``value`` as a float, or a ``ValueError`` naming ``argument``: a finite real number
    (not a bool) that keeps ``rule``."""
    # bool is an int subclass; a weight of True is a typo, not a number (numpy's scalars
    # are numbers.Real too)
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{argument} must be a real number, got {value!r}")
    try:
        converted = float(value)
    except OverflowError:  # an int too large for a float (10**400)
        converted = math.inf
    if not math.isfinite(converted):
        raise ValueError(f"{argument} must be finite, got {converted!r}")
    if not RULES[rule].holds(converted):
        raise ValueError(RULES[rule].message(argument, converted))
    return converted
