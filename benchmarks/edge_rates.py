"""How often ``loss_cases()`` draws each named edge (``tests/properties/test_strategies.py``
``EDGES``), over many hypothesis runs: the test asks for 1 case in 100 of one run of 400, so
each edge's worst run here should be far above 4.

Run from the repository root:

    python benchmarks/edge_rates.py                  # 40 runs (seeds 0..39) of 400 cases
    python benchmarks/edge_rates.py --runs 100 --examples 400

Each run is an ordinary random hypothesis run under its own seed (generation only, as the
test's fixture draws). An edge that is drawn once per case (alpha, epsilon, c) varies most
from run to run: hypothesis mutates the cases it drew first, so a run's cases cluster.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from hypothesis import given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from properties.strategies import loss_cases
from tests.properties.test_strategies import EDGES


def drawn(run_seed: int, examples: int) -> list:
    cases: list = []

    @seed(run_seed)
    @settings(max_examples=examples, deadline=None, database=None)
    @given(loss_cases())
    def collect(case) -> None:
        cases.append(case)

    collect()
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--examples", type=int, default=400)
    options = parser.parse_args()
    hits: dict[str, list[int]] = {edge: [] for edge in EDGES}
    for run_seed in range(options.runs):
        cases = drawn(run_seed, options.examples)
        for edge, holds in EDGES.items():
            hits[edge].append(sum(1 for case in cases if holds(case)))
    print(f"cases with each edge, per run of {options.examples} ({options.runs} runs)")
    print(f"{'edge':42} {'fewest':>6} {'tenth':>6} {'median':>6}")
    for edge, counts in sorted(hits.items(), key=lambda item: min(item[1])):
        counts.sort()
        tenth = counts[len(counts) // 10]
        print(f"{edge:42} {counts[0]:6d} {tenth:6d} {statistics.median(counts):6.0f}")


if __name__ == "__main__":
    main()
