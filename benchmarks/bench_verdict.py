"""Time to a verdict: ``recon-spec check`` on every wrong implementation of the zoo, over the
same check on the bundled (passing) implementation.

Run from the repository root:

    python benchmarks/bench_verdict.py               # the whole zoo, ci profile, -j 2
    python benchmarks/bench_verdict.py --only global_token_mean --only alpha_ignored
    python benchmarks/bench_verdict.py --against ../main-before --rounds 6

``--against ROOT`` times the passing check of this checkout and of another one (its own
suite, run with ``PYTHONPATH=ROOT``) in alternation, ``--rounds`` times each, and prints
the ratio of their medians: what a change to the suite costs a user's verdict.

Each check runs as users run it (a fresh ``recon-spec check`` process, the ``ci`` profile,
``--no-database`` so that no run replays another's failure), and its wall time is taken
from start to exit. The passing check runs again before every few wrong ones, interleaved,
so that drifts in the machine's load hit both alike; each wrong implementation's time is
divided by the median of the passing runs. The figure of merit is the median of those
ratios over the zoo (the target: at most 2).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from properties.zoo.wrong import WRONG_IMPLEMENTATIONS  # noqa: E402

PASSING = "recon_impl:reconstruction_losses"
CHECK = (sys.executable, "-m", "properties.cli", "check")


def timed_check(target: str, jobs: int, root: Path = ROOT) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        [*CHECK, target, "--profile", "ci", "--no-database", "-j", str(jobs)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - start, done.returncode


def side_by_side(other: Path, rounds: int, jobs: int) -> None:
    """The passing check of this checkout and of ``other``, alternately."""
    times: dict[Path, list[float]] = {ROOT: [], other: []}
    for round_ in range(rounds):
        for root in (ROOT, other) if round_ % 2 == 0 else (other, ROOT):
            seconds, status = timed_check(PASSING, jobs, root)
            assert status == 0, f"the bundled implementation failed the check of {root}"
            times[root].append(seconds)
            print(f"{root!s:<45} {seconds:6.1f} s", flush=True)
    this, that = (statistics.median(times[root]) for root in (ROOT, other))
    print(f"\npassing check: {this:.1f} s here, {that:.1f} s in {other} (medians of {rounds})")
    print(f"this checkout over the other: {this / that:.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a wrong implementation (repeatable)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--every", type=int, default=4, help="wrong ones per passing run")
    parser.add_argument("--against", type=Path, help="time the passing check beside this checkout")
    parser.add_argument("--rounds", type=int, default=6, help="passing checks each (--against)")
    args = parser.parse_args()
    if args.against is not None:
        side_by_side(args.against.resolve(), args.rounds, args.jobs)
        return
    names = args.only or sorted(WRONG_IMPLEMENTATIONS)
    passing: list[float] = []
    wrong: dict[str, tuple[float, int]] = {}
    for index, name in enumerate(names):
        if index % args.every == 0:
            seconds, status = timed_check(PASSING, args.jobs)
            assert status == 0, f"the bundled implementation failed its check ({status})"
            passing.append(seconds)
            print(f"{'(passing) ' + PASSING:<45} {seconds:6.1f} s", flush=True)
        wrong[name] = timed_check(f"properties.zoo.wrong:{name}", args.jobs)
        print(f"{name:<45} {wrong[name][0]:6.1f} s  exit {wrong[name][1]}", flush=True)
    seconds, status = timed_check(PASSING, args.jobs)
    passing.append(seconds)
    baseline = statistics.median(passing)
    ratios = {name: seconds / baseline for name, (seconds, _) in wrong.items()}
    print(f"\npassing check: median {baseline:.1f} s over {len(passing)} runs")
    print(f"failing checks: {min(ratios.values()):.2f}x to {max(ratios.values()):.2f}x")
    print(
        f"time to verdict, median over {len(ratios)} wrong implementations: "
        f"{statistics.median(ratios.values()):.2f}x the passing check"
    )
    missed = [name for name, (_, status) in wrong.items() if status != 1]
    if missed:
        print(f"not rejected with exit 1: {', '.join(missed)}")


if __name__ == "__main__":
    main()
