"""Agreement with the spec at training sizes (MATH.md, "Inputs": any size and any strided
layout is valid, and the outputs depend on the values alone).

The inputs are ``ScaleCase`` descriptions (``properties/scale.py``): rows up to T = 65537,
batches up to 256, up to 2^20 positions in one call (``--max-length``, ``--max-batch``,
``--max-positions``), around every power of two. The reference is ``spec.array_oracle``,
the spec's formulas on float64 arrays, whose own error bound is added to the tolerance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import torch
from hypothesis import assume
from hypothesis import strategies as st

from properties.assertions import assert_tensor_close, assert_values_close
from properties.invariant import Invariant, InvariantViolation, NamedInput
from properties.invariants.common import ALL_NAMES, TERMS, TOTAL, representable
from properties.invariants.contract import assert_unmodified
from properties.invariants.gradients import CLOSED_FORMS, detached_terms
from properties.scale import RowSpan, ScaleCase, Values, around_powers_of_two
from properties.strategies import Domain, scale_cases, scale_valid
from properties.target import Probe
from properties.tolerances import (
    Tolerance,
    amplification,
    gradient_tolerance,
    tolerance_from,
)
from spec.array_oracle import evaluate_arrays, output_magnitudes, relative_error_bound
from spec.oracle import OracleResult
from spec.terms import OUTPUTS_SECTION, distinct_weights

#: what a scale invariant draws of the profile's examples: each input costs about as much
#: as a hundred small ones
EXAMPLE_SHARE = 0.15
#: the calls hypothesis's shrinker makes at training size, after which the size cuts take
#: over (``Invariant.shrink_calls``)
SHRINK_CALLS = 24


@lru_cache(maxsize=4)
def _cpu_tensors(case: ScaleCase) -> tuple[torch.Tensor, ...]:
    """The case's tensors on the CPU, built once for the references (never given to the
    target, which gets fresh ones each call)."""
    return replace(case, device="cpu").tensors()


@lru_cache(maxsize=8)
def expected_at_scale(case: ScaleCase) -> OracleResult:
    """``spec.array_oracle.evaluate_arrays`` on the case's tensors (as the target gets them)."""
    return evaluate_arrays(*_cpu_tensors(case), case.config)


@lru_cache(maxsize=8)
def magnitudes_at_scale(case: ScaleCase) -> dict[str, float]:
    """``spec.array_oracle.output_magnitudes``: the outputs with ``|l|`` for ``l``, which
    are the outputs themselves where no valid ``l`` is negative (one evaluation, not two)."""
    token_nll, zfree, mask = _cpu_tensors(case)
    if not bool((token_nll[mask.bool()] < 0).any()):
        return expected_at_scale(case).values
    return output_magnitudes(token_nll, zfree, mask, case.config)


def scale_tolerance(case: ScaleCase) -> Tolerance:
    """``properties.tolerances.tolerance_from`` for the case's dtype, length and alpha, with
    the share amplification of its rows and the array oracle's own bound."""
    token_nll, zfree, mask = _cpu_tensors(case)
    valid = mask.bool()
    kept = valid.any(dim=1)
    rows = max(int(kept.sum()), 1)
    row_sum_l = float(torch.where(valid, token_nll.double().abs(), 0.0).sum()) / rows
    row_sum_b = float(torch.where(valid, zfree.double(), 0.0).sum()) / rows
    alpha = case.config.token_weight_alpha
    return tolerance_from(
        case.dtype,
        length=case.length,
        alpha=alpha,
        amplification=amplification(row_sum_l, row_sum_b, case.length, case.config),
        oracle=relative_error_bound(case.length, alpha),
    )


def _gradient_tolerance(case: ScaleCase) -> Tolerance:
    alpha = case.config.token_weight_alpha
    oracle = relative_error_bound(case.length, alpha)
    return gradient_tolerance(case.dtype, length=case.length, alpha=alpha, oracle=oracle)


def _outputs_agree(values: dict[str, float], case: ScaleCase, what: str) -> None:
    assert_values_close(
        values,
        expected_at_scale(case).values,
        scale_tolerance(case),
        names=ALL_NAMES,
        scales=magnitudes_at_scale(case),
        what=f"{what}, on {case.describe()}",
        case=case,
    )


# --- the size a failure starts at ----------------------------------------------------------


#: a failure said against the same description one size smaller (``Invariant.bracket``)
Bracket = Callable[[Probe, ScaleCase, InvariantViolation], InvariantViolation | None]


