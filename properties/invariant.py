"""The invariant record: one checkable statement about an implementation.

Like an OpInfo entry, each record says everything the runners need: a stable id, a
one-line statement, where the spec states it, how to draw inputs, how to check one input,
and the edge cases that are always tried first (``examples``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hypothesis import strategies as st

from properties.strategies import DEFAULT_DOMAIN, Domain
from properties.target import Probe

#: groups in the order the runner reports them; "validation" is opt-in.
GROUPS: tuple[str, ...] = (
    "contract",
    "values",
    "identities",
    "algebra",
    "invariance",
    "gradients",
    "numerics",
    "scale",
    "validation",
)


class InvariantViolation(AssertionError):
    """An invariant does not hold; the message says what was expected for which input.

    ``case`` is the input whose outputs the message shows as observed (the diagnosis looks
    at that call and no other), ``failing`` the names of the outputs that miss, and
    ``non_finite`` those of them that are NaN or inf where the spec's value is finite;
    ``state``, where the check itself knows it, how the failure depends on calls made
    before it (``properties.runner.Failure.state``).
    """

    def __init__(
        self,
        message: str,
        *,
        expected: dict[str, float] | None = None,
        observed: dict[str, float] | None = None,
        case: Any = None,
        failing: tuple[str, ...] = (),
        non_finite: tuple[str, ...] = (),
        state: str | None = None,
    ) -> None:
        super().__init__(message)
        self.state = state
        self.expected = expected or {}
        self.observed = observed or {}
        self.case = case
        self.failing = failing
        #: what is NaN or inf where the spec's value is finite (an output, "gradient")
        self.non_finite = non_finite


@dataclass(frozen=True)
class NamedInput:
    """An input every run tries first (``@example``), because it once mattered: its name,
    why it is there, and the value the invariant's strategy would otherwise draw."""

    name: str
    why: str
    value: Any

    @property
    def case(self) -> Any:
        """The ``LossCase`` the value holds (its first field for a compound input)."""
        return getattr(self.value, "case", self.value)


@dataclass(frozen=True)
class Invariant:
    """A property every implementation of the stack must have.

    ``kind`` says what it checks: a stack callable (here), or an API module
    (``properties.api.invariant.ApiInvariant``); ``probe`` makes what its check calls.
    """

    kind: ClassVar[str] = "stack"
    known_groups: ClassVar[tuple[str, ...]] = GROUPS

    id: str
    group: str
    statement: str
    #: where the spec states it: ids in ``spec.IDENTITIES`` (each proven in docs/SPEC.md)
    #: or MATH.md sections (``MATH.md#section``)
    spec_refs: tuple[str, ...]
    #: inputs, drawn from the domain the implementation is checked on
    strategy: Callable[[Domain], st.SearchStrategy[Any]]
    #: raises ``InvariantViolation`` (or any exception) when the property fails on an input
    check: Callable[[Probe, Any], None]
    #: edge cases tried before any random input, each once mattered
    examples: tuple[NamedInput, ...] = field(default=())
    #: run only when asked for (input validation may be skipped on a hot path)
    opt_in: bool = False
    #: whether the invariant says anything on a domain (a narrowed domain may exclude it)
    applies: Callable[[Domain], bool] = field(default=lambda domain: True)
    #: a wrong implementation of ``properties.zoo.wrong`` that this invariant rejects on its
    #: own (``tests/properties/test_zoo.py`` checks it); None for the opt-in validation
    witness: str | None = None
    #: its input is checked as the first call of a fresh process: each worker makes that
    #: check as its first call of the target (``properties/worker.py``)
    fresh_process: bool = False
    #: references that fit a failure only where its input has something: (reference,
    #: whether the input shown has it); a report cites them there alone
    refs_when: tuple[tuple[str, Callable[[Any], bool]], ...] = field(default=())
    #: the share of the profile's examples it draws (its inputs may cost a hundred small
    #: ones each: the scale invariants'); its edge cases are tried whatever it is
    example_share: float = 1.0
    #: the most calls hypothesis's shrinker makes after its first failure (None: no bound):
    #: at training size a call costs a hundred small ones, and the size cuts that follow
    #: (``runner._fewer_cells``) take the size down faster than hypothesis does
    shrink_calls: int | None = None
    #: ``(probe, input, violation) -> violation or None``: the failure of the input a report
    #: shows, said more fully at the cost of more calls (a failure at training size against
    #: one size smaller); made once, after shrinking, with the failing check's probe
    bracket: Callable[[Any, Any, Any], Any] | None = None

    def __post_init__(self) -> None:
        if self.group not in self.known_groups:
            raise ValueError(f"invariant {self.id}: group must be one of {self.known_groups}")

    @property
    def all_refs(self) -> tuple[str, ...]:
        """Every reference, those that fit some failures only included."""
        return self.refs_for(None)

    def refs_for(self, shown: Any) -> tuple[str, ...]:
        """The references that fit a failure on ``shown`` (every one where it is unknown)."""
        return (
            *self.spec_refs,
            *(ref for ref, fits in self.refs_when if shown is None or fits(shown)),
        )

    def inputs(self, domain: Domain = DEFAULT_DOMAIN) -> st.SearchStrategy[Any]:
        return self.strategy(domain)

    def probe(self, implementation: Any, observer: Any = None) -> Any:
        """What the check of one input calls the target through (a fresh one per input)."""
        return Probe(implementation, observer)

    def unavailable(self, implementation: Any) -> str | None:
        """Why the target lacks what this invariant needs (None: it has everything)."""
        return None
