"""Input validation (MATH.md, "Errors"): opt-in, since a hot-path implementation may skip it.

Each bad input must raise ``ValueError`` whose message names the offending argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from hypothesis import strategies as st

from properties.cases import LossCase
from properties.invariant import Invariant, InvariantViolation, NamedInput
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


@dataclass(frozen=True)
class BadInput:
    """A case broken in one of the ways MATH.md "Errors" lists (``kind``)."""

    kind: str
    case: LossCase


@st.composite
def bad_value_cases(draw: st.DrawFn, domain: Domain) -> BadInput:
    case = draw(loss_cases(domain))
    kind = draw(st.sampled_from(sorted(CORRUPTIONS)))
    if kind.startswith("negative"):
        value = -draw(st.sampled_from([1.0, 0.5, 1e-3]))
    else:
        value = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    make, _ = CORRUPTIONS[kind]
    return BadInput(kind, make(case, value))


def _expect_value_error(call: Callable[[], object], case: LossCase, kind: str, argument: str):
    def violation(message: str) -> InvariantViolation:
        return InvariantViolation(message, case=case, failing=("ValueError",))

    try:
        call()
    except ValueError as error:
        if argument not in str(error):
            raise violation(
                f"{kind}: the ValueError must name {argument}, but says: {error}"
            ) from error
        return
    except Exception as error:
        raise violation(
            f"{kind}: expected ValueError naming {argument}, got {type(error).__name__}: {error}"
        ) from error
    raise violation(f"{kind}: expected ValueError naming {argument}, nothing was raised")


def check_bad_values(probe: Probe, drawn: BadInput) -> None:
    _, argument = CORRUPTIONS[drawn.kind]
    _expect_value_error(lambda: probe.call(drawn.case), drawn.case, drawn.kind, argument)


#: error kind -> (the change to the tensors (l, b, m), the same in Python for the report)
SHAPE_ERRORS: dict[str, tuple[Callable[..., tuple[torch.Tensor, ...]], str]] = {
    "token_nll is 1-D": (
        lambda l, b, m: (l.reshape(-1), b, m),
        "token_nll_{k} = token_nll_{k}.reshape(-1)",
    ),
    "zfree_token_nll has another shape": (
        lambda l, b, m: (l, torch.cat([b, b], dim=1), m),
        "zfree_token_nll_{k} = torch.cat([zfree_token_nll_{k}] * 2, dim=1)",
    ),
    "mask has another shape": (
        lambda l, b, m: (l, b, torch.cat([m, m], dim=0)),
        "mask_{k} = torch.cat([mask_{k}] * 2, dim=0)",
    ),
    "token_nll is an integer tensor": (
        lambda l, b, m: (l.round().long(), b, m),
        "token_nll_{k} = token_nll_{k}.round().long()",
    ),
    "zfree_token_nll is an integer tensor": (
        lambda l, b, m: (l, b.round().long(), m),
        "zfree_token_nll_{k} = zfree_token_nll_{k}.round().long()",
    ),
    # MATH.md, "Errors": tensors on different devices. The meta device exists on every
    # machine, so the rule is checked without a second accelerator.
    "token_nll is on another device (meta) than zfree_token_nll and mask": (
        lambda l, b, m: (l.to("meta"), b, m),
        "token_nll_{k} = token_nll_{k}.to('meta')",
    ),
    # MATH.md, "Inputs": the mask is bool or an integer 0/1 tensor (the oracle rejects the
    # rest as spec.oracle's _mask_as_lists does).
    "mask is a floating tensor": (
        lambda l, b, m: (l, b, m.double()),
        "mask_{k} = mask_{k}.double()",
    ),
    "mask holds 2, an integer other than 0 and 1": (
        lambda l, b, m: (l, b, m.long() * 2),
        "mask_{k} = mask_{k}.long() * 2",
    ),
    # Empty shapes select no valid token (MATH.md, "Errors"): the code paths for a [0, T]
    # or [B, 0] batch are taken by no valid input, and must still raise.
    "mask selects no token of an empty batch (B = 0)": (
        lambda l, b, m: (l[:0], b[:0], m[:0]),
        "token_nll_{k}, zfree_token_nll_{k}, mask_{k} = "
        "token_nll_{k}[:0], zfree_token_nll_{k}[:0], mask_{k}[:0]",
    ),
    "mask selects no token of a batch without positions (T = 0)": (
        lambda l, b, m: (l[:, :0], b[:, :0], m[:, :0]),
        "token_nll_{k}, zfree_token_nll_{k}, mask_{k} = "
        "token_nll_{k}[:, :0], zfree_token_nll_{k}[:, :0], mask_{k}[:, :0]",
    ),
}


@st.composite
def bad_tensor_cases(draw: st.DrawFn, domain: Domain) -> BadInput:
    kind = draw(st.sampled_from(list(SHAPE_ERRORS)))
    return BadInput(kind, draw(loss_cases(domain, dtypes=(torch.float32,))))


def check_bad_tensors(probe: Probe, drawn: BadInput) -> None:
    change, code = SHAPE_ERRORS[drawn.kind]
    argument = drawn.kind.split()[0]
    _expect_value_error(
        lambda: probe.call_adjusted(drawn.case, change, (code,)), drawn.case, drawn.kind, argument
    )


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
        examples=(
            NamedInput(
                "negative-b-one-column",
                "A negative b in a batch of one column (T = 1): the row minimum of one value "
                "must still be read",
                BadInput(
                    "negative zfree_token_nll at a valid position",
                    LossCase(((1.0,), (2.0,)), ((0.5,), (-1.0,)), ((True,), (True,))),
                ),
            ),
        ),
    ),
    Invariant(
        id="rejects-bad-tensors",
        group="validation",
        statement="inputs not 2-D, of other shapes or devices, not floating, masks not 0/1, or "
        "empty ([0, T], [B, 0]) raise ValueError naming the argument",
        spec_refs=("MATH.md#errors",),
        strategy=lambda domain: bad_tensor_cases(domain),
        check=check_bad_tensors,
        opt_in=True,
    ),
)
