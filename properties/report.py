"""The conformance report: a table while the run goes, then one section per failure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from properties.database import storage_directory
from properties.invariant import Invariant
from properties.options import rerun_command
from properties.runner import BOUNDED_SHRINK_CALLS, SAVED, InvariantResult

MARKS = {
    "passed": "ok",
    "failed": "FAILED",
    "not applicable": "n/a",
    "crashed": "CRASHED",
    "timed out": "TIMEOUT",
    "error": "ERROR",
    "not checked": "MISSING",
    "skipped": "skip",
}
RULE = "=" * 100


def header(
    target: str, profile: str, count: int, out: TextIO, *, command: str = "check", note: str = ""
) -> None:
    out.write(f"recon-spec {command}: {target}\n")
    out.write(f"profile {profile}, {count} invariants{note}\n\n")
    out.write(f"{'invariant':<32} {'group':<11} {'result':<7} {'examples':>8} {'time':>8}\n")
    out.flush()


def row(invariant: Invariant, result: InvariantResult, out: TextIO) -> None:
    out.write(
        f"{invariant.id:<32} {invariant.group:<11} {MARKS[result.status]:<7} "
        f"{result.examples:>8} {result.seconds:>7.1f}s\n"
    )
    out.flush()


def _input_lines(result: InvariantResult) -> list[str]:
    failure = result.failure
    assert failure is not None
    lines = []
    if result.status in ("error", "not checked"):
        return []
    if result.status in ("crashed", "timed out"):
        return ["", "the input of that call:", f"  {failure.minimal_input}"]
    edge = failure.edge_case
    if failure.other_edge_case is not None:
        other, how = failure.other_edge_case
        lines += [
            "",
            f"the named edge case {other.name!r} fails this invariant too, in another way "
            f"({how}). It is there because: {other.why}",
        ]
    if edge is not None and edge.name == SAVED:
        lines += [
            "",
            "minimal input (an earlier run found and shrank it; replayed from the "
            "example database, .hypothesis/examples):",
        ]
    elif edge is not None:
        lines += [
            "",
            f"the named edge case {edge.name!r} fails (no random input did). It is there "
            f"because: {edge.why}",
        ]
    if failure.shrunk and failure.bounded:
        lines += [
            "",
            f"input (shrinking stopped after {BOUNDED_SHRINK_CALLS} more steps, as for every "
            "failure after a run's first; rerun this invariant alone for a minimal one):",
        ]
    elif failure.shrunk:
        lines += ["", "minimal input (shrunk by hypothesis):"]
    elif edge is None:
        lines += ["", "input (as drawn, not shrunk):"]
    lines.append(f"  {failure.minimal_input}")
    return lines


def _documents(refs: Sequence[str]) -> str:
    """Where the references are written: docs/MATH.md and docs/API.md by name; an identity's
    id is rendered, with its proof, in docs/SPEC.md."""
    pages = {ref.split("#")[0] for ref in refs if "#" in ref}
    named = ["docs/SPEC.md"] if any("#" not in ref for ref in refs) else []
    return ", ".join([*named, *(f"docs/{page}" for page in sorted(pages, reverse=True))])


def failure_section(
    invariant: Invariant,
    result: InvariantResult,
    target: str,
    options: dict[str, Any],
    out: TextIO,
    *,
    no_database: bool = False,
    command: str = "check",
) -> None:
    """The section of one invariant that did not hold (failed, crashed or timed out) or
    could not be checked; ``options`` are the run's draw options
    (``properties.options.DRAW_OPTIONS``)."""
    failure = result.failure
    assert failure is not None
    out.write(f"\n{RULE}\n{MARKS[result.status]} {invariant.id}: {invariant.statement}\n")
    out.write(f"spec: {', '.join(invariant.spec_refs)} ({_documents(invariant.spec_refs)})\n\n")
    out.write(failure.message.rstrip() + "\n")
    if failure.diagnosis:
        out.write("\nlikely cause (the outputs observed above, against the spec's):\n")
        for finding in failure.diagnosis:
            out.write(f"  - {finding}\n")
    lines = _input_lines(result)
    if lines:
        out.write("\n".join(lines) + "\n")
    if failure.traceback:
        out.write("\ntraceback:\n" + failure.traceback)
    if failure.reproduction:
        out.write("\nreproduce without hypothesis (copy into a file and run it):\n")
        out.write("-" * 100 + "\n" + failure.reproduction.rstrip() + "\n" + "-" * 100 + "\n")
    if failure.unsaved:
        out.write(
            f"not saved: the example database ({storage_directory().resolve() / 'examples'}) "
            "cannot be written, so the next run will not try this input first\n"
        )
    if result.status != "not checked":
        rerun = rerun_command(
            target, invariant.id, options, no_database=no_database, command=command
        )
        out.write(f"rerun this invariant: {rerun}\n")
    out.flush()


def summary(results: list[InvariantResult], seconds: float, out: TextIO) -> None:
    counts = {status: [r.invariant_id for r in results if r.status == status] for status in MARKS}
    examples = sum(r.examples for r in results)
    parts = [f"{len(counts['passed'])} passed", f"{len(counts['failed'])} failed"]
    parts += [
        f"{len(counts[s])} {s}"
        for s in ("crashed", "timed out", "not checked", "not applicable", "skipped")
        if counts[s]
    ]
    bad = counts["failed"] + counts["crashed"] + counts["timed out"] + counts["not checked"]
    out.write(
        f"\n{', '.join(parts)}, {examples} examples in {seconds:.1f}s"
        + (f": {', '.join(bad)}" if bad else "")
        + "\n"
    )
    out.flush()
