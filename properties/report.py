"""The conformance report: a table while the run goes, then one section per failure."""

from __future__ import annotations

from typing import TextIO

from properties.invariant import Invariant
from properties.runner import InvariantResult

MARKS = {"passed": "ok", "failed": "FAILED", "not applicable": "n/a"}


def header(target: str, profile: str, count: int, out: TextIO) -> None:
    out.write(f"recon-spec check: {target}\n")
    out.write(f"profile {profile}, {count} invariants\n\n")
    out.write(f"{'invariant':<32} {'group':<11} {'result':<7} {'examples':>8} {'time':>8}\n")
    out.flush()


def row(invariant: Invariant, result: InvariantResult, out: TextIO) -> None:
    out.write(
        f"{invariant.id:<32} {invariant.group:<11} {MARKS[result.status]:<7} "
        f"{result.examples:>8} {result.seconds:>7.1f}s\n"
    )
    out.flush()


def failure_section(
    invariant: Invariant, result: InvariantResult, target: str, profile: str, out: TextIO
) -> None:
    failure = result.failure
    assert failure is not None
    rule = "=" * 100
    out.write(f"\n{rule}\nFAILED {invariant.id}: {invariant.statement}\n")
    out.write(f"spec: {', '.join(invariant.spec_refs)} (docs/SPEC.md, docs/MATH.md)\n\n")
    out.write(failure.message.rstrip() + "\n")
    if failure.diagnosis:
        out.write("\nlikely cause:\n")
        for finding in failure.diagnosis:
            out.write(f"  - {finding}\n")
    if failure.edge_case:
        where = f"the named edge case {failure.edge_case!r} (properties/invariants/edge_cases.py)"
        if failure.shrunk:
            out.write(f"\n{where} fails too; the input below is a random one, smaller:\n")
        else:
            out.write(f"\n{where} fails (no random input did):\n")
    if failure.shrunk:
        out.write(f"\nminimal input (shrunk by hypothesis):\n  {failure.minimal_input}\n")
    else:
        out.write(f"  {failure.minimal_input}\n")
    if failure.traceback:
        out.write("\ntraceback:\n" + failure.traceback)
    out.write("\nreproduce without hypothesis (copy into a file and run it):\n")
    out.write("-" * 100 + "\n" + failure.reproduction.rstrip() + "\n" + "-" * 100 + "\n")
    seed = f" --seed {result.seed}" if result.seed is not None else ""
    out.write(
        f"rerun this invariant: recon-spec check {target} --invariant {invariant.id} "
        f"--profile {profile}{seed}\n"
    )


def summary(results: list[InvariantResult], seconds: float, out: TextIO) -> None:
    failed = [r.invariant_id for r in results if r.status == "failed"]
    passed = sum(r.status == "passed" for r in results)
    examples = sum(r.examples for r in results)
    out.write(
        f"\n{passed} passed, {len(failed)} failed, {examples} examples in {seconds:.1f}s"
        + (f": {', '.join(failed)}" if failed else "")
        + "\n"
    )
