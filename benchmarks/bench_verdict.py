"""Time to a verdict: ``recon-spec check`` on every wrong implementation of the zoo, over the
same check on the bundled (passing) implementation.

Run from the repository root:

    python benchmarks/bench_verdict.py               # the whole zoo, ci profile, -j 2
    python benchmarks/bench_verdict.py --only global_token_mean --only alpha_ignored

Each check runs as users run it (a fresh ``recon-spec check`` process, the ``ci`` profile,
``--no-database`` so that no run replays another's failure), and its wall time is taken
from start to exit. The passing check runs again before every few wrong ones, interleaved,
so that drifts in the machine's load hit both alike; each wrong implementation's time is
divided by the median of the passing runs. The figure of merit is the median of those
ratios over the zoo (the target: at most 2).
"""

from __future__ import annotations

import argparse
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


def timed_check(target: str, jobs: int) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        [*CHECK, target, "--profile", "ci", "--no-database", "-j", str(jobs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - start, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a wrong implementation (repeatable)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--every", type=int, default=4, help="wrong ones per passing run")
    args = parser.parse_args()
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
