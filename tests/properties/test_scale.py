"""Inputs at training sizes (``properties/scale.py``): descriptions built with torch, the
script that rebuilds them, the sizes drawn, and the options that bound them."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from properties.invariants import by_id
from properties.invariants.scale import EDGE_CASES, AcrossThreshold, across_thresholds
from properties.options import domain_from
from properties.profiles import profile_settings
from properties.runner import run_invariant
from properties.scale import RowSpan, ScaleCase, Values, around_powers_of_two
from properties.strategies import DEFAULT_DOMAIN, Domain, scale_cases
from properties.zoo import wrong

SMALL = Domain(scale_length=300, scale_batch=70, scale_positions=4096)


def _checked(invariant_id: str, name: str, **options):
    """``invariant_id`` run on the wrong implementation ``name`` of the zoo, ci profile."""
    return run_invariant(
        by_id(invariant_id),
        getattr(wrong, name),
        target=f"properties.zoo.wrong:{name}",
        settings=profile_settings("ci"),
        **options,
    )


def _built(lines: list[str]) -> dict:
    scope: dict = {"torch": torch}
    exec("from properties.layouts import lay_out\n" + "\n".join(lines), scope)
    return scope


@settings(max_examples=40, deadline=None)
@given(scale_cases(SMALL))
def test_the_script_builds_the_tensors_the_check_built(case: ScaleCase) -> None:
    scope = _built(case.construction_lines(1))
    for name, made in zip(("token_nll", "zfree_token_nll", "mask"), case.tensors(), strict=True):
        written = scope[f"{name}_1"]
        assert written.dtype == made.dtype and written.stride() == made.stride(), name
        assert torch.equal(written.nan_to_num(7.0), made.nan_to_num(7.0)), name


@settings(max_examples=40, deadline=None)
@given(scale_cases(SMALL))
def test_drawn_cases_lie_in_the_domain_and_have_a_valid_token(case: ScaleCase) -> None:
    assert SMALL.admits(case) and case.has_valid_token
    assert (
        "\n" not in repr(case) and len(repr(case)) < 1200
    )  # two runs and three spikes a tensor at most


@settings(max_examples=30, deadline=None)
@given(across_thresholds(SMALL))
def test_padding_past_a_threshold_keeps_every_valid_value(pair: AcrossThreshold) -> None:
    small, large = pair.case.tensors(), pair.padded.tensors()
    batch, length = pair.case.shape
    valid = small[2].bool()
    assert not large[2].bool()[batch:].any() and not large[2].bool()[:, length:].any()
    assert torch.equal(large[2].bool()[:batch, :length], valid)
    for a, b in zip(small[:2], large[:2], strict=True):
        assert torch.equal(a[valid], b[:batch, :length][valid])


def test_dense_values_are_the_same_at_every_size() -> None:
    values = Values(dense=(3, 0.5, 4.0))
    assert torch.equal(values.build(3, 100, "cpu"), values.build(5, 400, "cpu")[:3, :100])


def test_sizes_reach_every_power_of_two_and_its_neighbours() -> None:
    sizes = around_powers_of_two(1, 65536)
    assert {15, 16, 17, 32767, 32768, 32769, 65535, 65536} <= set(sizes)
    assert max(sizes) == 65536 and min(sizes) == 15


def test_the_edge_cases_reach_what_training_runs() -> None:
    cases = [named.case for named in EDGE_CASES]
    assert max(c.length for c in cases) > 2**16 and max(c.batch for c in cases) > 256
    assert max(c.batch * c.length for c in cases) >= 2**20
    assert {torch.bfloat16, torch.float16, torch.float32} <= {c.dtype for c in cases}
    assert all(DEFAULT_DOMAIN.admits(c) for c in cases if c.batch <= 256)


def test_the_sizes_given_bound_what_is_drawn() -> None:
    domain = domain_from(
        max_alpha=math.inf, max_loss=1e4, dtypes="float32", device="cpu", max_length=100,
        max_batch=4, max_positions=200,
    )  # fmt: skip
    assert (domain.max_length, domain.max_batch) == (8, 4)
    case = ScaleCase(2, 101, dtype=torch.float32)
    assert not domain.admits(case) and domain.admits(ScaleCase(2, 100, dtype=torch.float32))

    @settings(max_examples=30, deadline=None)
    @given(st.data())
    def drawn(data: st.DataObject) -> None:
        case = data.draw(scale_cases(domain))
        assert case.length <= 100 and case.batch <= 4 and case.batch * case.length <= 200

    drawn()


def test_a_failure_at_scale_names_the_size_it_starts_at() -> None:
    result = _checked("oracle-agreement-at-scale", "tail_tile_dropped", seed=1)
    assert result.status == "failed" and result.failure is not None
    message = result.failure.message
    assert message.startswith("fails at 1 x 65, passes at 1 x 64"), message
    assert result.failure.shape == (1, 65)
    assert "torch.full" in result.failure.reproduction or "torch.frac" in (
        result.failure.reproduction
    )


def test_the_script_of_a_failure_at_scale_runs_and_shows_it(tmp_path) -> None:
    result = _checked("oracle-agreement-at-scale", "int16_counts", seed=2)
    assert result.failure is not None
    script = tmp_path / "repro.py"
    script.write_text(result.failure.reproduction)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "reconstruction_loss" in done.stdout
    assert len(result.failure.reproduction.splitlines()) < 80


@pytest.mark.parametrize("layout", ["transposed", "strided", "offset"])
def test_a_layout_of_a_scale_case_is_the_same_values(layout: str) -> None:
    case = ScaleCase(3, 70, Values(dense=(1, 0.0, 2.0)), spans=(RowSpan(5), RowSpan(0, 9)))
    viewed = ScaleCase(
        3, 70, Values(dense=(1, 0.0, 2.0)), spans=(RowSpan(5), RowSpan(0, 9)),
        layouts=(layout,) * 3,
    )  # fmt: skip
    for a, b in zip(case.tensors(), viewed.tensors(), strict=True):
        assert torch.equal(a, b) and (layout == "offset" or not b.is_contiguous())


# --- the device path (--device), exercised on the CPU ---------------------------------------
# A machine without an accelerator still runs the code of a named device: "cpu:0" is a device
# other than the default "cpu" string, so every input is built there, moved back for the
# oracle, and written into the script with ``.to('cpu:0')``, as a "cuda" run would be.

ON_DEVICE = replace(DEFAULT_DOMAIN, device="cpu:0")


@settings(max_examples=10, deadline=None)
@given(st.data())
def test_the_scale_inputs_are_made_on_the_device_named(data: st.DataObject) -> None:
    case = data.draw(scale_cases(ON_DEVICE))
    pair = data.draw(across_thresholds(ON_DEVICE))
    for drawn in (case, pair.case, pair.padded):
        assert drawn.device == "cpu:0"
        lines = "\n".join(drawn.construction_lines(0))
        assert ".to('cpu:0')" in lines, lines


def test_a_failure_on_a_named_device_rebuilds_its_input_there(tmp_path) -> None:
    result = _checked("oracle-agreement-at-scale", "tail_tile_dropped", domain=ON_DEVICE, seed=1)
    assert result.failure is not None
    assert result.failure.message.startswith("fails at 1 x 65, passes at 1 x 64")
    script = result.failure.reproduction
    assert ".to('cpu:0')" in script, script
    (tmp_path / "repro.py").write_text(script)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "repro.py")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("option", "size", "bound"),
    [
        ("max_positions", 1024, lambda b, t: b * t <= 1024),
        ("max_length", 1024, lambda b, t: t <= 1024),
        # the threshold pair 2 x 32767 fits, its padded 2 x 32769 does not
        ("max_positions", 2**16, lambda b, t: b * t <= 2**16),
    ],
    ids=["max_positions", "max_length", "max_positions_2^16"],
)
def test_every_call_of_the_scale_group_keeps_within_the_sizes_given(
    option: str, size: int, bound
) -> None:
    # a kernel that supports only some sizes says so: no call, edge case, threshold pair or
    # bracket of the group may go past it (--max-positions once let T run to 65535 alone)
    from properties.default_target import reconstruction_losses

    shapes: list[tuple[int, int]] = []

    def recording(token_nll, zfree_token_nll, mask, config):
        shapes.append(tuple(token_nll.shape))
        return reconstruction_losses(token_nll, zfree_token_nll, mask, config)

    options = dict(max_alpha=math.inf, max_loss=1e4, dtypes="float64,float32,bfloat16,float16")
    domain = domain_from(**options, device="cpu", **{option: size})
    for invariant in ("oracle-agreement-at-scale", "output-gradients-at-scale", "size-thresholds"):
        result = run_invariant(
            by_id(invariant), recording, target="t", settings=profile_settings("ci"),
            domain=domain, seed=0,
        )  # fmt: skip
        assert result.status == "passed", result.failure and result.failure.message
    assert shapes and all(bound(*shape) for shape in shapes), max(shapes, key=lambda s: s[0] * s[1])


def test_a_large_gradient_shows_the_entry_most_off_beside_the_first() -> None:
    # every entry of a row a little off (n_i read as 1024) hides the one that is 0 (a tail
    # tile dropped): the report names it
    from properties.assertions import assert_tensor_close
    from properties.invariant import InvariantViolation
    from properties.tolerances import Tolerance

    expected = torch.full((1, 1025), 1 / 1025, dtype=torch.float64)
    observed = torch.full((1, 1025), 1 / 1024, dtype=torch.float64)
    observed[0, 1024] = 0.0
    with pytest.raises(InvariantViolation) as raised:
        assert_tensor_close(observed, expected, Tolerance(1e-12), what="d R/dl")
    assert "the most off: [0, 1024]: 0 (expected 0.000975609756)" in str(raised.value)


def test_a_row_valid_at_its_end_stays_so_at_every_size() -> None:
    assert [RowSpan(-1).columns(t) for t in (1, 64, 65537)] == [(0, 1), (63, 64), (65536, 65537)]
    case = ScaleCase(2, 100, spans=(RowSpan(-1),))
    assert [c.shape for c in case.smaller()][:2] == [(2, 50), (1, 100)]
    assert all(bool(c.tensors()[2][:, -1].all()) for c in case.smaller())


def test_simpler_descriptions_keep_the_size_and_change_one_part() -> None:
    case = ScaleCase(
        3, 70, Values(2.0, dense=(1, 0.0, 2.0), spikes=((0, 3, 9.0),)), Values(0.5),
        spans=(RowSpan(5), RowSpan(0, 9)), layouts=("transposed",) * 3,
    )  # fmt: skip
    found = case.simpler()
    assert [c.token_nll for c in found[:1]] == [Values(2.0)]
    assert found[1].zfree_token_nll == Values()
    assert found[2].spans == (RowSpan(),) and found[3].layouts == ("contiguous",) * 3
    assert all(c.shape == case.shape for c in found)
    assert ScaleCase(1, 9).simpler() == []


def test_the_bracket_keeps_only_the_call_that_passes_in_the_script() -> None:
    from properties.invariant import InvariantViolation
    from properties.invariants.scale import said_against_smaller
    from properties.target import Probe

    def check(probe: Probe, case: ScaleCase) -> None:
        probe.calls.append(case.shape)  # a call, as the probe records it
        if case.batch > 1:
            raise InvariantViolation("off")

    probe = Probe(lambda *args: None)
    said = said_against_smaller(check)(probe, ScaleCase(2, 65), InvariantViolation("off"))
    assert str(said).startswith("fails at 2 x 65, passes at 1 x 65: off")
    assert probe.calls == [(1, 65)]  # 2 x 64 failed too: it says nothing, and is not shown


def test_the_magnitudes_are_the_outputs_where_no_loss_is_negative() -> None:
    from properties.invariants.scale import _cpu_tensors, magnitudes_at_scale
    from spec.array_oracle import output_magnitudes

    for low in (0.0, -3.0):
        case = ScaleCase(3, 70, Values(dense=(1, low, 2.0)), Values(dense=(2, 0.5, 2.0)))
        assert magnitudes_at_scale(case) == output_magnitudes(*_cpu_tensors(case), case.config)
