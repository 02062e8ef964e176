"""Draw the logged terms of a training run over its steps, from the CSV it wrote.

    python examples/train_causal_lm.py --steps 200 --reference-steps 400 --out log.csv
    python examples/plot_training_log.py log.csv docs/img/train_causal_lm_terms.png

Needs matplotlib (the ``plots`` or ``test`` extra). Four panels: the terms in nats per
token, the terms in units of the z-free reference (1 at its baseline), the two weighted
totals, and the KL of z with the token concentration factor. The PNG carries no software
or date metadata, so the same CSV and matplotlib draw the same bytes.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path

PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "nats per token",
        (
            "reconstruction_loss",
            "token_weighted_reconstruction_loss",
            "token_weighted_base_loss",
        ),
    ),
    (
        "in units of the z-free reference",
        (
            "distribution_normalized_reconstruction_loss",
            "normalized_concentration_corrected_token_weighted_reconstruction_loss",
            "example_inverse_surprisal_weighted_reconstruction_loss",
        ),
    ),
    ("the weighted totals", ("total_reconstruction_loss", "total_loss")),
    ("the latent z, and the concentration", ("kl", "token_concentration_factor")),
)


#: logged columns that are no training value
NOT_PLOTTED = ("step", "seconds")


def panels(logged: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``PANELS`` for a log with the columns ``logged``: a logged value that no panel names
    (a term added to the stack since) joins the first, so that every value is drawn."""
    placed = {name for _, names in PANELS for name in names}
    extra = tuple(n for n in logged if n not in placed and n not in NOT_PLOTTED)
    (label, names), *rest = PANELS
    return ((label, names + extra), *rest)


def read_log(path: Path) -> dict[str, list[float]]:
    """The CSV's columns, as floats."""
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))
    if not rows:
        raise ValueError(f"{path} holds no logged step")
    return {name: [float(row[name]) for row in rows] for name in rows[0]}


def plot(log: dict[str, list[float]], path: Path, *, title: str | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 8, "axes.spines.top": False, "axes.spines.right": False})
    figure, axes = plt.subplots(2, 2, figsize=(9, 5.6), layout="constrained", sharex=True)
    steps = log["step"]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for axis, (label, names) in zip(axes.flat, panels(list(log)), strict=True):
        lines = []
        for index, name in enumerate(names):
            # A second y axis for the second series of the last panel: kl and kappa differ
            # by an order of magnitude.
            target = axis.twinx() if label == PANELS[-1][0] and index == 1 else axis
            if name in log:
                lines += target.plot(
                    steps, log[name], linewidth=0.9, label=name, color=colors[index % len(colors)]
                )
        if label == "in units of the z-free reference":
            axis.axhline(1.0, color="0.6", linewidth=0.8, linestyle="--")
        axis.set(title=label)
        axis.legend(handles=lines, fontsize=6, frameon=False)
    for axis in axes[-1]:
        axis.set(xlabel="optimizer step")
    if title:
        figure.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(figure)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="the CSV of examples/train_causal_lm.py")
    parser.add_argument("png", type=Path, help="the figure to write")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    try:
        print(plot(read_log(args.log), args.png, title=args.title))
    except ImportError:
        print("plotting needs matplotlib: pip install -e '.[plots]'", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
