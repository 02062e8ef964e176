"""examples/plot_training_log.py draws the committed figure's panels from a training CSV."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from recon_impl import RECONSTRUCTION_LOSS_NAMES

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "plot_training_log.py"
FIGURE = ROOT / "docs" / "img" / "train_causal_lm_terms.png"


def load_script():
    spec = importlib.util.spec_from_file_location("plot_training_log", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_figure_is_drawn_the_same_from_the_same_log(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plots extra (matplotlib) is not installed")
    log = tmp_path / "log.csv"
    names = ["step", *RECONSTRUCTION_LOSS_NAMES, "kl", "total_loss", "seconds"]
    with log.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(names)
        for step in range(1, 6):
            writer.writerow([step] + [1.0 + 0.1 * step * k for k in range(1, len(names))])
    script = load_script()
    assert script.main([str(log), str(tmp_path / "a.png")]) == 0
    assert script.main([str(log), str(tmp_path / "b.png")]) == 0
    first = (tmp_path / "a.png").read_bytes()
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    assert first == (tmp_path / "b.png").read_bytes()
    plotted = {name for _, panel in script.panels(names) for name in panel}
    assert plotted == {*RECONSTRUCTION_LOSS_NAMES, "kl", "total_loss"}  # every logged value
    # a value the panels do not name yet (a new term) is drawn too
    later = {name for _, panel in script.panels([*names, "new_term_loss"]) for name in panel}
    assert "new_term_loss" in later


def test_an_empty_log_is_a_value_error(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    log.write_text("step,total_loss\n")
    with pytest.raises(ValueError, match=r"holds no logged step"):
        load_script().read_log(log)


def test_the_guide_shows_the_committed_figure() -> None:
    guide = (ROOT / "docs" / "GUIDE.md").read_text(encoding="utf-8")
    assert "](img/train_causal_lm_terms.png)" in guide
    assert FIGURE.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
