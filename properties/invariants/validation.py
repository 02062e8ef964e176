"""Input validation (MATH.md, "Errors"): opt-in, since a hot-path implementation may skip it.

Each bad input must raise ``ValueError`` whose message names the offending argument as a
whole word, and no other argument the broken rule does not relate to it (docs/API.md, "What
an error names": ``properties/messages.py``), and, for the tensors' rules, says the rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

import torch
from hypothesis import strategies as st

from properties.cases import LossCase
from properties.invariant import Invariant, InvariantViolation, NamedInput
from properties.messages import naming
from properties.strategies import REPAIR_CONDITIONS, Domain, loss_cases
from properties.target import Probe
from spec.parameters import BY_NAME, PARAMETERS, Parameter

#: the tensors of a call; each rule says which of them (beside the one it is about) an error
#: may name
TENSORS = ("token_nll", "zfree_token_nll", "mask")


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


def _repair_undone(parameter: Parameter) -> Callable[[LossCase, float], LossCase]:
    """What ``make_valid`` repairs, made on purpose: the parameter at its repair's value on
    inputs of its repair's condition (epsilon = 0 with an example whose bbar = 0)."""
    repair = parameter.repair
    assert repair is not None
    make = REPAIR_CONDITIONS[repair.condition].make
    return lambda case, _: make(case).with_config(**{parameter.field: repair.value})


class Corruption(NamedTuple):
    """A way to break the values of a valid case, and what the ``ValueError`` names."""

    make: Callable[[LossCase, float], LossCase]
    #: the argument the message must name
    argument: str
    #: the arguments the broken rule relates to it, which the message may name too: the
    #: mask says where a value rule applies; a parameter's error needs some inputs
    related: tuple[str, ...] = ()