def said_against_smaller(check: Callable[[Probe, ScaleCase], None]) -> Bracket:
    """The bracket of ``check``: its failure on a case says the size it starts at where the
    same description one position or one row smaller passes, "fails at 1 x 65, passes at
    1 x 64" (the smaller call is in the report's script). It costs up to two calls at
    training size, so the runner makes it once, on the input a report shows."""

    def bracket(
        probe: Probe, case: ScaleCase, violation: InvariantViolation
    ) -> InvariantViolation | None:
        smaller = _passing_smaller(probe, check, case)
        if smaller is None:
            return None
        return InvariantViolation(
            f"fails at {case.batch} x {case.length}, passes at {smaller.batch} x "
            f"{smaller.length}: {violation}",
            expected=violation.expected,
            observed=violation.observed,
            case=violation.case,
            failing=violation.failing,
            non_finite=violation.non_finite,
        )

    return bracket


def _passing_smaller(
    probe: Probe, check: Callable[[Probe, ScaleCase], None], case: ScaleCase
) -> ScaleCase | None:
    smaller = [(case.batch, case.length - 1), (case.batch - 1, case.length)]
    for batch, length in smaller:
        if batch < 1 or length < 1:
            continue
        candidate = case.resized(batch, length)
        if not candidate.has_valid_token or scale_valid(candidate) != candidate:
            continue  # not the same description at a smaller size: it says nothing
        before = len(probe.calls)
        try:
            check(probe, candidate)
        except Exception:  # it fails there too (or says nothing): no bracket from it
            if probe.escaped is not None:
                return None
            del probe.calls[before:]  # the script shows the failure and where it passes
            continue
        return candidate
    return None


def _values_agree(probe: Probe, case: ScaleCase) -> None:
    _outputs_agree(probe.values(case), case, "outputs against the spec's array oracle")


# --- oracle-agreement-at-scale ---------------------------------------------------------------


def check_oracle_agreement_at_scale(probe: Probe, case: ScaleCase) -> None:
    oracle = expected_at_scale(case)
    assume(representable(case, oracle.token_gradient))
    seen = probe.call(case, token_nll_requires_grad=True, backward_of=TOTAL)
    # a path taken only at some size may write into the caller's tensors (MATH.md, Inputs)
    assert_unmodified(seen, case, "{name} was modified by the call (forward and backward)")
    _outputs_agree(seen.values, case, "outputs against the spec's array oracle")
    grad = seen.token_nll_grad if seen.token_nll_grad is not None else torch.zeros(case.shape)
    assert_tensor_close(
        grad,
        torch.from_numpy(np.array(oracle.token_gradient)),
        _gradient_tolerance(case),
        what=f"dJ/dl against its closed form (MATH.md, Gradients), on {case.describe()}",
        case=case,
        failing=(TOTAL,),
    )


# --- output-gradients-at-scale -------------------------------------------------------------


def check_output_gradients_at_scale(probe: Probe, case: ScaleCase) -> None:
    oracle = expected_at_scale(case)
    checked = tuple(name for name in TERMS if representable(case, oracle.term_gradients[name]))
    assume(checked)
    gradients = probe.output_gradients(case, checked)
    detached = [name for name in checked if gradients[name] is None]
    if detached:
        raise detached_terms(detached, case)
    for name in checked:
        assert_tensor_close(
            gradients[name],
            torch.from_numpy(np.array(oracle.term_gradients[name])),
            _gradient_tolerance(case),
            what=f"d {name}/dl against its closed form {CLOSED_FORMS[name]}, "
            f"differentiated alone, on {case.describe()}",
            case=case,
            failing=(name,),
        )


# --- size-thresholds -----------------------------------------------------------------------


@dataclass(frozen=True)
class AcrossThreshold:
    """The same valid values at two sizes: ``case`` and ``case`` padded to ``batch x
    length`` (rows dropped, columns padded) across a size where a kernel may change path."""

    case: ScaleCase
    batch: int
    length: int

    @property
    def padded(self) -> ScaleCase:
        return self.case.padded_to(self.batch, self.length)

    def with_case(self, case: ScaleCase) -> AcrossThreshold | None:
        """The same crossing around a smaller ``case``: its other dimension may shrink,
        the crossed one stays (None where ``case`` changes it)."""
        if self.batch > self.case.batch:  # rows crossed: the length follows the case
            if case.batch != self.case.batch:
                return None
            return AcrossThreshold(case, self.batch, case.length)
        if case.length != self.case.length:
            return None
        return AcrossThreshold(case, case.batch, self.length)


