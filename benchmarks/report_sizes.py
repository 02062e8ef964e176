"""How long and how telling the failure report is on every wrong implementation of the zoo.

Run from the repository root:

    python benchmarks/report_sizes.py                       # every zoo entry, seeds 1 2 3
    python benchmarks/report_sizes.py --seeds 1 --only global_token_mean
    python benchmarks/report_sizes.py --tree /path/to/other/checkout   # another revision

For each wrong implementation of ``properties.zoo.wrong`` (``recon-spec check``) and each
wrong API of ``properties.zoo.api.wrong`` (``recon-spec check-api``), under each seed, it
runs the command as a user does (default profile, ``--seed S --no-database``) in a process
of its own, and reads its report: lines, sections, the B x T of the input the first section
shows (of its labels, for logits) and whether it has no more cells than the smallest input
that shows the mistake (``properties.zoo.wrong.SMALLEST``,
``properties.zoo.api.smallest.SMALLEST``), whether the summary (or, for a report without
one, the first section) names the mistake as ``properties.zoo.reported`` says it must, the seconds
to the first result line and to the verdict. ``--tree`` runs another checkout's
``properties.cli`` the same way (its report before causes were grouped, say); naming and
sizes there are looked up in this one's tables. Prints a row per run, then the median and
largest figures.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_SECTION = re.compile(r"^(\[\d+\] )?(FAILED|CRASHED|TIMEOUT|ERROR|MISSING) [a-z0-9-]+: ", re.M)
_MASK = re.compile(r"mask=(\[\[.*?\]\])[,)]")
_LOGITS = re.compile(r"\[B, T, V\] = \[(\d+), (\d+), \d+\]")
_SCALE = re.compile(r"ScaleCase\((\d+) x (\d+)")


def shown_shape(report: str) -> tuple[int, int] | None:
    """B x T of the first input the report shows (the first section's)."""
    start = _SECTION.search(report)
    if start is None:
        return None
    scale = _SCALE.search(report, start.end())
    logits = _LOGITS.search(report, start.end())
    found = _MASK.search(report, start.end())
    if scale is not None and all(m is None or scale.start() < m.start() for m in (logits, found)):
        return int(scale[1]), int(scale[2])  # a batch at training size, described
    if logits is not None and (found is None or logits.start() < found.start()):
        return int(logits[1]), int(logits[2])  # a logits call: its labels' B x T
    if found is None:
        return None
    rows = eval(found.group(1))  # a literal list of lists of bools, written by the report
    return len(rows), len(rows[0]) if rows else 0


def summary_text(report: str) -> str:
    """What a reader sees before the sections: the summary (or the first section's header
    and likely cause, where there is no summary)."""
    start = _SECTION.search(report)
    head = report[: start.start()] if start else report
    if "cause" in head:
        return head
    if start is None:
        return report
    end = report.find("reproduce without hypothesis", start.end())
    return report[: end if end > 0 else None]


def label(command: str, name: str) -> str:
    """A zoo entry's name in the rows and saved reports: a wrong API's marked as one (the
    two zoos may hold the same name: terms_detached)."""
    return f"api:{name}" if command == "check-api" else name


def measure(
    tree: Path,
    command: str,
    target: str,
    seed: int,
    timeout: float,
    save: Path | None = None,
    jobs: int = 2,
) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "CI": ""}
    argv = [sys.executable, "-m", "properties.cli", command, target, "--seed", str(seed)]
    argv += ["--no-database", "-j", str(jobs)]
    if command == "check-api":
        argv.append("--with-logits")  # the opt-in group some wrong APIs get wrong
    start = time.perf_counter()
    process = subprocess.Popen(
        argv, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    first_result = None
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if first_result is None and len(lines) > 3 and line.strip():
            first_result = time.perf_counter() - start
    process.wait(timeout)
    report = "".join(lines)
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        (save / f"{label(command, target.rpartition(':')[2])}.{seed}.txt").write_text(report)
    return {
        "status": process.returncode,
        "lines": len(lines),
        "sections": len(_SECTION.findall(report)),
        "shape": shown_shape(report),
        "summary": summary_text(report),
        "first": first_result,
        "seconds": time.perf_counter() - start,
    }


def entries(only: set[str]) -> list[tuple[str, str, str]]:
    """(command, target, zoo name) of every wrong implementation and API."""
    from properties.zoo.api.wrong import WRONG_APIS
    from properties.zoo.wrong import WRONG_IMPLEMENTATIONS

    found = [("check", f"properties.zoo.wrong:{name}", name) for name in WRONG_IMPLEMENTATIONS]
    found += [("check-api", f"properties.zoo.api.wrong:{name}", name) for name in WRONG_APIS]
    return [e for e in found if not only or e[2] in only]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--only", nargs="+", default=[], help="zoo names to run")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run")
    parser.add_argument("--parallel", type=int, default=1, help="runs at a time")
    parser.add_argument("--jobs", type=int, default=2, help="-j of each run")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--save", type=Path, help="write each report into this folder")
    args = parser.parse_args()
    from properties.zoo.api.smallest import SMALLEST as API_SMALLEST
    from properties.zoo.api.wrong import WRONG_APIS
    from properties.zoo.reported import names_mistake
    from properties.zoo.wrong import SMALLEST

    jobs = [(e, seed) for e in entries(set(args.only)) for seed in args.seeds]
    with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        futures = {
            pool.submit(
                measure, args.tree, command, target, seed, args.timeout, args.save, args.jobs
            ): (command, name, seed)
            for (command, target, name), seed in jobs
        }
        rows = []
        for future in concurrent.futures.as_completed(futures):
            command, name, seed = futures[future]
            figures = future.result()
            named = names_mistake(command, name, figures["summary"])
            shape = figures["shape"]
            smallest = (
                SMALLEST.get(name) if command == "check" else API_SMALLEST.get(WRONG_APIS[name])
            )
            least = (
                "-"
                if smallest is None or shape is None
                else ("yes" if shape[0] * shape[1] <= smallest.cells else "NO")
            )
            shown_name = label(command, name)
            rows.append((shown_name, seed, figures, named, least))
            print(
                f"{shown_name:<36} seed {seed}  exit {figures['status']}  "
                f"{figures['lines']:>4} lines  "
                f"{figures['sections']:>2} sections  shown "
                f"{'-' if shape is None else f'{shape[0]}x{shape[1]}':>5}  "
                f"named {'yes' if named else 'NO'}  smallest {least:>3}  "
                f"first line {figures['first'] or 0:5.1f}s  "
                f"verdict {figures['seconds']:5.1f}s",
                flush=True,
            )
    lines = [f["lines"] for _, _, f, *_ in rows]
    sections = [f["sections"] for _, _, f, *_ in rows]
    firsts = [f["first"] for _, _, f, *_ in rows if f["first"] is not None]
    smallest = [least for *_, least in rows if least != "-"]
    print(
        f"\n{len(rows)} runs: lines median {statistics.median(lines)}, max {max(lines)}; "
        f"sections median {statistics.median(sections)}, max {max(sections)}; named "
        f"{sum(n for *_, n, _ in rows)} of {len(rows)}; smallest input shown "
        f"{smallest.count('yes')} of {len(smallest)}; first result line median "
        f"{statistics.median(firsts):.1f}s, max {max(firsts):.1f}s"
    )
    failed_exit = [(n, s) for n, s, f, *_ in rows if f["status"] == 0]
    if failed_exit:
        print(f"passed (exit 0), which a wrong implementation must not: {failed_exit}")


if __name__ == "__main__":
    main()
