"""estimate_zfree_reference_scale against its definition, the baseline identity, its errors.

The definition, c = mean over kept examples of bbar_i, is evaluated exactly with
``fractions.Fraction`` over the very floats the estimator reads. The estimate is
``reconstruction_loss`` of b over the union of the batches, so it is held to that output's
tolerance in float64 (``output_tolerance(float64, length=T_max, alpha=0)``, a relative
error of about 1e-14 at these lengths, tighter than the 1e-12 it is specified to meet).
"""

from __future__ import annotations

import io
import math
import re
import weakref
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from properties.tolerances import output_tolerance
from recon_impl import (
    ReconstructionLossConfig,
    estimate_zfree_reference_scale,
    reconstruction_losses,
)

NAN, INF = math.nan, math.inf
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "GUIDE.md"


def random_batches(seed: int, count: int = 7, dtype: torch.dtype = torch.float64):
    """Batches of varying B and T: ragged masks, holes, empty rows, an all-padding batch,
    NaN/inf/negative values at padded positions, b over eight orders of magnitude with some
    exact zeros, and integer masks in every other batch."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for index in range(count):
        rows = int(torch.randint(0, 7, (), generator=generator))
        length = int(torch.randint(1, 13, (), generator=generator))
        b = torch.empty(rows, length, dtype=torch.float64).uniform_(-8, 9, generator=generator)
        b = b.exp()
        b[torch.rand(rows, length, generator=generator) < 0.1] = 0.0
        ends = torch.randint(0, length + 1, (rows, 1), generator=generator)
        mask = torch.arange(length) < ends
        mask &= torch.rand(rows, length, generator=generator) > 0.15
        if index == 2:
            mask[:] = False
        padding = torch.tensor([NAN, INF, -INF, -1.0])[
            torch.randint(0, 4, (rows, length), generator=generator)
        ]
        b = torch.where(mask, b, padding).to(dtype)
        batches.append((b, mask.to(torch.int64) if index % 2 else mask))
    batches.append((torch.tensor([[0.75, NAN]], dtype=dtype), torch.tensor([[True, False]])))
    return batches


def exact_scale(batches) -> Fraction:
    """c by its definition, in exact rational arithmetic."""
    total, kept = Fraction(0), 0
    for b, mask in batches:
        for values, valid in zip(b.tolist(), mask.bool().tolist(), strict=True):
            selected = [Fraction(x) for x, keep in zip(values, valid, strict=True) if keep]
            if selected:
                total += sum(selected, Fraction(0)) / len(selected)
                kept += 1
    return total / kept


def pad_to_union(batches):
    """The union of the batches as one batch, padded with NaN to the longest T."""
    length = max(b.shape[1] for b, _ in batches)
    bs, masks = [], []
    for b, mask in batches:
        extra = length - b.shape[1]
        bs.append(torch.nn.functional.pad(b.to(torch.float64), (0, extra), value=NAN))
        masks.append(torch.nn.functional.pad(mask.bool(), (0, extra), value=False))
    return torch.cat(bs), torch.cat(masks)


def assert_close_to(observed: float, expected: float, length: int) -> None:
    tolerance = output_tolerance(torch.float64, length=length, alpha=0.0)
    assert tolerance.allows(observed, expected, expected), (
        f"{observed!r} != {expected!r} (relative error {abs(observed / expected - 1):.3g})"
    )


@pytest.mark.parametrize("seed", range(8))
def test_matches_the_definition_in_float64(seed: int) -> None:
    batches = random_batches(seed)
    observed = estimate_zfree_reference_scale(batches)
    assert isinstance(observed, float)
    assert_close_to(observed, float(exact_scale(batches)), length=12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_low_precision_inputs_are_accumulated_in_float64(dtype: torch.dtype) -> None:
    # The exact value of the rounded inputs: no float32 accumulation error is allowed.
    batches = random_batches(11, dtype=dtype)
    observed = estimate_zfree_reference_scale(batches)
    assert_close_to(observed, float(exact_scale(batches)), length=12)


def test_a_generator_without_length_is_streamed_once_holding_one_batch() -> None:
    batches = random_batches(3, count=9)
    alive: list[weakref.ref] = []

    def stream():
        for b, mask in batches:
            # O(1) memory: every batch but the one just handed over has been let go.
            assert all(ref() is None for ref in alive[:-1])
            fresh = (b.clone(), mask.clone())
            alive.append(weakref.ref(fresh[0]))
            yield fresh
            del fresh

    observed = estimate_zfree_reference_scale(stream())
    assert len(alive) == len(batches)
    assert observed == estimate_zfree_reference_scale(batches)


def test_is_reconstruction_loss_of_b_over_the_union() -> None:
    batches = random_batches(5)
    b, mask = pad_to_union(batches)
    union = reconstruction_losses(b, b, mask, ReconstructionLossConfig()).reconstruction_loss
    assert_close_to(estimate_zfree_reference_scale(batches), union.item(), length=b.shape[1])


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.5])
def test_makes_both_normalized_terms_one_at_the_zfree_baseline(alpha: float) -> None:
    batches = random_batches(6)
    config = ReconstructionLossConfig(
        token_weight_alpha=alpha, zfree_reference_scale=estimate_zfree_reference_scale(batches)
    )
    b, mask = pad_to_union(batches)
    losses = reconstruction_losses(b, b, mask, config)  # l = b: the z-free baseline
    tolerance = output_tolerance(torch.float64, length=b.shape[1], alpha=alpha)
    for name in (
        "distribution_normalized_reconstruction_loss",
        "normalized_concentration_corrected_token_weighted_reconstruction_loss",
    ):
        assert tolerance.allows(losses[name].item(), 1.0, 1.0), (name, losses[name].item())


def test_hand_computed() -> None:
    b = torch.tensor([[1.0, 3.0, NAN], [5.0, INF, -2.0], [NAN, NAN, NAN]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    # bbar = 2 and 5, the third row is dropped; then one more example with bbar = 0.5.
    batches = [(b, mask), (torch.tensor([[0.0, 1.0]]), torch.tensor([[True, True]]))]
    assert estimate_zfree_reference_scale(batches) == 2.5


def test_all_zero_surprisal_gives_zero() -> None:
    assert estimate_zfree_reference_scale([(torch.zeros(2, 3), torch.ones(2, 3).bool())]) == 0.0


def test_inputs_are_not_modified() -> None:
    batches = random_batches(2)
    for b, _ in batches:
        b.requires_grad_(True)
    before = [(b.detach().clone(), mask.clone()) for b, mask in batches]
    estimate_zfree_reference_scale(batches)
    for (b, mask), (b0, mask0) in zip(batches, before, strict=True):
        torch.testing.assert_close(b.detach(), b0, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(mask, mask0) and mask.dtype == mask0.dtype
        assert b.grad is None


GOOD = (torch.tensor([[1.0, 2.0]]), torch.tensor([[True, False]]))


def _with_nan_at_valid() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([[1.0, NAN]]), torch.tensor([[True, True]])


@pytest.mark.parametrize(
    ("bad", "pattern"),
    [
        (torch.ones(2, 2), r"expected a \(zfree_token_nll, mask\) pair, got a single tensor"),
        ((GOOD[0],), r"expected a \(zfree_token_nll, mask\) pair, got tuple"),
        (3.0, r"expected a \(zfree_token_nll, mask\) pair, got float"),
        (([[1.0]], GOOD[1]), r"zfree_token_nll must be a torch.Tensor, got list"),
        ((GOOD[0], [[True]]), r"mask must be a torch.Tensor, got list"),
        ((torch.ones(3), torch.ones(3).bool()), r"zfree_token_nll must be 2-D"),
        ((GOOD[0], torch.ones(1, 2, 1).bool()), r"mask must be 2-D"),
        (
            (torch.ones(1, 3), GOOD[1]),
            r"zfree_token_nll and mask must have the same shape, got \(1, 3\) and \(1, 2\)",
        ),
        ((torch.ones(1, 2, dtype=torch.int64), GOOD[1]), r"zfree_token_nll must have a float"),
        ((GOOD[0], torch.ones(1, 2)), r"mask must be bool or an integer 0/1 tensor"),
        ((GOOD[0], torch.tensor([[1, 2]])), r"mask must hold only 0 and 1"),
        (
            (torch.ones(1, 2, device="meta"), GOOD[1]),
            r"zfree_token_nll and mask must be on the same device",
        ),
        (_with_nan_at_valid(), r"zfree_token_nll must be finite .* nan at \[0, 1\]"),
        (
            (torch.tensor([[1.0, INF]]), torch.tensor([[1, 1]])),
            r"zfree_token_nll must be finite .* inf at \[0, 1\]",
        ),
        (
            (torch.tensor([[0.5], [-0.25]]), torch.tensor([[True], [True]])),
            r"zfree_token_nll must be >= 0 .* -0.25 at \[1, 0\]",
        ),
        (
            (torch.ones(1, 2, device="meta"), torch.ones(1, 2, dtype=torch.bool, device="meta")),
            r"zfree_token_nll and mask must hold values .*, got meta tensors",
        ),
        (
            (torch.ones(1, 2, device="meta"), torch.ones(1, 2, dtype=torch.int64, device="meta")),
            r"zfree_token_nll and mask must hold values .*, got meta tensors",
        ),
    ],
)
def test_bad_batch_names_its_index_the_argument_and_the_rule(bad, pattern: str) -> None:
    with pytest.raises(ValueError, match=rf"^batch 2: {pattern}"):
        estimate_zfree_reference_scale([GOOD, GOOD, bad, GOOD])


@pytest.mark.parametrize(
    "batches",
    [
        [],
        iter([]),
        [
            (torch.ones(2, 3), torch.zeros(2, 3).bool()),
            (torch.ones(0, 4), torch.ones(0, 4, dtype=torch.int64)),
        ],
    ],
)
def test_no_valid_token_at_all(batches) -> None:
    with pytest.raises(ValueError, match=r"batches must hold at least one valid token"):
        estimate_zfree_reference_scale(batches)


@pytest.mark.parametrize(
    ("batches", "got"), [(None, "NoneType None"), (5, "int 5"), (torch.tensor(2.0), "Tensor")]
)
def test_batches_that_are_not_iterable(batches, got: str) -> None:
    with pytest.raises(
        ValueError,
        match=rf"^batches must be an iterable of \(zfree_token_nll, mask\) pairs, .*got {got}",
    ):
        estimate_zfree_reference_scale(batches)


def test_group_without_an_initialized_process_group() -> None:
    with pytest.raises(ValueError, match=r"group was given but torch.distributed is not init"):
        estimate_zfree_reference_scale([GOOD], group=object())


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    estimate_zfree_reference_scale([GOOD, GOOD, GOOD])
    last = terminal.getvalue().split("\r")[-1]
    assert re.fullmatch(
        r"zfree reference scale: \[#{20}\] 3/3 batches \(100%\), 3 examples\n", last
    )

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    estimate_zfree_reference_scale(iter([GOOD, GOOD]))  # no length: a count, no proportion
    assert terminal.getvalue().split("\r")[-1] == "zfree reference scale: 2 batches, 2 examples\n"


def test_silent_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    estimate_zfree_reference_scale([GOOD, GOOD, GOOD])
    assert capsys.readouterr() == ("", "")


def guide_examples(title: str, *, under_torchrun: bool = False) -> list[str]:
    """The Python blocks of one section of docs/GUIDE.md: those a single process runs, or
    (``under_torchrun``) those launched by torchrun, which need the reader's own code."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    return [b for b in blocks if b.startswith("# launched with torchrun") == under_torchrun]


@pytest.mark.parametrize("section", ["Choosing weights", "Measuring the z-free reference scale c"])
def test_guide_examples_run(section: str, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = guide_examples(section)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(GUIDE), "exec"), namespace)


@pytest.mark.parametrize(
    "section", ["Measuring the z-free reference scale c", "Data parallel and gradient accumulation"]
)
def test_guide_torchrun_examples_compile(section: str) -> None:
    blocks = guide_examples(section, under_torchrun=True)
    assert blocks
    for block in blocks:
        compile(block, str(GUIDE), "exec")
