"""Naming the mistake behind a failure, from the known wrong variants of the term registry.

Each output's record in ``spec/terms.py`` lists its known variants (``spec/variants.py``):
what the output would be under a common mistake, recomputed in float64 on the failing
input. When an implementation's output misses the spec's value but hits a variant's, the
report says so: "your reconstruction_loss matches the global-token-mean variant".
Variants explain failures; they never decide them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from properties.assertions import close
from properties.cases import LossCase
from properties.tolerances import Tolerance, case_tolerance
from spec.parameters import PARAMETERS
from spec.terms import OUTPUTS, TERMS, TOTAL
from spec.variants import VariantBatch


@dataclass(frozen=True)
class Finding:
    """One sentence of a diagnosis, and what it is about: the output, and the known variant
    it matches (None for a NaN or inf without one); failures that share a variant share
    a cause in the report."""

    text: str
    output: str
    variant: str | None = None
    #: whether the variant gives the output's number; a NaN it gives too is weaker evidence
    #: (many variants are NaN on the same degenerate row): it is said, not grouped by
    finite: bool = True


def variant_batch(case: LossCase) -> VariantBatch:
    config = case.config
    return VariantBatch.of(
        case.token_nll,
        case.zfree_token_nll,
        case.mask,
        **{p.name: getattr(config, p.field) for p in PARAMETERS},
    )


def diagnose(
    case: LossCase,
    observed: dict[str, float],
    expected: dict[str, float],
    tolerance: Tolerance,
) -> list[Finding]:
    """One sentence per output that misses the spec but matches a known variant, one per
    output that is NaN or inf where the spec's value is finite, and one for a total that
    leaves a weighted term out."""
    batch = variant_batch(case)
    findings = []
    for output in OUTPUTS:
        name = output.name
        if name not in observed or close(observed[name], expected[name], tolerance, expected[name]):
            continue
        for variant in output.variants:
            with np.errstate(all="ignore"):
                try:
                    value = variant.compute(batch)
                except (ZeroDivisionError, ValueError, FloatingPointError):
                    continue
            if _agrees(value, expected[name], tolerance):
                continue  # the variant cannot tell itself from the spec on this input
            if _agrees(observed[name], value, tolerance):
                text = (
                    f"your {name} matches the {variant.title} variant: observed "
                    f"{observed[name]:.9g}, that variant gives {value:.9g}, the spec "
                    f"{expected[name]:.9g}"
                )
                findings.append(Finding(text, name, variant.title, math.isfinite(value)))
    named = {finding.output for finding in findings}
    # A non-finite output fails every comparison, including those of the relational
    # invariants, which compare the implementation with itself: say so first (where no
    # known variant gives the same NaN or inf).
    findings[:0] = [
        Finding(
            f"your {name} is {observed[name]} where the spec's is {expected[name]:.9g}: a NaN "
            "or inf fails every comparison (relational invariants included), so fix it first",
            name,
        )
        for name in expected
        if name in observed
        and name not in named
        and math.isfinite(expected[name])
        and not math.isfinite(observed[name])
    ]
    total = TOTAL.name
    if total in observed and not close(
        observed[total], expected[total], tolerance, expected[total]
    ):
        for term in TERMS:
            weight = getattr(case.config, term.weight_field)
            if weight == 0 or term.name not in observed:
                continue
            without = expected[total] - weight * expected[term.name]
            if close(observed[total], without, tolerance, expected[total]):
                text = (
                    f"your {total} matches the spec's total without the {term.name} term "
                    f"(weight {weight}): is that term left out of J?"
                )
                findings.append(Finding(text, total, f"total without the {term.name} term"))
    return findings


def _agrees(value: float, reference: float, tolerance: Tolerance) -> bool:
    """``value`` within tolerance of ``reference``, or both NaN: a variant that gives NaN
    where the output is NaN names it as well as an equal number does."""
    if math.isnan(value) and math.isnan(reference):
        return True
    return close(value, reference, tolerance, reference)


def diagnose_violation(error: BaseException, calls: list) -> list[Finding]:
    """``diagnose`` on the call whose outputs the failure shows as observed (the violation's
    ``case``), against the spec's values for that same input; nothing when there is none."""
    from properties.oracle import expected  # the oracle imports sympy: only when needed

    case = getattr(error, "case", None)
    if not isinstance(case, LossCase):
        return []
    call = next((c for c in reversed(calls) if c.case is case and c.values), None)
    if call is None:
        return []
    try:
        reference = expected(case).values
    except ValueError:  # an input the spec rejects (validation): nothing to compare with
        return []
    return diagnose(case, call.values, reference, case_tolerance(case))
