"""Agreement with the spec's high-precision oracle (MATH.md, every definition)."""

from __future__ import annotations

from hypothesis import strategies as st

from properties.assertions import assert_values_close
from properties.cases import DTYPE_NAMES, LossCase
from properties.features import has_zero_base_row
from properties.invariant import Invariant
from properties.invariants.common import ALL_NAMES, tolerance
from properties.invariants.edge_cases import named
from properties.layouts import VIEW_LAYOUTS
from properties.oracle import expected
from properties.strategies import Domain, logits_cases, loss_cases
from properties.target import Probe
from spec.terms import OUTPUTS_SECTION


def check_oracle_agreement(probe: Probe, case: LossCase) -> None:
    observed = probe.values(case)
    assert_values_close(
        observed,
        expected(case).values,
        tolerance(case),
        names=ALL_NAMES,
        what=f"{DTYPE_NAMES[case.dtype]} outputs against the spec's float64-or-better oracle",
        case=case,
    )


def _cases(domain: Domain, dtypes) -> st.SearchStrategy[LossCase]:
    return loss_cases(domain, dtypes=dtypes)


INVARIANTS = (
    Invariant(
        id="oracle-agreement",
        group="values",
        statement="float64 and float32 inputs: the outputs equal the spec's oracle "
        "within the dtype's tolerance",
        spec_refs=(OUTPUTS_SECTION,),
        refs_when=(("zero-base-uniform-fallback", has_zero_base_row),),
        strategy=lambda domain: _cases(domain, domain.full_precision_dtypes),
        check=check_oracle_agreement,
        applies=lambda domain: bool(domain.full_precision_dtypes),
        examples=tuple(
            named(name)
            for name in (
                "nan-padding",
                "alpha0-zero-surprisal",
                "tiny-alpha-zero-surprisal",
                "all-zero-surprisal-row",
                "zero-base-row-with-padding",
                "empty-row",
                "single-token-rows",
                "huge-alpha-float32",
                "ties-at-max",
                "large-epsilon-tiny-scale",
                "tail-share-float32",
                *(f"{layout}-views" for layout in VIEW_LAYOUTS),
            )
        ),
        witness="global_token_mean",
    ),
    Invariant(
        id="oracle-agreement-low-precision",
        group="values",
        statement="bfloat16 and float16 inputs are computed in float32: the outputs equal the "
        "oracle on the rounded inputs within float32's tolerance",
        spec_refs=("MATH.md#precision",),
        strategy=lambda domain: _cases(domain, domain.low_precision_dtypes),
        check=check_oracle_agreement,
        applies=lambda domain: bool(domain.low_precision_dtypes),
        examples=(
            named("half-precision"),
            named("bfloat16-integer-mask"),
            named("subnormal-tail-shares"),
        ),
        witness="low_precision_compute",
    ),
    Invariant(
        id="oracle-agreement-logits",
        group="values",
        statement="losses a language model makes (cross-entropy of logits, ignore_index "
        "padding) give the oracle's outputs",
        spec_refs=(OUTPUTS_SECTION,),
        strategy=lambda domain: logits_cases(domain),
        check=check_oracle_agreement,
        witness="alpha_ignored",
    ),
)
