"""What must not matter: padded values, extra padding, the order of tokens and examples."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from properties.assertions import assert_tensor_close, assert_values_close
from properties.cases import LossCase, round_to
from properties.invariant import Invariant, InvariantViolation
from properties.invariants.common import ALL_NAMES, assume_gradient_representable, tolerance
from properties.invariants.edge_cases import named
from properties.strategies import PADDING_VALUES, Domain, loss_cases
from properties.target import Probe


def _with_padding_from(case: LossCase, fill: list[float]) -> LossCase:
    def refill(rows, offset):
        return tuple(
            tuple(
                v if valid else round_to(case.dtype, fill[(i * len(row) + j + offset) % len(fill)])
                for j, (v, valid) in enumerate(zip(row, mask_row, strict=True))
            )
            for i, (row, mask_row) in enumerate(zip(rows, case.mask, strict=True))
        )

    return case.with_rows(refill(case.token_nll, 0), refill(case.zfree_token_nll, 1), case.mask)


@dataclass(frozen=True)
class Repadded:
    """A case whose padded positions get the values of ``fill``, in turn."""

    case: LossCase
    fill: tuple[float, ...]


@st.composite
def repadded(draw: st.DrawFn, domain: Domain) -> Repadded:
    case = draw(loss_cases(domain))
    fill = draw(st.lists(st.sampled_from(PADDING_VALUES), min_size=1, max_size=4))
    return Repadded(case, tuple(fill))


def check_padding_ignored(probe: Probe, drawn: Repadded) -> None:
    case, fill = drawn.case, list(drawn.fill)
    clean = _with_padding_from(case, [0.0])
    dirty = _with_padding_from(case, fill)
    assume_gradient_representable(case)
    f_clean, grad_clean, _ = probe.gradients(clean)
    f_dirty, grad_dirty, _ = probe.gradients(dirty)
    tol = tolerance(case)
    assert_values_close(
        f_dirty,
        f_clean,
        tol,
        names=ALL_NAMES,
        what=f"padded positions holding {fill} instead of 0 must change no output",
        case=dirty,
    )
    assert_tensor_close(
        grad_dirty,
        grad_clean,
        tol,
        what=f"padded positions holding {fill} instead of 0 must change no gradient",
        case=dirty,
    )
    mask = torch.tensor(case.mask)
    if bool((grad_dirty[~mask] != 0).any()):
        raise InvariantViolation(
            f"the gradient at padded positions must be 0, got {grad_dirty.tolist()}",
            case=dirty,
            failing=("gradient",),
        )


@dataclass(frozen=True)
class Extended:
    """A case with ``extra_columns`` padded positions per example and ``extra_rows`` fully
    padded examples inserted at row ``position``, all holding ``junk``."""

    case: LossCase
    extra_columns: int
    extra_rows: int
    position: int
    junk: float


@st.composite
def extended(draw: st.DrawFn, domain: Domain) -> Extended:
    case = draw(loss_cases(domain))
    extra_columns = draw(st.integers(0, 3))
    extra_rows = draw(st.integers(0, 2))
    position = draw(st.integers(0, case.shape[0]))
    junk = draw(st.sampled_from(PADDING_VALUES))
    return Extended(case, extra_columns, extra_rows, position, junk)


def check_padding_extension(probe: Probe, drawn: Extended) -> None:
    case, extra_columns, extra_rows, position = (
        drawn.case,
        drawn.extra_columns,
        drawn.extra_rows,
        drawn.position,
    )
    junk = round_to(case.dtype, drawn.junk)
    length = case.shape[1] + extra_columns

    def widen(rows, fill):
        rows = [tuple(row) + (fill,) * extra_columns for row in rows]
        return tuple(rows[:position] + [(fill,) * length] * extra_rows + rows[position:])

    bigger = case.with_rows(
        widen(case.token_nll, junk), widen(case.zfree_token_nll, junk), widen(case.mask, False)
    )
    assume_gradient_representable(case)
    f, grad, _ = probe.gradients(case)
    g, grad_big, _ = probe.gradients(bigger)
    tol = tolerance(bigger)
    what = (
        f"{extra_columns} padded positions per example and {extra_rows} fully padded "
        f"examples (holding {junk}) at row {position}"
    )
    assert_values_close(
        g, f, tol, names=ALL_NAMES, what=f"adding {what} must change nothing", case=bigger
    )
    keep = [i for i in range(bigger.shape[0]) if not position <= i < position + extra_rows]
    original_part = grad_big[keep][:, : case.shape[1]]
    assert_tensor_close(original_part, grad, tol, what=f"gradient after adding {what}", case=bigger)
    rest = grad_big.clone()
    rest[torch.tensor(keep, dtype=torch.long)[:, None], torch.arange(case.shape[1])] = 0
    assert_tensor_close(
        rest, torch.zeros_like(rest), tol, what=f"gradient on the {what}", case=bigger
    )


@dataclass(frozen=True)
class TokenPermutation:
    """A case and, for each example, the order its positions are put in."""

    case: LossCase
    orders: tuple[tuple[int, ...], ...]


@st.composite
def token_permutations(draw: st.DrawFn, domain: Domain) -> TokenPermutation:
    case = draw(loss_cases(domain))
    orders = [draw(st.permutations(range(case.shape[1]))) for _ in range(case.shape[0])]
    return TokenPermutation(case, tuple(tuple(order) for order in orders))


def _assert_rearranging_changes_nothing(
    probe: Probe, case: LossCase, permute, permute_gradient, what: str
) -> None:
    """Outputs unchanged, and the gradient moved along with its entries."""
    permuted = case.with_rows(
        permute(case.token_nll), permute(case.zfree_token_nll), permute(case.mask)
    )
    assume_gradient_representable(case)
    f, grad, _ = probe.gradients(case)
    g, grad_permuted, _ = probe.gradients(permuted)
    tol = tolerance(case)
    assert_values_close(
        g, f, tol, names=ALL_NAMES, what=f"{what} must change nothing", case=permuted
    )
    assert_tensor_close(
        grad_permuted,
        permute_gradient(grad),
        tol,
        what=f"the gradient must move with its entries under {what}",
        case=permuted,
    )


def check_token_permutation(probe: Probe, drawn: TokenPermutation) -> None:
    case, orders = drawn.case, [list(order) for order in drawn.orders]
    _assert_rearranging_changes_nothing(
        probe,
        case,
        lambda rows: tuple(
            tuple(row[j] for j in order) for row, order in zip(rows, orders, strict=True)
        ),
        lambda grad: grad.gather(1, torch.tensor(orders, dtype=torch.long)),
        f"permuting positions within each example (orders {orders})",
    )


@dataclass(frozen=True)
class ExamplePermutation:
    """A case and the order its examples are put in."""

    case: LossCase
    order: tuple[int, ...]


@st.composite
def example_permutations(draw: st.DrawFn, domain: Domain) -> ExamplePermutation:
    case = draw(loss_cases(domain))
    return ExamplePermutation(case, tuple(draw(st.permutations(range(case.shape[0])))))


def check_example_permutation(probe: Probe, drawn: ExamplePermutation) -> None:
    case, order = drawn.case, list(drawn.order)
    _assert_rearranging_changes_nothing(
        probe,
        case,
        lambda rows: tuple(rows[i] for i in order),
        lambda grad: grad[list(order)],
        f"permuting the examples (order {order})",
    )


INVARIANTS = (
    Invariant(
        id="padding-ignored",
        group="invariance",
        statement="values at padded positions (NaN and inf included) change no output and no "
        "gradient, and the gradient there is 0",
        spec_refs=("padding-invariance",),
        strategy=lambda domain: repadded(domain),
        check=check_padding_ignored,
        examples=(named("nan-padding", lambda case: Repadded(case, (float("nan"), float("inf")))),),
        witness="mask_multiplication",
    ),
    Invariant(
        id="padding-extension",
        group="invariance",
        statement="adding padded positions or fully padded examples changes nothing",
        spec_refs=("padding-invariance",),
        strategy=lambda domain: extended(domain),
        check=check_padding_extension,
        examples=(named("empty-row", lambda case: Extended(case, 1, 1, 0, float("nan"))),),
        witness="padding_counted",
    ),
    Invariant(
        id="token-permutation",
        group="invariance",
        statement="permuting positions within an example (l, b and mask together) changes "
        "nothing; the gradient follows its token",
        spec_refs=("token-permutation-invariance",),
        strategy=lambda domain: token_permutations(domain),
        check=check_token_permutation,
        witness="right_padding_assumed",
    ),
    Invariant(
        id="example-permutation",
        group="invariance",
        statement="permuting examples changes nothing; the gradient follows its example",
        spec_refs=("example-permutation-invariance",),
        strategy=lambda domain: example_permutations(domain),
        check=check_example_permutation,
        witness="lengths_from_first_row",
    ),
)
