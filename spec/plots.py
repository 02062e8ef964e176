"""The figures of docs/SPEC.md, computed by the oracle and drawn with matplotlib.

matplotlib is the optional ``plots`` extra (``pip install 'recon-spec[plots]'``), never a
runtime dependency: it is imported only when the figures are drawn. Run

    python -m spec.plots            # writes docs/img/*.png
    python -m spec.plots --out DIR  # writes them elsewhere

The sample data the figures use are the constants below; the document shows them too.
The PNGs carry no software or date metadata, so the same matplotlib draws the same bytes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from spec.oracle import evaluate_details
from spec.terms import EX, config_mapping

#: The sample sequence of the shares figure: the z-free surprisals b_t of six tokens.
SAMPLE_SEQUENCE: tuple[float, ...] = (0.25, 0.5, 1.0, 1.5, 2.5, 4.0)
#: The alphas of the shares figure.
ALPHA_RANGE: tuple[float, float] = (0.0, 5.0)
#: The sample batch of the R_ex figure: each example's z-free token losses.
SAMPLE_BATCH: tuple[tuple[float, ...], ...] = (
    (0.05, 0.15, 0.1),
    (0.4, 0.8, 0.6, 0.2),
    (1.5, 2.5),
    (3.0, 5.0, 4.0, 6.0, 2.0),
)
#: The epsilons of the R_ex figure (log scale).
EPSILON_RANGE: tuple[float, float] = (1e-4, 1e2)

SHARES_FIGURE = "shares_and_kappa_vs_alpha.png"
EPSILON_FIGURE = "r_ex_vs_epsilon.png"
FIGURES: tuple[str, ...] = (SHARES_FIGURE, EPSILON_FIGURE)


def default_directory() -> Path:
    """``docs/img`` of the repository holding the ``spec`` package."""
    return Path(__file__).resolve().parent.parent / "docs" / "img"


def _config(alpha: float, epsilon: float, scale: float) -> dict[str, float]:
    return config_mapping(
        raw_weight=1.0,
        token_weight_alpha=alpha,
        example_inverse_surprisal_epsilon=epsilon,
        zfree_reference_scale=scale,
    )


def _grid(low: float, high: float, count: int, *, log: bool = False) -> list[float]:
    if log:
        ratio = (high / low) ** (1 / (count - 1))
        return [low * ratio**k for k in range(count)]
    return [low + (high - low) * k / (count - 1) for k in range(count)]


def shares_and_kappa(alphas: Sequence[float]) -> tuple[list[list[float]], list[float]]:
    """Shares (one list per token) and kappa of ``SAMPLE_SEQUENCE`` at each alpha."""
    b = [list(SAMPLE_SEQUENCE)]
    mask = [[True] * len(SAMPLE_SEQUENCE)]
    shares: list[list[float]] = [[] for _ in SAMPLE_SEQUENCE]
    kappa: list[float] = []
    for alpha in alphas:
        result = evaluate_details(b, b, mask, _config(alpha, 1e-8, 1.0))
        for token, value in enumerate(result.shares[0]):
            shares[token].append(float(value))
        kappa.append(float(result.kappa[0]))
    return shares, kappa


def baseline_r_ex(epsilons: Sequence[float]) -> tuple[list[float], list[list[float]]]:
    """R_ex of ``SAMPLE_BATCH`` at the baseline (l = b), and each example's bbar/(bbar+eps)."""
    width = max(len(row) for row in SAMPLE_BATCH)
    b = [list(row) + [0.0] * (width - len(row)) for row in SAMPLE_BATCH]
    mask = [[k < len(row) for k in range(width)] for row in SAMPLE_BATCH]
    totals: list[float] = []
    per_example: list[list[float]] = [[] for _ in SAMPLE_BATCH]
    for epsilon in epsilons:
        result = evaluate_details(b, b, mask, _config(1.0, epsilon, 1.0))
        totals.append(result.values[EX.name])
        for row, bbar in enumerate(result.bbar):
            per_example[row].append(float(bbar / (bbar + epsilon)))
    return totals, per_example