#: batch sizes where implementations commonly change path
BATCH_CUTS = (64, 128, 256)


@st.composite
def across_thresholds(draw: st.DrawFn, domain: Domain) -> AcrossThreshold:
    """A case at a cut-over or one below it (a power of two in T from 16, or B at 64, 128 or
    256), and the same values padded one past it."""
    base = draw(scale_cases(domain))
    batch_cuts = [b for b in BATCH_CUTS if b < domain.scale_batch and b < domain.scale_positions]
    if batch_cuts and draw(st.booleans()):
        cut = draw(st.sampled_from(batch_cuts))
        length = max(1, min(base.length, domain.scale_positions // (cut + 1)))
        small = resized(base, draw(st.sampled_from((cut, cut - 1))), length)
        return AcrossThreshold(small, cut + 1, length)
    longest = min(domain.scale_length, domain.scale_positions)
    cuts = [n for n in around_powers_of_two(16, longest - 1) if n & (n - 1) == 0]
    cut = draw(st.sampled_from(cuts)) if cuts else max(1, longest - 1)
    below = max(1, draw(st.sampled_from((cut, cut - 1))))
    above = min(cut + 1, longest)
    batch = max(1, min(base.batch, domain.scale_positions // above))
    return AcrossThreshold(resized(base, batch, below), batch, above)


def resized(case: ScaleCase, batch: int, length: int) -> ScaleCase:
    """``case`` described at ``batch x length`` (``ScaleCase.resized``), as an input the
    spec accepts."""
    return scale_valid(case.resized(batch, length))


def check_size_thresholds(probe: Probe, pair: AcrossThreshold) -> None:
    small, large = pair.case, pair.padded
    oracle = expected_at_scale(small)
    assume(representable(small, oracle.token_gradient))
    _values_agree(probe, small)  # it passes below the threshold (or fails there, alone)
    observed = probe.values(large)
    tolerance = scale_tolerance(large)
    assert_values_close(
        observed,
        oracle.values,
        tolerance,
        names=ALL_NAMES,
        scales=magnitudes_at_scale(small),
        what=f"fails at {large.batch} x {large.length}, passes at {small.batch} x "
        f"{small.length}: outputs change when the batch is padded from {small.batch} x "
        f"{small.length} to {large.batch} x {large.length} (the added rows dropped, the added "
        f"columns padding: the same valid values), on {large.describe()}",
        case=large,
    )


_SMALL_AGREES = said_against_smaller(_values_agree)


def _threshold_bracket(
    probe: Probe, pair: AcrossThreshold, violation: InvariantViolation
) -> InvariantViolation | None:
    """Where the case below the threshold already fails, its size, as the oracle comparison
    at scale says it; a change across the threshold says both sizes already."""
    if violation.case is not pair.case:
        return None
    return _SMALL_AGREES(probe, pair.case, violation)


# --- the records ---------------------------------------------------------------------------


def _named(name: str, why: str, case: ScaleCase) -> NamedInput:
    # valid as written: no tensor is built at import (the fork server imports this module,
    # and a large torch op there would start the thread pool its children cannot use)
    return NamedInput(name, why, case)


#: every term weighted, each by a weight of its own (the registry's weight fields)
_WEIGHTS = distinct_weights((1.0, 0.5, 0.75, 1.25, 0.25))


def _config(**changes: float):
    from properties.config import ReconstructionLossConfig

    return ReconstructionLossConfig(**{**_WEIGHTS, **changes})


EDGE_CASES = (
    _named(
        "row-past-int16-count",
        "one row of 65537 valid positions: a count kept in 16 bits wraps, a tile of any "
        "power of two leaves a tail of one",
        ScaleCase(
            1,
            65537,
            Values(1.0, spikes=((0, 65536, 9.0),)),
            Values(2.0, dense=(7, 0.5, 4.0)),
            config=_config(),
        ),
    ),
    _named(
        "wide-batch-mixed-rows",
        "257 rows of 130 positions in five valid patterns (padding left and right, one "
        "token at the end, holes, dropped rows) with NaN padding: past B = 64, 128 and 256",
        ScaleCase(
            257,
            130,
            Values(dense=(3, 0.0, 8.0)),
            Values(dense=(11, 0.1, 6.0)),
            (RowSpan(), RowSpan(0, 77), RowSpan(100), RowSpan(-1), RowSpan(hole=5), RowSpan(0, 0)),
            padding=float("nan"),
            config=_config(token_weight_alpha=2.0),
        ),
    ),
    _named(
        "long-bfloat16-rows",
        "bfloat16 rows of 1025 dense positions: a count or a sum kept in bfloat16 is off past "
        "256 by more than float32's rounding at that length",
        ScaleCase(
            4,
            1025,
            Values(dense=(5, 0.5, 4.0)),
            Values(dense=(9, 0.5, 4.0)),
            config=_config(),
            dtype=torch.bfloat16,
        ),
    ),
    _named(
        "long-float16-rows-transposed",
        "float16 rows of 2049 dense positions given as transposed views",
        ScaleCase(
            3,
            2049,
            Values(dense=(1, 0.5, 4.0)),
            Values(dense=(2, 0.5, 4.0)),
            config=_config(token_weight_alpha=0.5),
            dtype=torch.float16,
            layouts=("transposed", "transposed", "transposed"),
        ),
    ),
    _named(
        "million-positions",
        "16 rows of 65536 positions, 2^20 in one call",
        ScaleCase(
            16,
            65536,
            Values(dense=(4, 0.0, 6.0)),
            Values(dense=(8, 0.25, 5.0)),
            (RowSpan(), RowSpan(0, 40000)),
            config=_config(),
        ),
    ),
)
_EDGE = {named.name: named for named in EDGE_CASES}

#: the cut-overs size-thresholds always tries: B past 128 with a dropped row, T past a tile
#: of 64, B x T past 2^16
THRESHOLD_CASES = (
    NamedInput(
        "rows-past-128",
        "128 rows of 33 positions in three patterns, padded with a dropped row to 129",
        AcrossThreshold(
            ScaleCase(
                128,
                33,
                Values(dense=(2, 0.0, 5.0)),
                Values(dense=(6, 0.5, 3.0)),
                (RowSpan(), RowSpan(0, 20), RowSpan(hole=3)),
                config=_config(),
            ),
            129,
            33,
        ),
    ),
    NamedInput(
        "positions-past-2^16",
        "2 rows of 32767 positions, padded to 32769 (65538 positions, 4 of them padding)",
        AcrossThreshold(
            ScaleCase(
                2, 32767, Values(dense=(1, 0.0, 4.0)), Values(dense=(3, 0.5, 4.0)), config=_config()
            ),
            2,
            32769,
        ),
    ),
)


INVARIANTS = (
    Invariant(
        id="oracle-agreement-at-scale",
        group="scale",
        statement="at training sizes (T to 65537, B to 256, 2^20 positions, any layout) the "
        "outputs and dJ/dl equal the spec's within the dtype's tolerance at that length",
        spec_refs=(OUTPUTS_SECTION, "MATH.md#inputs", "MATH.md#gradients"),
        strategy=lambda domain: scale_cases(domain),
        check=check_oracle_agreement_at_scale,
        bracket=said_against_smaller(check_oracle_agreement_at_scale),
        examples=EDGE_CASES,
        witness="int16_counts",
        example_share=EXAMPLE_SHARE,
        shrink_calls=SHRINK_CALLS,
    ),
    Invariant(
        id="output-gradients-at-scale",
        group="scale",
        statement="at training sizes each term's gradient, differentiated alone, equals its "
        "closed form",
        spec_refs=("MATH.md#gradients", "MATH.md#inputs"),
        strategy=lambda domain: scale_cases(domain),
        check=check_output_gradients_at_scale,
        bracket=said_against_smaller(check_output_gradients_at_scale),
        examples=(_EDGE["wide-batch-mixed-rows"], _EDGE["long-bfloat16-rows"]),
        witness="backward_drops_tail_tile",
        example_share=EXAMPLE_SHARE,
        shrink_calls=SHRINK_CALLS,
    ),
    Invariant(
        id="size-thresholds",
        group="scale",
        statement="the same valid values padded past a power of two in T, or past B = 64, 128 "
        "or 256 with dropped rows, give the same outputs",
        spec_refs=("MATH.md#inputs",),
        strategy=across_thresholds,
        check=check_size_thresholds,
        bracket=_threshold_bracket,
        examples=THRESHOLD_CASES,
        witness="fast_path_counts_dropped_rows",
        example_share=EXAMPLE_SHARE,
        shrink_calls=SHRINK_CALLS,
    ),
)