#: error kind -> how to make it from a valid case, and what its message names
CORRUPTIONS: dict[str, Corruption] = {
    "non-finite token_nll at a valid position": Corruption(_bad_token_nll, "token_nll", ("mask",)),
    "non-finite zfree_token_nll at a valid position": Corruption(
        _bad_zfree, "zfree_token_nll", ("mask",)
    ),
    "negative zfree_token_nll at a valid position": Corruption(
        _bad_zfree, "zfree_token_nll", ("mask",)
    ),
    # a valid token is the mask's, of every tensor
    "no valid token in the batch": Corruption(_no_valid_token, "mask", TENSORS),
    # a parameter's value that is an error only with some inputs (the parameter registry)
    **{
        p.repair.error: Corruption(_repair_undone(p), p.name, TENSORS)
        for p in PARAMETERS
        if p.repair is not None
    },
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
    return BadInput(kind, one_rule_broken(kind, CORRUPTIONS[kind].make(case, value)))


def one_rule_broken(kind: str, broken: LossCase) -> LossCase:
    """``broken`` with the parameters whose error it is not (``kind``) off the values that are
    an error with some inputs: a negative b may make a row's bbar 0, which with epsilon = 0
    is the other error of MATH.md "Errors", and which one a target says first is its own
    choice."""
    for parameter in PARAMETERS:
        repair = parameter.repair
        undone = repair is not None and getattr(broken.config, parameter.field) == repair.value
        if undone and kind != repair.error:
            broken = broken.with_config(**{parameter.field: repair.replacement})
    return broken


def _spec_names(argument: str) -> tuple[str, ...]:
    """The spec's names of ``argument``: a tensor's, or a parameter's and its config field."""
    parameter = BY_NAME.get(argument)
    return (argument,) if parameter is None else (parameter.field, argument)


def _names(probe: Probe, argument: str) -> tuple[str, ...]:
    """The names an error about ``argument`` may use: the spec's, and the one the target
    declares for it (``Probe.argument_names``)."""
    own = probe.argument_names(argument)[1:]
    return tuple(dict.fromkeys((*_spec_names(argument), *own)))


def _expect_value_error(
    probe: Probe,
    call: Callable[[], object],
    case: LossCase,
    kind: str,
    argument: str,
    related: tuple[str, ...] = (),
    rule: tuple[str, ...] = (),
    either: tuple[str, ...] = (),
) -> None:
    """``call()`` raises a ValueError that names ``argument`` as a whole word (the spec's
    name, or the one the target declares for it; or one of ``either``, where they break the
    rule alike) and no other argument of the call but ``related`` (``properties.messages``)
    and, where ``rule`` is given, says one of its words (case aside): a message about
    another rule does not count."""

    def violation(message: str) -> InvariantViolation:
        return InvariantViolation(message, case=case, failing=("ValueError",))

    every = (*TENSORS, *(p.name for p in PARAMETERS))
    others = [_names(probe, other) for other in every if other not in (argument, *related)]
    try:
        call()
    except ValueError as error:
        names = tuple(name for each in (argument, *either) for name in _names(probe, each))
        named = naming(str(error), names, others)
        if named.problem is not None:
            declare = (
                ""
                if named.named
                else f" (errors that use the target's own names: declare them, "
                f"f.argument_names = {{{argument!r}: ...}}, docs/GUIDE.md)"
            )
            raise violation(
                f"{kind}: the ValueError {named.problem}; it says: {error}{declare}"
            ) from error
        if rule and not any(word in str(error).lower() for word in rule):
            words = " or ".join(repr(word) for word in rule)
            raise violation(
                f"{kind}: the ValueError must say the rule ({words}), but says: {error}"
            ) from error
        return
    except Exception as error:
        raise violation(
            f"{kind}: expected ValueError naming {argument}, got {type(error).__name__}: {error}"
        ) from error
    raise violation(f"{kind}: expected ValueError naming {argument}, nothing was raised")


def check_bad_values(probe: Probe, drawn: BadInput) -> None:
    corruption = CORRUPTIONS[drawn.kind]
    _expect_value_error(
        probe,
        lambda: probe.call(drawn.case),
        drawn.case,
        drawn.kind,
        corruption.argument,
        corruption.related,
    )


class TensorError(NamedTuple):
    """A way to break the tensors of a valid case, and what the ``ValueError`` must say."""

    change: Callable[..., tuple[torch.Tensor, ...]]  # (l, b, m) -> the broken (l, b, m)
    code: str  # the same in Python, for the report
    #: the rule, in words of which the message must hold one (MATH.md: it names the rule)
    rule: tuple[str, ...]
    #: the other tensors the rule relates (a shape, a device they share), which the message
    #: may name too; a rule of one tensor's dtype names that tensor alone
    related: tuple[str, ...] = TENSORS
    #: every tensor breaks the rule alike (all 3-D, all empty): the message names any of them
    alike: bool = False


def _with_a_two(mask: torch.Tensor) -> torch.Tensor:
    mask = mask.long()
    mask[0, 0] = 2
    return mask


_DIMENSIONS = ("2-d", "2d", "dim", "shape")
_SHAPES = ("shape", "size")
_FLOATING = ("float", "dtype")
_DEVICES = ("device",)

#: error kind (its first word is the argument the message must name) -> the breakage. Each
#: tensor is broken in each role, so that a check that looks at one of them is not enough.
SHAPE_ERRORS: dict[str, TensorError] = {
    "token_nll is 1-D": TensorError(
        lambda l, b, m: (l.reshape(-1), b, m),
        "token_nll_{k} = token_nll_{k}.reshape(-1)",
        _DIMENSIONS,
    ),
    "token_nll is 3-D, and so are zfree_token_nll and mask": TensorError(
        lambda l, b, m: (l[..., None], b[..., None], m[..., None]),
        "token_nll_{k}, zfree_token_nll_{k}, mask_{k} = "
        "token_nll_{k}[..., None], zfree_token_nll_{k}[..., None], mask_{k}[..., None]",
        _DIMENSIONS,
        alike=True,
    ),
    "token_nll has another shape than zfree_token_nll and mask": TensorError(
        lambda l, b, m: (torch.cat([l, l], dim=1), b, m),
        "token_nll_{k} = torch.cat([token_nll_{k}] * 2, dim=1)",
        _SHAPES,
    ),
    "zfree_token_nll has another shape": TensorError(
        lambda l, b, m: (l, torch.cat([b, b], dim=1), m),
        "zfree_token_nll_{k} = torch.cat([zfree_token_nll_{k}] * 2, dim=1)",
        _SHAPES,
    ),
    "mask has another shape": TensorError(
        lambda l, b, m: (l, b, torch.cat([m, m], dim=0)),
        "mask_{k} = torch.cat([mask_{k}] * 2, dim=0)",
        _SHAPES,
    ),
    "token_nll is an integer tensor": TensorError(
        lambda l, b, m: (l.round().long(), b, m),
        "token_nll_{k} = token_nll_{k}.round().long()",
        _FLOATING,
        (),
    ),
    "zfree_token_nll is an integer tensor": TensorError(
        lambda l, b, m: (l, b.round().long(), m),
        "zfree_token_nll_{k} = zfree_token_nll_{k}.round().long()",
        _FLOATING,
        (),
    ),
    # MATH.md, "Errors": tensors on different devices. The meta device exists on every
    # machine, so the rule is checked without a second accelerator.
    "token_nll is on another device (meta) than zfree_token_nll and mask": TensorError(
        lambda l, b, m: (l.to("meta"), b, m),
        "token_nll_{k} = token_nll_{k}.to('meta')",
        _DEVICES,
    ),
    "zfree_token_nll is on another device (meta) than token_nll and mask": TensorError(
        lambda l, b, m: (l, b.to("meta"), m),
        "zfree_token_nll_{k} = zfree_token_nll_{k}.to('meta')",
        _DEVICES,
    ),
    "mask is on another device (meta) than token_nll and zfree_token_nll": TensorError(
        lambda l, b, m: (l, b, m.to("meta")),
        "mask_{k} = mask_{k}.to('meta')",
        _DEVICES,
    ),
    # MATH.md, "Inputs": the mask is bool or an integer 0/1 tensor (the oracle rejects the
    # rest as spec.oracle's _mask_as_lists does).
    "mask is a floating tensor": TensorError(
        lambda l, b, m: (l, b, m.double()),
        "mask_{k} = mask_{k}.double()",
        ("bool", "integer", "dtype", "float"),
        (),
    ),
    # one 2 among 0s and 1s: a check that looks at every position, not all of them at once
    "mask holds 2, an integer other than 0 and 1": TensorError(
        lambda l, b, m: (l, b, _with_a_two(m)),
        "mask_{k} = mask_{k}.long(); mask_{k}[0, 0] = 2",
        ("0 and 1", "0/1", "0 or 1", "bool", "binary"),
        (),
    ),
    # Empty shapes select no valid token (MATH.md, "Errors"): the code paths for a [0, T]
    # or [B, 0] batch are taken by no valid input, and must still raise.
    "mask selects no token of an empty batch (B = 0)": TensorError(
        lambda l, b, m: (l[:0], b[:0], m[:0]),
        "token_nll_{k}, zfree_token_nll_{k}, mask_{k} = "
        "token_nll_{k}[:0], zfree_token_nll_{k}[:0], mask_{k}[:0]",
        ("valid", "token", "empty", "select"),
        alike=True,
    ),
    "mask selects no token of a batch without positions (T = 0)": TensorError(
        lambda l, b, m: (l[:, :0], b[:, :0], m[:, :0]),
        "token_nll_{k}, zfree_token_nll_{k}, mask_{k} = "
        "token_nll_{k}[:, :0], zfree_token_nll_{k}[:, :0], mask_{k}[:, :0]",
        ("valid", "token", "empty", "select"),
        alike=True,
    ),
}


#: a valid float32 case with a padded position, which every breakage of the tensors starts from
SMALL_CASE = LossCase(
    ((1.0, 2.0), (3.0, 4.0)),
    ((0.5, 1.5), (2.0, 1.0)),
    ((True, True), (True, False)),
    dtype=torch.float32,
)


@st.composite
def bad_tensor_cases(draw: st.DrawFn, domain: Domain) -> BadInput:
    kind = draw(st.sampled_from(list(SHAPE_ERRORS)))
    return BadInput(kind, draw(loss_cases(domain, dtypes=(torch.float32,))))


def check_bad_tensors(probe: Probe, drawn: BadInput) -> None:
    error = SHAPE_ERRORS[drawn.kind]
    argument = drawn.kind.split()[0]
    _expect_value_error(
        probe,
        lambda: probe.call_adjusted(drawn.case, error.change, (error.code,)),
        drawn.case,
        drawn.kind,
        argument,
        error.related,
        error.rule,
        TENSORS if error.alike else (),
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
            # every kind on a small case, every run: a random draw of a few examples need
            # not meet each of them (a copied check of one tensor passed a run in six)
            *(
                NamedInput(
                    f"bad-values: {kind}",
                    f"{kind}: each breakage is tried on purpose",
                    BadInput(
                        kind,
                        one_rule_broken(
                            kind,
                            corruption.make(
                                SMALL_CASE, -1.0 if kind.startswith("negative") else math.nan
                            ),
                        ),
                    ),
                )
                for kind, corruption in CORRUPTIONS.items()
            ),
        ),
    ),
    Invariant(
        id="rejects-bad-tensors",
        group="validation",
        statement="inputs not 2-D, of other shapes or devices, not floating, masks not 0/1, or "
        "empty ([0, T], [B, 0]) raise ValueError naming the argument and the rule",
        spec_refs=("MATH.md#errors",),
        strategy=lambda domain: bad_tensor_cases(domain),
        check=check_bad_tensors,
        opt_in=True,
        # every kind on a small case, every run: a random draw of a few examples need not
        # meet each of them
        examples=tuple(
            NamedInput(
                "bad-tensors: " + kind,
                f"{kind}: each breakage is tried on purpose",
                BadInput(kind, SMALL_CASE),
            )
            for kind in SHAPE_ERRORS
        ),
    ),
)
