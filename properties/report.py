"""The conformance report: progress while the run goes, then one finding per cause.

By default a run prints a line per group of invariants as the group finishes, then a summary
of at most ``SUMMARY_LINES`` lines (each cause: what it is, the invariants it broke, one
command that reruns it), then one section per cause for its most telling invariant (the
input shrunk to the end, the standalone script, the spec's references) with one line for
each other invariant the cause broke (those past ``AIM_LINES`` named by id), and the tally
last. ``verbose`` prints a row per invariant and a full section for every one that did not
hold instead (the report before causes were grouped, and what the pytest plugin shows for
each test).
"""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from properties.causes import Cause
from properties.database import storage_directory
from properties.invariant import Invariant
from properties.options import rerun_command
from properties.reproduction import EXPECTS
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
#: the script's heading: a script saved elsewhere would not find a target imported by its
#: module name or file path from the folder the check ran in
REPRODUCE = "reproduce without hypothesis (save it in this folder and run it)"
#: the summary's length at most: a line for its title, three per cause shown
SUMMARY_LINES = 15
#: a report longer than this folds the lines of the other invariants each cause broke
REPORT_LINES = 80
#: the length a default report aims at, read at a glance: past it, the other invariants a
#: cause broke beyond the first few are named on a line of their ids, not a line each
AIM_LINES = 50
#: a row of a value table whose output agrees (``properties.assertions.value_table``)
_AGREEING_ROW = re.compile(r"^(# )?    \S+ +observed ")
_FAILING_ROW = re.compile(r"^(# )?  ✗ \S+ +observed ")


