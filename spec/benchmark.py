"""How many oracle evaluations a second: ``python -m spec.benchmark``.

Times ``spec.evaluate`` and ``spec.evaluate_details`` on a random float64 batch of
``B = T = 8`` (every position valid, the slowest case) for a few alphas, after one warm-up
call that builds the cached lambdified functions. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from spec.oracle import evaluate, evaluate_details
from spec.terms import config_mapping


def _batch(rows: int, width: int, density: float, seed: int) -> tuple[list, list, list]:
    rng = random.Random(seed)
    nll = [[rng.uniform(0, 10) for _ in range(width)] for _ in range(rows)]
    base = [[rng.uniform(0, 10) for _ in range(width)] for _ in range(rows)]
    mask = [[rng.random() < density for _ in range(width)] for _ in range(rows)]
    mask[0][0] = True
    return nll, base, mask


def rate(function: Callable[..., Any], arguments: tuple, seconds: float) -> tuple[float, float]:
    """Calls per second of ``function(*arguments)``: per wall second and per CPU second.

    The CPU figure is what an otherwise idle core gives; the wall figure drops when other
    processes share the machine.
    """
    function(*arguments)  # warm-up: builds and caches the lambdified functions
    calls, wall, cpu = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - wall) < seconds:
        function(*arguments)
        calls += 1
    return calls / elapsed, calls / (time.process_time() - cpu)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spec.benchmark", description=__doc__)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--density", type=float, default=1.0, help="share of valid positions")
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    args = parser.parse_args(argv)
    nll, base, mask = _batch(args.rows, args.width, args.density, seed=0)
    print(f"B={args.rows} T={args.width} density={args.density}")
    for alpha in (0.0, 1.0, 2.5, 1000.0):
        config = config_mapping(
            raw_weight=1.0,
            distribution_normalized_weight=0.5,
            example_inverse_surprisal_weight=0.25,
            token_weighted_weight=1.0,
            normalized_concentration_corrected_token_weighted_weight=0.5,
            token_weight_alpha=alpha,
            example_inverse_surprisal_epsilon=0.1,
            zfree_reference_scale=1.5,
        )
        for function in (evaluate, evaluate_details):
            wall, cpu = rate(function, (nll, base, mask, config), args.seconds)
            print(
                f"alpha={alpha:<7g} {function.__name__:<17} {wall:6.0f} evaluations/s "
                f"(wall), {cpu:6.0f} per CPU second"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
