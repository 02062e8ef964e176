"""The contract of an implementation (MATH.md, "Contract" and "Precision")."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import torch
from hypothesis import strategies as st

from properties.assertions import (
    SHOWN_ENTRIES,
    assert_tensor_close,
    assert_values_close,
    value_table,
)
from properties.cases import DTYPE_NAMES, INPUT_NAMES, LossCase, Rows, round_to
from properties.invariant import Invariant, InvariantViolation
from properties.invariants.common import (
    ALL_NAMES,
    TOTAL,
    assume_gradient_representable,
    tolerance,
    valid_values,
)
from properties.invariants.edge_cases import EDGE_CASES, named
from properties.layouts import LAYOUTS, storage_of
from properties.oracle import expected
from properties.reproduction import inputs_after_lines
from properties.strategies import Domain, loss_cases, make_valid
from properties.target import Observed, Probe
from properties.tolerances import computation_dtype, gradient_tolerance
from spec.parameters import ALPHA
from spec.terms import OUTPUTS_SECTION

#: calls per input in the determinism check
REPEATS = 4


def _result_dtype(case: LossCase) -> torch.dtype:
    return computation_dtype(case.dtype)


def check_outputs_contract(probe: Probe, case: LossCase) -> None:
    seen = probe.call(case, token_nll_requires_grad=True)
    outputs = seen.outputs
    expected_dtype = _result_dtype(case)
    problems = []
    if seen.extra:
        problems.append(
            f"the result has keys beyond the outputs: {', '.join(seen.extra)} (exactly the "
            "outputs are returned; token_weight_alpha is run metadata, never an entry)"
        )
    for name in ALL_NAMES:
        value = outputs[name]
        if value.dtype != expected_dtype:
            problems.append(
                f"{name} is {value.dtype}; {DTYPE_NAMES[case.dtype]} inputs give "
                f"{DTYPE_NAMES[expected_dtype]} results (float32 or better, and float32/float64 "
                "inputs keep their dtype)"
            )
        if value.device.type != torch.device(case.device).type:
            problems.append(f"{name} is on {value.device}, the inputs on {case.device}")
    if not outputs[TOTAL].requires_grad:
        problems.append(f"{TOTAL} does not require grad although token_nll does")
    if problems:
        raise InvariantViolation("; ".join(problems), case=case, failing=("contract",))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise-equal values (NaN equal to NaN), same dtype and shape."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():
        return bool(torch.equal(a.isnan(), b.isnan())) and bool(
            torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))
        )
    return bool(torch.equal(a, b))


#: what the script prints before the first call's inputs as they are after the second call
FIRST_AFTER = "the first call's inputs after the second call:"


def other_values(case: LossCase) -> LossCase:
    """``case`` with every valid value of token_nll and zfree_token_nll moved inside the
    range the case already spans (v to v/2, 0 to the tensor's largest valid value): a later
    call of its shape and dtype on other values, which a buffer kept from the first call
    would be written with."""

    def move(rows: Rows) -> Rows:
        valid = [v for row, m in zip(rows, case.mask, strict=True) for v in valid_values(row, m)]
        largest = max(valid, default=0.0)
        return tuple(
            tuple(
                round_to(case.dtype, v / 2 if v > 0 else largest) if valid else v
                for v, valid in zip(row, mask_row, strict=True)
            )
            for row, mask_row in zip(rows, case.mask, strict=True)
        )

    return make_valid(case.with_rows(move(case.token_nll), move(case.zfree_token_nll), case.mask))


#: why a buffer kept from a call must not be the caller's tensor, for a later call's write
BUFFER = "; a buffer an implementation keeps from a call is a copy, never the caller's tensor"


def _change(before: torch.Tensor, after: torch.Tensor) -> str:
    """What changed in a tensor: both whole where it is small, else its first changed
    positions (an input at training size is no list to read)."""
    if before.numel() <= SHOWN_ENTRIES:
        return f"it held {before.tolist()} and now holds {after.tolist()}"
    changed = ~(
        (before == after) | (before.isnan() & after.isnan())
        if before.is_floating_point()
        else before == after
    )
    where = changed.nonzero()[:4].tolist()
    shown = ", ".join(
        f"{index}: {before[tuple(index)].item()!r} -> {after[tuple(index)].item()!r}"
        for index in where
    )
    return f"{int(changed.sum())} of its {before.numel()} values changed, the first {shown}"


def assert_unmodified(seen: Observed, case: LossCase, modified: str, why: str = "") -> None:
    """``InvariantViolation`` where an input of the call ``seen`` no longer holds ``case``'s
    values: ``modified`` says by what (``{name}`` is the input), ``why`` is added after."""
    for name, used, original in zip(INPUT_NAMES, seen.inputs, case.tensors(), strict=True):
        if not _same(used.detach(), original):
            raise InvariantViolation(
                f"{modified.format(name=name)}: {_change(original, used.detach())}{why}",
                case=case,
                failing=(name,),
            )
    for name, used, before in zip(INPUT_NAMES, seen.inputs, seen.storages, strict=True):
        if not torch.equal(storage_of(used), before):
            layout = LAYOUTS[case.layouts[INPUT_NAMES.index(name)]]
            raise InvariantViolation(
                f"{modified.format(name=name)}: its values are as they were, but the buffer "
                f"it views ({name} is {layout}) was written outside them{why}",
                case=case,
                failing=(name,),
            )


def two_calls(
    probe: Probe, case: LossCase, between: Callable[[Observed], None] = lambda first: None
) -> tuple[Observed, LossCase, Observed]:
    """A call on ``case`` (forward and backward), ``between`` on what it gave, then a call
    on ``other_values(case)``: what each gave, and the second's input; the script prints
    each call's inputs after it, and the first's after the second too."""
    after = inputs_after_lines(INPUT_NAMES)
    first = probe.call(case, token_nll_requires_grad=True, backward_of=TOTAL, then=after)
    between(first)
    later = other_values(case)
    second = probe.call(
        later,
        token_nll_requires_grad=True,
        backward_of=TOTAL,
        then=(*after, *inputs_after_lines(INPUT_NAMES, call="{before}", label=FIRST_AFTER)),
    )
    return first, later, second


def check_inputs_unmodified(probe: Probe, case: LossCase) -> None:
    """Two calls, the second on other values of the same shape and dtype: each call leaves
    its inputs as they were (forward and backward), and the second leaves the first's too,
    as a target that keeps a buffer from a call without copying it would not (MATH.md,
    "Contract of an implementation")."""
    first, later, second = two_calls(
        probe,
        case,
        lambda first: assert_unmodified(
            first, case, "{name} was modified by the call (forward and backward)"
        ),
    )
    assert_unmodified(
        first,
        case,
        "the first call's {name} was modified by a later call (the second, on other values "
        "of the same shape)",
        BUFFER,
    )
    assert_unmodified(
        second,
        later,
        "{name} was modified by the second call (forward and backward), on other values of "
        "the first one's shape",
    )


def plain_input(domain: Domain) -> LossCase:
    """The first input every worker gives the target (``EDGE_CASES["plain"]``), in the
    domain's first dtype, on its device, and inside a domain narrowed by ``--max-alpha`` or
    ``--max-loss`` (alpha lowered to its bound, the losses scaled by a power of two): a
    target that raises on it cannot be checked, so it is an input the target is meant for."""
    case = EDGE_CASES["plain"].case
    alpha = min(case.config.token_weight_alpha, domain.max_alpha)
    largest = max(v for rows in (case.token_nll, case.zfree_token_nll) for r in rows for v in r)
    # a power of two keeps every value exact in every dtype (they stay normal numbers)
    scale = 2.0 ** min(0, math.floor(math.log2(domain.max_loss / largest)))

    dtype = domain.dtypes[0]
    exact = all(
        round_to(dtype, v * scale) == v * scale
        for rows in (case.token_nll, case.zfree_token_nll)
        for row in rows
        for v in row
    )

    def scaled(rows: Rows) -> Rows:
        # below what the dtype holds (--max-loss 1e-30 in float16), losses of 0 are the input
        return tuple(tuple(v * scale if exact else 0.0 for v in row) for row in rows)

    plain = replace(
        case.with_rows(scaled(case.token_nll), scaled(case.zfree_token_nll), case.mask),
        dtype=dtype,
        device=domain.device,
    )
    return plain.with_config(**{ALPHA.field: alpha})


def check_first_call(probe: Probe, case: LossCase) -> None:
    """The first call of a process gives the spec's values and dJ/dl as every other call
    must, and a second call (on other values of its shape) leaves its inputs as they were.

    A worker makes this check as its first call of the target, before any invariant runs
    (``properties/worker.py``): a target wrong only until something it sets up lazily is
    set (a cache, a workspace, an autotuned kernel) is caught there, and a buffer kept from
    a process's first call too. Run anywhere else it checks an ordinary pair of calls."""
    first, later, second = two_calls(probe, case)
    wrong_later, _ = value_table(second.values, expected(later).values, ALL_NAMES, tolerance(later))
    # where the second call is right, only the first is wrong: state the process starts with
    state = (
        None
        if wrong_later
        else "first-call fails on the first call of a fresh process, and a second call (on "
        "other values of its shape) gives the spec's values: the target is wrong until "
        "something it sets up on its first call is set"
    )
    where = "the first call of this process (nothing called the target before it)"
    try:
        assert_values_close(
            first.values,
            expected(case).values,
            tolerance(case),
            names=ALL_NAMES,
            what=f"{where}: its outputs against the spec's oracle",
            case=case,
        )
        gradient = first.token_nll_grad
        assert_tensor_close(
            torch.zeros_like(first.inputs[0]) if gradient is None else gradient,
            torch.tensor(expected(case).token_gradient, dtype=torch.float64),
            gradient_tolerance(
                case.dtype, length=case.shape[1], alpha=case.config.token_weight_alpha
            ),
            what=f"{where}: dJ/dl_it",
            case=case,
            failing=(TOTAL,),
        )
    except InvariantViolation as violation:
        violation.state = state
        raise
    assert_unmodified(first, case, f"{{name}} of {where} was modified by the second call", BUFFER)


def _order_sensitive(case: LossCase, max_loss: float) -> LossCase:
    """``case`` with every valid value moved by a different small amount (at most
    ``max_loss``/96, staying in [0, max_loss]): no two sums of its rows then agree by
    accident, so whatever order they are added in shows in the last bits."""

    def move(rows: Rows) -> Rows:
        moved = []
        for row, mask_row in zip(rows, case.mask, strict=True):
            values = []
            for t, (v, valid) in enumerate(zip(row, mask_row, strict=True)):
                step = max_loss * (t + 1) / (3 * (t + 2)) / 32
                moved_value = v + step if v + step <= max_loss else v - step
                values.append(round_to(case.dtype, moved_value) if valid else v)
            moved.append(tuple(values))
        return tuple(moved)

    return case.with_rows(move(case.token_nll), move(case.zfree_token_nll), case.mask)


def order_sensitive_cases(domain: Domain) -> st.SearchStrategy[LossCase]:
    """Float32/float64 rows of three or more generic values whose sums round: a change of
    summation order from one call to the next shows."""
    cases = loss_cases(
        domain,
        dtypes=domain.full_precision_dtypes or domain.dtypes,
        styles=("generic",),
        min_length=3,
    )
    return cases.map(lambda case: _order_sensitive(case, domain.max_loss))


def check_deterministic(probe: Probe, case: LossCase) -> None:
    assume_gradient_representable(case)
    # Several repeats: a run-to-run difference (a reduction order that changes) need not
    # show on every pair of calls.
    first, grad_first, _ = probe.gradients(case)
    for _ in range(REPEATS - 1):
        again, grad_again, _ = probe.gradients(case)
        differing = [n for n in ALL_NAMES if repr(first[n]) != repr(again[n])]
        if differing:
            raise InvariantViolation(
                "calls on the same inputs disagree on "
                + ", ".join(f"{n} ({first[n]!r}, then {again[n]!r})" for n in differing),
                case=case,
                failing=tuple(differing),
            )
        if not _same(grad_first, grad_again):
            raise InvariantViolation(
                "calls on the same inputs give different gradients with respect to "
                f"token_nll: {grad_first.tolist()}, then {grad_again.tolist()}",
                case=case,
                failing=("gradient",),
            )


#: the invariant a worker checks its first call of the target by (``properties/worker.py``)
FIRST_CALL = "first-call"

INVARIANTS = (
    Invariant(
        id=FIRST_CALL,
        group="contract",
        statement="the first call of a process, on a plain valid input, gives the spec's values "
        "and dJ/dl, and a second call leaves its inputs as they were",
        spec_refs=("MATH.md#contract-of-an-implementation", OUTPUTS_SECTION),
        strategy=lambda domain: st.just(plain_input(domain)),
        check=check_first_call,
        witness="lazy_first_call",
        fresh_process=True,
    ),
    Invariant(
        id="outputs-contract",
        group="contract",
        statement="exactly the outputs, by name, 0-dim tensors on the inputs' device, in float32 "
        "or better (float32/float64 inputs keep their dtype); the total is differentiable",
        spec_refs=("MATH.md#contract-of-an-implementation",),
        strategy=lambda domain: loss_cases(domain),
        check=check_outputs_contract,
        examples=(
            named("half-precision"),
            named("bfloat16-integer-mask"),
            named("overflowing-term-epsilon-zero"),
        ),
        witness="float64_outputs",
    ),
    Invariant(
        id="inputs-unmodified",
        group="contract",
        statement="forward and backward leave token_nll, zfree_token_nll and mask unchanged, "
        "padding included, also after a later call on other values of their shape",
        spec_refs=("MATH.md#contract-of-an-implementation",),
        strategy=lambda domain: loss_cases(domain),
        check=check_inputs_unmodified,
        examples=(
            named("nan-padding"),
            *(
                named(f"{layout}-views")
                for layout in ("transposed", "strided", "offset", "expanded")
            ),
        ),
        witness="mutates_input",
    ),
    Invariant(
        id="deterministic",
        group="contract",
        statement="the same inputs give bitwise the same outputs and gradients",
        spec_refs=("MATH.md#contract-of-an-implementation",),
        strategy=lambda domain: order_sensitive_cases(domain),
        check=check_deterministic,
        examples=(named("order-sensitive-sum"),),
        witness="nondeterministic_order",
    ),
)
