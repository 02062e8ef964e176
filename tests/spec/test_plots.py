"""The figure script runs (it needs matplotlib, the optional ``plots`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spec.plots import FIGURES, baseline_r_ex, shares_and_kappa


def test_figure_data_come_from_the_oracle() -> None:
    shares, kappa = shares_and_kappa([0.0, 1.0, 50.0])
    assert all(series[0] == shares[0][0] for series in shares)  # uniform at alpha = 0
    assert kappa[0] == 1.0 and kappa[0] <= kappa[1] <= kappa[2]
    totals, _ = baseline_r_ex([0.0, 1.0])
    assert totals[0] == 1.0 and totals[1] < 1.0


def test_plot_script_writes_deterministic_pngs(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plots extra (matplotlib) is not installed")
    from spec.plots import main

    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["--out", str(first)]) == 0
    assert main(["--out", str(second)]) == 0
    for name in FIGURES:
        data = (first / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert data == (second / name).read_bytes()
        assert b"Software" not in data