def write_plots(directory: Path | None = None) -> list[Path]:
    """Draw the figures into ``directory`` (default ``docs/img``); return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = default_directory() if directory is None else Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    plt.rcParams.update({"font.size": 9, "axes.spines.top": False, "axes.spines.right": False})

    # Shares and kappa as alpha moves.
    alphas = _grid(*ALPHA_RANGE, 201)
    shares, kappa = shares_and_kappa(alphas)
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
    for value, series in zip(SAMPLE_SEQUENCE, shares, strict=True):
        left.plot(alphas, series, label=f"$b_t = {value:g}$")
    left.set(xlabel=r"$\alpha$", ylabel=r"share $\pi_t$", title="Token shares", ylim=(0, 1))
    left.axvline(1.0, color="0.7", linewidth=0.8, linestyle=":")
    left.legend(fontsize=7, frameon=False)
    limit = max(SAMPLE_SEQUENCE) * len(SAMPLE_SEQUENCE) / sum(SAMPLE_SEQUENCE)
    right.plot(alphas, kappa, color="black")
    right.axhline(1.0, color="0.6", linewidth=0.8, linestyle="--")
    right.axhline(limit, color="0.6", linewidth=0.8, linestyle=":")
    right.annotate(r"$\max_t b_t / \bar b$", (alphas[-1], limit), ha="right", va="top")
    right.set(xlabel=r"$\alpha$", ylabel=r"$\kappa$", title="Concentration factor")
    figure.suptitle("One example, b = " + ", ".join(f"{x:g}" for x in SAMPLE_SEQUENCE))
    written.append(_save(figure, directory / SHARES_FIGURE))
    plt.close(figure)

    # R_ex against epsilon at the baseline.
    epsilons = _grid(*EPSILON_RANGE, 121, log=True)
    totals, per_example = baseline_r_ex(epsilons)
    figure, axes = plt.subplots(figsize=(6, 3.4), layout="constrained")
    for row, series in zip(SAMPLE_BATCH, per_example, strict=True):
        bbar = sum(row) / len(row)
        (line,) = axes.plot(
            epsilons, series, linewidth=0.9, linestyle="--", label=rf"$\bar b_i = {bbar:.3g}$"
        )
        # bbar_i / (bbar_i + eps) is 1/2 at eps = bbar_i.
        axes.plot([bbar], [0.5], marker="o", markersize=3, color=line.get_color())
    axes.plot(epsilons, totals, color="black", label=r"$R_\mathrm{ex}$ (mean over examples)")
    axes.axhline(1.0, color="0.6", linewidth=0.8, linestyle="--")
    axes.set(
        xscale="log",
        xlabel=r"$\varepsilon$",
        ylabel=r"$R_\mathrm{ex}$ at $l = b$",
        title=r"$R_\mathrm{ex} = \mathrm{mean}_i\, \bar b_i / (\bar b_i + \varepsilon)$"
        " at the baseline",
        ylim=(0, 1.05),
    )
    axes.legend(frameon=False, loc="lower left", fontsize=7)
    written.append(_save(figure, directory / EPSILON_FIGURE))
    plt.close(figure)
    return written


def _save(figure: object, path: Path) -> Path:
    # No "Software" entry and no date: the bytes depend on the data and matplotlib only.
    figure.savefig(path, dpi=110, metadata={"Software": None})
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spec.plots", description="Draw the figures of docs/SPEC.md."
    )
    parser.add_argument("--out", type=Path, default=None, help="directory (default: docs/img)")
    args = parser.parse_args(argv)
    try:
        paths = write_plots(args.out)
    except ImportError:
        print("spec.plots needs matplotlib: pip install 'recon-spec[plots]'", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