def _sentence(text: str) -> str:
    """``text`` ending as a sentence, so that the next one reads on from it."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?", ")")) else text + "."


def header(
    target: str,
    profile: str,
    count: int,
    out: TextIO,
    *,
    command: str = "check",
    note: str = "",
    verbose: bool = False,
) -> None:
    counted = f"{count} invariant{'s' if count != 1 else ''}"
    out.write(f"recon-spec {command}: {target} (profile {profile}, {counted}{note})\n\n")
    if verbose:
        out.write(f"{'invariant':<32} {'group':<11} {'result':<7} {'examples':>8} {'time':>8}\n")
    out.flush()


def row(invariant: Invariant, result: InvariantResult, out: TextIO) -> None:
    out.write(
        f"{invariant.id:<32} {invariant.group:<11} {MARKS[result.status]:<7} "
        f"{result.examples:>8} {result.seconds:>7.1f}s\n"
    )
    out.flush()


class Progress:
    """What the run shows as results come: a row each (``verbose``), or a line for each
    group once every selected invariant of it is done, in completion order."""

    def __init__(self, invariants: Sequence[Invariant], out: TextIO, *, verbose: bool) -> None:
        self.out = out
        self.verbose = verbose
        self.waiting: dict[str, list[str]] = {}
        for invariant in invariants:
            self.waiting.setdefault(invariant.group, []).append(invariant.id)
        self.done: dict[str, list[InvariantResult]] = {group: [] for group in self.waiting}
        self.group_of = {invariant.id: invariant.group for invariant in invariants}
        self.by_id = {invariant.id: invariant for invariant in invariants}
        #: the lines written, the header's two included
        self.lines = 2

    def record(self, result: InvariantResult) -> None:
        self.lines += 1
        if self.verbose:
            row(self.by_id[result.invariant_id], result, self.out)
            return
        self.lines -= 1
        group = self.group_of[result.invariant_id]
        self.done[group].append(result)
        if len(self.done[group]) == len(self.waiting[group]):
            self.done[group].sort(key=lambda r: self.waiting[group].index(r.invariant_id))
            self.out.write(group_line(group, self.done[group]) + "\n")
            self.lines += 1
            self.out.flush()

    def finish(self) -> None:
        """Groups that never completed (a run stopped by ``--maxfail``): what did run."""
        if self.verbose:
            return
        for group, results in self.done.items():
            if results and len(results) < len(self.waiting[group]):
                left = len(self.waiting[group]) - len(results)
                self.out.write(f"{group_line(group, results)}; {left} not run\n")
                self.lines += 1
        self.out.flush()


def group_line(group: str, results: Sequence[InvariantResult]) -> str:
    """``values      1 passed, 2 FAILED (oracle-agreement, oracle-agreement-logits)``."""
    parts = []
    for status, mark in MARKS.items():
        ids = [r.invariant_id for r in results if r.status == status]
        if not ids:
            continue
        if status in ("passed", "not applicable", "skipped"):
            parts.append(f"{len(ids)} {status}")
        else:
            parts.append(f"{len(ids)} {mark} ({', '.join(ids)})")
    return f"{group:<11} {', '.join(parts)}"


def _input_lines(result: InvariantResult) -> list[list[str]]:
    """The blocks that show the input: a note on another edge case, and the input."""
    failure = result.failure
    assert failure is not None
    if result.status in ("error", "not checked"):
        return []
    if result.status in ("crashed", "timed out"):
        return [["the input of that call:", f"  {failure.minimal_input}"]]
    blocks = []
    edge = failure.edge_case
    if failure.other_edge_case is not None:
        other, how = failure.other_edge_case
        blocks.append(
            [
                f"the named edge case {other.name!r} fails this invariant too, in another way "
                f"({how}). It is there because: {_sentence(other.why)}"
            ]
        )
    size = _size(failure)
    lines = []
    if edge is not None and edge.name == SAVED:
        lines.append(
            f"minimal input{size} (an earlier run found and shrank it; replayed from the "
            "example database, .hypothesis/examples):"
        )
    elif edge is not None:
        reduced = ", cut to the rows and columns that show it" if failure.edge_reduced else ""
        lines.append(
            f"the named edge case {edge.name!r} fails (no random input did). It is there "
            f"because: {_sentence(edge.why)} Input{size}{reduced}:"
        )
    if failure.shrunk and failure.bounded:
        lines.append(
            f"input{size} (shrinking stopped after {BOUNDED_SHRINK_CALLS} more steps, as for "
            "every failure after a run's first; rerun this invariant alone for a minimal one):"
        )
    elif failure.shrunk:
        lines.append(f"minimal input{size}, shrunk by hypothesis:")
    elif edge is None:
        lines.append(f"input{size}, as drawn (not shrunk):")
    lines.append(f"  {failure.minimal_input}")
    blocks.append(lines)
    return blocks


def _size(failure: Any) -> str:
    shape = failure.shape
    return "" if shape is None else f" (B x T = {shape[0]} x {shape[1]})"


def _documents(refs: Sequence[str]) -> str:
    """Where the references are written: docs/MATH.md and docs/API.md by name; an identity's
    id is rendered, with its proof, in docs/SPEC.md."""
    pages = {ref.split("#")[0] for ref in refs if "#" in ref}
    named = ["docs/SPEC.md"] if any("#" not in ref for ref in refs) else []
    return ", ".join([*named, *(f"docs/{page}" for page in sorted(pages, reverse=True))])


def compact(text: str) -> str:
    """``text`` without the rows of its value tables whose outputs agree (the rows that
    miss, marked ✗, say what is wrong), how many were left out said at the end of the
    line above each table (its heading), or after the table where it has none."""
    kept: list[str] = []
    dropped, prefix, heading, in_table = 0, "", None, False

    def note() -> None:
        if not dropped:
            return
        agree = "other output agrees" if dropped == 1 else "other outputs agree"
        if heading is None:
            kept.append(f"{prefix}    ({dropped} {agree})")
        else:
            kept[heading] += f" ({dropped} {agree})"

    for line in text.splitlines():
        agreeing = _AGREEING_ROW.match(line)
        row = agreeing is not None or _FAILING_ROW.match(line) is not None
        if row and not in_table:  # a table starts: the line above is its heading
            heading = len(kept) - 1 if kept else None
        elif not row and in_table:  # the table ends here
            note()
            dropped = 0
        in_table = row
        if agreeing:
            dropped, prefix = dropped + 1, agreeing.group(1) or ""
        else:
            kept.append(line)
    note()
    return "\n".join(kept)


_EXPECTED_ROW = re.compile(r"^#   ✗ (\S+) +observed +(\S+) +expected +(\S+) ")
_AGREE_NOTE = re.compile(r" \(\d+ other outputs? agrees?\)$")


def _expected_in_one_line(script: str) -> str:
    """The script's comment rows of outputs that miss (``#   ✗ name observed x expected
    y ...``, the section shows them in full) as one comment of the expected values, in
    place of the message line above them (the section's own first line) and with the
    count of the rows that agree."""
    lines: list[str] = []
    expected: list[str] = []

    def flush() -> None:
        if not expected:
            return
        values = ", ".join(expected)
        if lines and lines[-1].startswith(EXPECTS):
            agree = _AGREE_NOTE.search(lines[-1])
            lines[-1] = EXPECTS + values + (f"; {agree[0].strip(' ()')}" if agree else "")
        else:
            lines.append("#   expected " + values)
        expected.clear()

    for line in script.splitlines():
        found = _EXPECTED_ROW.match(line)
        if found:
            expected.append(f"{found[1]} {found[3]} (observed {found[2]})")
            continue
        flush()
        lines.append(line)
    flush()
    return "\n".join(lines)


def failure_section(
    invariant: Invariant,
    result: InvariantResult,
    target: str,
    options: dict[str, Any],
    out: TextIO,
    *,
    no_database: bool = False,
    command: str = "check",
    title: str = "",
    verbose: bool = True,
    rerun: bool = True,
) -> None:
    """The section of one invariant that did not hold (failed, crashed or timed out) or
    could not be checked; ``options`` are the run's draw options
    (``properties.options.DRAW_OPTIONS``). ``verbose``: every row of the value tables, and
    a blank line between the parts; ``rerun``: the command that reruns it (a cause's summary
    gives it instead)."""
    failure = result.failure
    assert failure is not None
    shown = (lambda text: text) if verbose else compact
    refs = invariant.refs_for(failure.shown)
    blocks: list[list[str]] = [
        [f"spec: {', '.join(refs)} ({_documents(refs)})"],
        shown(failure.message.rstrip()).splitlines(),
    ]
    if failure.state:
        blocks.append([f"state between calls: {failure.state}"])
    elif failure.flaky:
        blocks.append(
            [
                "flaky: this input failed, then passed when hypothesis tried it again: the "
                "target keeps state between calls or is not deterministic"
            ]
        )
    if failure.diagnosis:
        if verbose:
            heading = "likely cause (the outputs observed above, against the spec's):"
            blocks.append([heading, *(f"  - {finding}" for finding in failure.diagnosis)])
        else:  # the first finding on the heading's line
            first, *others = failure.diagnosis
            blocks.append([f"likely cause: {first}", *(f"{'':14}{o}" for o in others)])
    if failure.triggers:
        blocks.append(
            [f"triggered by {' and by '.join(failure.triggers)}: without it, this input passes"]
        )
    shown_input = _input_lines(result)
    if not verbose and shown_input:  # the input on the line that says what it is, alone
        *_, (*heads, head, value) = shown_input
        shown_input = [[*heads, f"{head} {value.strip()}"]]
    blocks += shown_input
    if failure.traceback:
        blocks.append(["traceback:", *failure.traceback.rstrip().splitlines()])
    if failure.reproduction:
        script = failure.reproduction.rstrip()
        if verbose:
            heading = [f"{REPRODUCE}:", "-" * 100]
        else:  # compact: no blank lines, no rows that agree, the heading in the rule
            script = _expected_in_one_line(compact(script))
            script = "\n".join(line for line in script.splitlines() if line.strip())
            heading = [f"{' ' + REPRODUCE + ' ':-^100}"]
        blocks.append([*heading, *script.splitlines(), "-" * 100])
    tail = []
    if failure.unsaved:
        tail.append(
            f"not saved: the example database ({storage_directory().resolve() / 'examples'}) "
            "cannot be written, so the next run will not try this input first"
        )
    if rerun and result.status != "not checked":
        line = rerun_command(
            target, invariant.id, options, no_database=no_database, command=command
        )
        tail.append(f"rerun this invariant: {line}")
    above = "\n" if verbose else ""  # the rule alone parts a compact report's sections
    heading = f"{title}{MARKS[result.status]} {invariant.id}: {invariant.statement}"
    out.write(f"{above}{RULE}\n{heading}\n")
    gap = [""] if verbose else []
    lines = [line for block in blocks for line in (*block, *gap)]
    if verbose:  # the spec line is followed by a blank line, as every block
        lines = lines[:-1] if not tail else lines
    out.write("\n".join([*lines, *tail]) + "\n")
    out.flush()


def _also(result: InvariantResult, invariant: Invariant) -> str:
    failure = result.failure
    assert failure is not None
    first = failure.message.strip().splitlines()[0] if failure.message.strip() else ""
    text = f"  {MARKS[result.status]} {invariant.id}: {first}"
    return text if len(text) <= 160 else text[:157] + "..."


def cause_section(
    number: int,
    cause: Cause,
    by_id: Callable[[str], Invariant],
    target: str,
    options_of: Callable[[InvariantResult], dict[str, Any]],
    out: TextIO,
    *,
    no_database: bool = False,
    command: str = "check",
    each: int | None = None,
    brief: bool = False,
) -> None:
    """The section of one cause: its representative in full, a line for each other
    invariant it broke (``each``: for its first ``each`` only, the others' ids on as few
    lines as they fit, where a line each would make the report too long to read;
    ``brief``: its heading and input alone, for a cause after those a report of
    ``REPORT_LINES`` has room for)."""
    shown = cause.representative
    if brief:
        invariant = by_id(shown.invariant_id)
        failure = shown.failure
        assert failure is not None
        size = (
            f": its input is B x T = {failure.shape[0]} x {failure.shape[1]}"
            if failure.shape
            else ""
        )
        out.write(
            f"{RULE}\n[{number}] {MARKS[shown.status]} {invariant.id}: "
            f"{invariant.statement}\n(brief, to keep the report short{size}; its rerun line "
            "in the summary, or --verbose, shows it whole)\n"
        )
        out.flush()
        return
    failure_section(
        by_id(shown.invariant_id),
        shown,
        target,
        options_of(shown),
        out,
        no_database=no_database,
        command=command,
        title=f"[{number}] ",
        verbose=False,
        rerun=False,
    )
    others = cause.others
    # one invariant alone keeps its line: folded, it would save a line at most
    lined = others if each is None or len(others) - each < 2 else others[:each]
    folded = [r.invariant_id for r in others[len(lined) :]]
    if lined:
        out.write(f"the same cause broke {len(others)} more (--verbose shows them):\n")
        for other in lined:
            out.write(_also(other, by_id(other.invariant_id)) + "\n")
    if folded:
        text = (
            f"  and {len(folded)} more: {', '.join(folded)}"
            if lined
            else f"the same cause broke {len(others)} more (--verbose shows each): "
            + ", ".join(folded)
        )
        wrapped = textwrap.wrap(text, 100, subsequent_indent="  ", break_on_hyphens=False)
        out.write("\n".join(wrapped) + "\n")
    out.flush()


def causes_text(
    causes: Sequence[Cause],
    by_id: Callable[[str], Invariant],
    target: str,
    options_of: Callable[[InvariantResult], dict[str, Any]],
    room: int,
    aim: int | None = None,
    **sections: Any,
) -> str:
    """The summary and the sections of ``causes`` in ``aim`` lines where they fit: every
    section with a line per other invariant, then fewer of those lines (the rest named on
    a line of their ids). Where even the fewest do not fit, as short as it gets in ``room``
    lines: every section with those ids alone, then, from the last cause on, a brief
    section instead of a whole one (the first cause keeps its whole section, however
    long)."""

    def text(each: int | None, full: int) -> str:
        body = io.StringIO()
        causes_summary(causes, target, options_of, body, **sections)
        for number, cause in enumerate(causes, start=1):
            cause_section(
                number, cause, by_id, target, options_of, body, each=each,
                brief=number > full, **sections,
            )  # fmt: skip
        return body.getvalue()

    most = max((len(c.others) for c in causes), default=0)
    aimed = [(None, len(causes)), *((each, len(causes)) for each in range(most - 1, -1, -1))]
    shorter = [(0, full) for full in range(len(causes), 0, -1)]
    aimed_at = room if aim is None else min(aim, room)
    for plans, limit in ((aimed, aimed_at), (shorter, room)):
        for each, full in plans:
            found = text(each, full)
            if found.count("\n") <= limit:
                return found
    return found


def causes_summary(
    causes: Sequence[Cause],
    target: str,
    options_of: Callable[[InvariantResult], dict[str, Any]],
    out: TextIO,
    *,
    no_database: bool = False,
    command: str = "check",
) -> None:
    """At most ``SUMMARY_LINES`` lines: each cause, the invariants it broke, its rerun."""
    if not causes:
        return
    each = "a section each below" if len(causes) > 1 else "its section below"
    out.write(f"\n{len(causes)} cause{'s' if len(causes) > 1 else ''} ({each}):\n")
    room = (SUMMARY_LINES - 1) // 3
    shown = causes if len(causes) <= room else causes[: room - 1]
    for number, cause in enumerate(shown, start=1):
        ids = [r.invariant_id for r in cause.results]
        listed = ", ".join(ids[:6]) + (f" and {len(ids) - 6} more" if len(ids) > 6 else "")
        rep = cause.representative
        rerun = rerun_command(
            target, rep.invariant_id, options_of(rep), no_database=no_database, command=command
        )
        out.write(f"[{number}] {cause.text}\n")
        out.write(f"    broke {len(ids)}: {listed}\n")
        # a state of the run's earlier calls: a rerun makes calls of its own before the check
        state = rep.failure is not None and rep.failure.calls_before > 0
        how = " (after calls of its own, not this run's: the script replays those)" if state else ""
        out.write(f"    rerun{how}: {rerun}\n")
    if len(shown) < len(causes):
        rest = causes[len(shown) :]
        count = sum(len(c.results) for c in rest)
        out.write(f"... and {len(rest)} more causes ({count} invariants), in the sections below\n")
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
