"""Input validation (MATH.md, "Errors"): opt-in, since a hot-path implementation may skip it.

Each bad input must raise ``ValueError`` whose message names the offending argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import torch
from hypothesis import strategies as st

from properties.cases import LossCase
from properties.invariant import Invariant, InvariantViolation
from properties.strategies import Domain, loss_cases
from properties.target import Probe


def _set_first_valid(rows, mask, value):
    i, j = next((i, j) for i, row in enumerate(mask) for j, v in enumerate(row) if v)
    rows = [list(r) for r in rows]
    rows[i][j] = value
    return tuple(map(tuple, rows))


def _bad_token_nll(case: LossCase, value: float) -> LossCase:
    return replace(case, token_nll=_set_first_valid(case.token_nll, case.mask, value))


def _bad_zfree(case: LossCase, value: float) -> LossCase:
    return replace(case, zfree_token_nll=_set_first_valid(case.zfree_token_nll, case.mask, value))


def _no_valid_token(case: LossCase, _: float) -> LossCase:
    return replace(case, mask=tuple(tuple(False for _ in row) for row in case.mask))


def _epsilon_zero_without_surprisal(case: LossCase, _: float) -> LossCase:
    zeros = tuple(
        tuple(0.0 if valid else v for v, valid in zip(row, m, strict=True))
        for row, m in zip(case.zfree_token_nll, case.mask, strict=True)
    )
    return replace(case, zfree_token_nll=zeros).with_config(example_inverse_surprisal_epsilon=0.0)


#: error kind -> (how to make it from a valid case, the argument the message must name)
CORRUPTIONS: dict[str, tuple[Callable[[LossCase, float], LossCase], str]] = {
    "non-finite token_nll at a valid position": (_bad_token_nll, "token_nll"),
    "non-finite zfree_token_nll at a valid position": (_bad_zfree, "zfree_token_nll"),
    "negative zfree_token_nll at a valid position": (_bad_zfree, "zfree_token_nll"),
    "no valid token in the batch": (_no_valid_token, "mask"),
    "epsilon = 0 with an example whose bbar = 0": (
        _epsilon_zero_without_surprisal,
        "epsilon",
    ),
}


@st.composite
def bad_value_cases(draw: st.DrawFn, domain: Domain):
    case = draw(loss_cases(domain))
    kind = draw(st.sampled_from(sorted(CORRUPTIONS)))
    if kind.startswith("negative"):
        value = -draw(st.sampled_from([1.0, 0.5, 1e-3]))
    else:
        value = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    make, _ = CORRUPTIONS[kind]
    return kind, make(case, value)


def _expect_value_error(probe: Probe, call: Callable[[], object], kind: str, argument: str):
    try:
        call()
    except ValueError as error:
        if argument not in str(error):
            raise InvariantViolation(
                f"{kind}: the ValueError must name {argument}, but says: {error}"
            ) from error
        return
    except Exception as error:
        raise InvariantViolation(
            f"{kind}: expected ValueError naming {argument}, got {type(error).__name__}: {error}"
        ) from error
    raise InvariantViolation(f"{kind}: expected ValueError naming {argument}, nothing was raised")


def check_bad_values(probe: Probe, drawn) -> None:
    kind, case = drawn
    _, argument = CORRUPTIONS[kind]
    _expect_value_error(probe, lambda: probe.call(case), kind, argument)


SHAPE_ERRORS = (
    "token_nll is 1-D",
    "zfree_token_nll has another shape",
    "mask has another shape",
    "token_nll is an integer tensor",
    "zfree_token_nll is an integer tensor",
)


@st.composite
def bad_tensor_cases(draw: st.DrawFn, domain: Domain):
    return draw(st.sampled_from(SHAPE_ERRORS)), draw(loss_cases(domain, dtypes=(torch.float32,)))


def check_bad_tensors(probe: Probe, drawn) -> None:
    kind, case = drawn
    l, b, m = case.tensors()
    argument = kind.split()[0]
    if kind == "token_nll is 1-D":
        l = l.reshape(-1)
    elif kind == "zfree_token_nll has another shape":
        b = torch.cat([b, b], dim=1)
    elif kind == "mask has another shape":
        m = torch.cat([m, m], dim=0)
    elif kind == "token_nll is an integer tensor":
        l = l.round().long()
    else:
        b = b.round().long()
    _expect_value_error(probe, lambda: probe.implementation(l, b, m, case.config), kind, argument)


INVARIANTS = (
    Invariant(
        id="rejects-bad-values",
        group="validation",
        statement="NaN/inf or negative b at a valid position, no valid token, or eps = 0 with "
        "bbar_i = 0 raise ValueError naming the argument",
        spec_refs=("MATH.md#errors",),
        strategy=lambda domain: bad_value_cases(domain),
        check=check_bad_values,
        opt_in=True,
    ),
    Invariant(
        id="rejects-bad-tensors",
        group="validation",
        statement="inputs that are not 2-D, differ in shape, or are not floating raise "
        "ValueError naming the argument",
        spec_refs=("MATH.md#errors",),
        strategy=lambda domain: bad_tensor_cases(domain),
        check=check_bad_tensors,
        opt_in=True,
    ),
)
